"""`VecNormalize`: Stable-Baselines3's observation/reward normalization wrapper, for its own loops and for `kppo.PPO`.

Used on its own, it is SB3's: `reset()` and `step()` return observations normalized with `obs_rms` and rewards
scaled by the standard deviation of the discounted return (`ret_rms`), and in `training` mode both statistics take
every reset and step (SB3's `RunningMeanStd` update; `training=False` freezes them; `norm_obs` / `norm_reward` switch
each part; `get_original_obs` / `get_original_reward` give the raw values).

Once a model takes it (`PPO(...)`, `PPO.load(..., env=...)`, `set_env`), the model and the wrapper hold ONE set of
statistics: the model's, which `learn` updates inside the training program (the rollout steps the vector env below
this wrapper, normalizing in the model), and which the wrapper reads and updates (its own resets and steps still
count in `training` mode). The model starts from the wrapper's statistics when it has any (those `load` read, or
those its own steps gathered). Its `reset()` / `step()` then return the raw observations and rewards: kppo's
`model.predict` takes raw observations and normalizes them inside (as its exported artifacts do), so SB3's loop
`obs = env.reset(); model.predict(obs)` acts as SB3's does. `save`/`load` write and read the statistics as JSON
(never a pickle; `load` also reads SB3's `vec_normalize.pkl`, as data, a reward-only one included);
`PPO.use_vec_normalize` freezes them into a model without an env.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import gymnasium as gym
from gymnasium.vector import VectorEnv

from kppo._tf import tf
from kppo.core import normalization
from kppo.core.types import Moments
from kppo.vec_envs.vec_env import VecEnv, VecEnvWrapper
from kppo.gym_envs.spaces import (
    encode_rows,
    flat_dim,
    input_rows,
    is_encoded,
    is_image_space,
    layout,
    space_shape,
)
from kppo.sb3.running_mean_std import RunningMeanStd
from kppo.sb3.saves.vec_normalize_pickle import is_pickle, read_vec_normalize
from kppo.training.runners.settings import norm_constants

FORMAT = "kppo.VecNormalize/1"


def _positive(name: str, value: Any) -> float:
    """A VecNormalize constant as a float, or a one-line ValueError naming it."""
    number = value if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) else None
    if number is None or not 0 < float(number) < float("inf"):
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    return float(number)


#: The Config fields a VecNormalize sets on the model that takes it (`VecNormalize.config_fields`).
CONFIG_FIELDS = (
    "normalize_obs",
    "normalize_reward",
    "normalize_obs_keys",
    "clip_obs",
    "clip_reward",
    "norm_epsilon",
    "norm_gamma",
)


def settings_fields(settings: dict[str, Any]) -> dict[str, Any]:
    """The Config fields of VecNormalize's settings (SB3's names; absent ones at SB3's defaults), constants checked."""
    return dict(
        normalize_obs=bool(settings.get("norm_obs", True)),
        normalize_reward=bool(settings.get("norm_reward", True)),
        clip_obs=_positive("clip_obs", settings.get("clip_obs", normalization.CLIP)),
        clip_reward=_positive("clip_reward", settings.get("clip_reward", normalization.CLIP)),
        norm_epsilon=_positive("epsilon", settings.get("epsilon", normalization.EPSILON)),
    )


def _constant_property(name: str) -> property:
    """SB3's attribute `name` (clip_obs, clip_reward, epsilon): the wrapper's own until a model takes the env, then
    the model's, which only the same value may be assigned to."""
    return property(lambda self: self._constant(name), lambda self, value: self._set_constant(name, value))


def _stats(moments: Any) -> RunningMeanStd | None:
    return None if moments is None else RunningMeanStd.of(moments.mean, moments.var, moments.count)


def model_moments(rms: RunningMeanStd) -> Moments:
    """`rms` as the float32 numpy moments a kppo model normalizes with."""
    return normalization.to_numpy(Moments(rms.mean, rms.var, np.float32(rms.count)))


class VecNormalize(VecEnvWrapper):
    """SB3's `VecNormalize(venv, training, norm_obs, norm_reward, clip_obs, clip_reward, gamma, epsilon,
    norm_obs_keys)` for `kppo.PPO` (see the module docstring).

    `clip_obs`, `clip_reward` and `epsilon` become the model's `Config.clip_obs`, `clip_reward` and `norm_epsilon`
    when a model takes this env (set them before; once a model uses the env they read the model's and cannot change:
    they are constants of its compiled program); `gamma` becomes `Config.norm_gamma` alike, the discount of the
    running return that scales the rewards, apart from PPO's `gamma` as in SB3. A Dict's `norm_obs_keys` are
    normalized (SB3's default, None, is every key; kppo's is every key but the images: SB3 would turn a normalized
    image into a float Box that its CombinedExtractor flattens instead of convolving).
    """

    def __init__(
        self,
        venv: VecEnv | VectorEnv,
        training: bool = True,
        norm_obs: bool = True,
        norm_reward: bool = True,
        clip_obs: float = 10.0,
        clip_reward: float = 10.0,
        gamma: float = 0.99,
        epsilon: float = 1e-8,
        norm_obs_keys: list[str] | None = None,
    ):
        if isinstance(venv, VectorEnv):
            venv = VecEnv(venv)
        if not isinstance(venv, VecEnv):
            raise ValueError(
                f"venv: expected a VecEnv (e.g. kppo.make_vec_env(...)) or a gymnasium VectorEnv, got "
                f"{type(venv).__name__}"
            )
        if norm_obs_keys is not None and not isinstance(venv.observation_space, gym.spaces.Dict):
            raise ValueError(
                f"norm_obs_keys: expected None for a {type(venv.observation_space).__name__} observation space (the "
                f"param is applicable only with Dict observation spaces), got {norm_obs_keys!r}"
            )
        if norm_obs and not isinstance(venv.observation_space, (gym.spaces.Box, gym.spaces.Dict)):
            raise ValueError(
                f"norm_obs: VecNormalize only supports Box and Dict observation spaces, got {venv.observation_space} "
                f"(norm_obs=False normalizes the rewards alone)"
            )
        super().__init__(venv)
        self.training, self.norm_obs, self.norm_reward = bool(training), bool(norm_obs), bool(norm_reward)
        self.model: Any = None  # the kppo.PPO using this env (set by PPO): it holds the statistics from then on
        self.gamma = gamma
        self._constants = normalization.Constants(
            _positive("clip_obs", clip_obs), _positive("clip_reward", clip_reward), _positive("epsilon", epsilon)
        )
        #: A Dict's normalized keys (None: every key but the images, `kppo.gym_envs.spaces.normalized_columns`).
        self.norm_obs_keys = None if norm_obs_keys is None else tuple(norm_obs_keys)
        #: The wrapper's own (obs_rms, ret_rms) while no model holds them: those `load` read, those
        #: `sync_envs_normalization` copied, or those its own resets and steps gathered; None while fresh.
        self.loaded: tuple[Any, Any] | None = None
        self.returns = np.zeros(self.num_envs)  # SB3's running discounted return of each env (its own steps)
        self.old_obs: Any = None  # the last raw observations and rewards stepped through SB3's API (SB3's names)
        self.old_reward: np.ndarray | None = None
        #: The venv's own space (what the statistics' layout and a model read); `observation_space` is SB3's.
        self.raw_observation_space = self.observation_space
        self.observation_space = self._sb3_space(self.observation_space)

    def _sb3_space(self, space: gym.spaces.Space) -> gym.spaces.Space:
        """SB3's `observation_space` of the wrapper: with `norm_obs`, a normalized image (a Box, or a Dict's
        normalized image key) is a float32 Box in [-clip_obs, clip_obs], as SB3 sets it (its issue 1214)."""
        if not self.norm_obs:
            return space
        clip = self._constants.clip_obs

        def as_float(sub: gym.spaces.Space) -> gym.spaces.Space:
            shape = space_shape(sub)
            return gym.spaces.Box(-clip, clip, shape, np.float32) if is_image_space(sub) else sub

        if isinstance(space, gym.spaces.Dict):
            keys = self._normalized_keys(space)
            return gym.spaces.Dict({key: as_float(sub) if key in keys else sub for key, sub in space.spaces.items()})
        return as_float(space)

    def _constant(self, name: str) -> float:
        if self.model is not None and self.model.config is not None:
            return float(getattr(norm_constants(self.model.config), name))
        return float(getattr(self._constants, name))

    def _set_constant(self, name: str, value: Any) -> None:
        value = _positive(name, value)
        if self.model is not None and self.model.config is not None and value != self._constant(name):
            raise ValueError(
                f"{name}: the model using this env was built with {self._constant(name):g}, got {value!r} (set it "
                f"before the model takes the env: VecNormalize(..., {name}=...) or env.{name} = ... then set_env)"
            )
        self._constants = self._constants._replace(**{name: value})

    @property
    def gamma(self) -> float:
        """SB3's `gamma`, the discount of the running return that scales the rewards: the wrapper's own until a model
        takes the env, then the model's `Config.norm_gamma`, which only the same value may be assigned to."""
        built = self.model.config.norm_gamma if self.model is not None and self.model.config is not None else None
        return self._gamma if built is None else float(built)

    @gamma.setter
    def gamma(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"gamma: expected a number in [0, 1], got {value!r}")
        if self.model is not None and self.model.config is not None and float(value) != self.gamma:
            raise ValueError(
                f"gamma: the model using this env was built with {self.gamma:g}, got {value!r} (set it before the "
                f"model takes the env: VecNormalize(..., gamma=...) or env.gamma = ... then set_env)"
            )
        self._gamma = float(value)

    clip_obs = _constant_property("clip_obs")
    clip_reward = _constant_property("clip_reward")
    epsilon = _constant_property("epsilon")

    def config_fields(self) -> dict[str, Any]:
        """The Config fields this wrapper sets on a model that takes it: SB3's settings under kppo's names."""
        settings = dict(norm_obs=self.norm_obs, norm_reward=self.norm_reward, **self._constants._asdict())
        return {**settings_fields(settings), "normalize_obs_keys": self.norm_obs_keys, "norm_gamma": self.gamma}

    def _model_holds(self) -> bool:
        """Whether a model with networks uses this env, and so holds the statistics."""
        return self.model is not None and self.model.agent is not None

    def _moments(self) -> tuple[Any, Any]:
        if self._model_holds():
            return self.model.statistics()
        return self.loaded if self.loaded is not None else (None, None)

    def _store(self, obs_rms: RunningMeanStd, ret_rms: RunningMeanStd) -> None:
        """New statistics: into the model that holds them, else the wrapper's own."""
        if self._model_holds():
            self.model._set_statistics(model_moments(obs_rms), model_moments(ret_rms))
        else:
            self.loaded = (obs_rms, ret_rms)

    @property
    def obs_rms(self) -> RunningMeanStd:
        """The observation statistics: the model's once a model uses this env, those `load` read, or before either
        SB3's fresh `RunningMeanStd` (mean 0, var 1, count 1e-4) of a flattened observation. A copy: its `update`
        writes back, and so does assigning one (`env.obs_rms = other.obs_rms`, as SB3's)."""
        rms = _stats(self._moments()[0]) or RunningMeanStd(shape=(flat_dim(self.raw_observation_space),))
        rms.sink = lambda new: self._store(new.copy(), self.ret_rms)
        return rms

    @obs_rms.setter
    def obs_rms(self, rms: RunningMeanStd) -> None:
        self._store(RunningMeanStd.of(*rms), self.ret_rms)

    @property
    def ret_rms(self) -> RunningMeanStd:
        """The discounted-return statistics used to scale rewards (fresh, as `obs_rms`, before a model or a load)."""
        rms = _stats(self._moments()[1]) or RunningMeanStd()
        rms.sink = lambda new: self._store(self.obs_rms, new.copy())
        return rms

    @ret_rms.setter
    def ret_rms(self, rms: RunningMeanStd) -> None:
        self._store(self.obs_rms, RunningMeanStd.of(*rms))

    def _normalized_keys(self, space: gym.spaces.Space | None = None) -> list[str]:
        """A Dict's keys that `normalize_obs` standardizes: `norm_obs_keys`, or every key but the images."""
        space = cast(gym.spaces.Dict, space or self.raw_observation_space)
        if self.norm_obs_keys is not None:
            return list(self.norm_obs_keys)
        return [key for key, sub in space.spaces.items() if not is_image_space(sub)]

    def _map_obs(self, obs: Any, fn: Any) -> Any:
        """`fn` (float64 rows [N, D] of flat statistics' layout -> rows) applied to one observation or a batch of
        this env's space, returned in the observation's structure as float32 (a Dict's other keys as they are)."""
        space = self.raw_observation_space
        if isinstance(space, gym.spaces.Dict):
            if not isinstance(obs, dict):
                raise ValueError(f"obs: expected a dict for a Dict observation space, got {type(obs).__name__}")
            keys, chosen = list(space.spaces), self._normalized_keys()
            arrays = {key: np.asarray(obs[key]) for key in keys}
            single = arrays[keys[0]].ndim == len(space_shape(space[keys[0]]))
            n = 1 if single else len(arrays[keys[0]])
            if is_encoded(space):  # the statistics' layout is the networks' rows: a Discrete key one-hot
                batch = {key: array.reshape(n, *space_shape(space[key])) for key, array in arrays.items()}
                rows = encode_rows(space, input_rows(space, batch)).astype(np.float64)
            else:
                rows = np.concatenate([arrays[key].reshape(n, -1) for key in keys], axis=1).astype(np.float64)
            out, mapped = dict(obs), fn(rows)
            for part in layout(space):
                if part.key in chosen and part.kind == "Box":  # an integer key stays as it is (counted one-hot)
                    out[part.key] = mapped[:, part.encoded].reshape(arrays[part.key].shape).astype(np.float32)
            return out
        array = np.asarray(obs)
        return fn(array.reshape(-1, flat_dim(space)).astype(np.float64)).reshape(array.shape).astype(np.float32)

    def normalize_obs(self, obs: Any) -> Any:
        """SB3's `normalize_obs`: clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs) with `obs_rms`, as
        float32 (one observation or a batch; a Dict's normalized keys only)."""
        if not self.norm_obs:
            return obs
        rms, epsilon, clip = self.obs_rms, self.epsilon, self.clip_obs
        return self._map_obs(obs, lambda rows: np.clip((rows - rms.mean) / np.sqrt(rms.var + epsilon), -clip, clip))

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """SB3's `normalize_reward`: clip(reward / sqrt(ret_rms.var + epsilon), -clip_reward, clip_reward), as float32
        (SB3 casts the float64 its statistics give)."""
        if not self.norm_reward:
            return np.asarray(reward).astype(np.float32)
        scale = np.sqrt(self.ret_rms.var + self.epsilon)
        return np.clip(reward / scale, -self.clip_reward, self.clip_reward).astype(np.float32)

    def unnormalize_obs(self, obs: Any) -> Any:
        """SB3's `unnormalize_obs`: obs * sqrt(var + epsilon) + mean (the clipping is not undone)."""
        if not self.norm_obs:
            return obs
        rms, epsilon = self.obs_rms, self.epsilon
        return self._map_obs(obs, lambda rows: rows * np.sqrt(rms.var + epsilon) + rms.mean)

    def unnormalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """SB3's `unnormalize_reward`: reward * sqrt(ret_rms.var + epsilon)."""
        return reward * np.sqrt(self.ret_rms.var + self.epsilon) if self.norm_reward else reward

    def _count_obs(self, obs: Any) -> None:
        """SB3's `obs_rms.update(obs)` in `training` mode with `norm_obs` (the flat rows of a batch)."""
        if self.training and self.norm_obs:
            seen: list[np.ndarray] = []

            def keep(rows: np.ndarray) -> np.ndarray:
                seen.append(rows)
                return rows

            self._map_obs(obs, keep)
            self.obs_rms.update(seen[0])  # written back (`obs_rms`)

    def reset(self) -> Any:
        """SB3's `reset`: the observations normalized (raw once a model holds the statistics: the model normalizes
        inside), counted in `obs_rms` in `training` mode; the running returns restart at 0."""
        obs = super().reset()
        self.old_obs = obs
        self.returns = np.zeros(self.num_envs)
        self._count_obs(obs)
        return obs if self._model_holds() else self.normalize_obs(obs)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """SB3's `step_wait`: in `training` mode the observations counted in `obs_rms` and the discounted returns
        (returns * gamma + reward, restarting at 0 after an episode's end) in `ret_rms`; the observations (and a
        finished episode's `terminal_observation`) normalized and the rewards scaled, unless a model holds the
        statistics (then raw, as `reset`'s). The raw values stay for `get_original_obs` / `get_original_reward`."""
        obs, rewards, dones, infos = super().step_wait()
        self.old_obs, self.old_reward = obs, rewards
        self._count_obs(obs)
        if self.training:
            self.returns = self.returns * self.gamma + rewards
            self.ret_rms.update(self.returns)
        self.returns[np.asarray(dones, bool)] = 0
        if self._model_holds():
            return obs, rewards, dones, infos
        for info in infos:
            if "terminal_observation" in info:
                info["terminal_observation"] = self.normalize_obs(info["terminal_observation"])
        return self.normalize_obs(obs), self.normalize_reward(rewards), dones, infos

    def get_original_obs(self) -> Any:
        """The last raw observations `reset` / `step` gave through SB3's API (`learn`'s own steps do not pass
        here: the rollout steps the vector env below this wrapper)."""
        return self.old_obs

    def get_original_reward(self) -> np.ndarray | None:
        """The last raw rewards `step` gave through SB3's API."""
        return self.old_reward

    def loaded_moments(self) -> tuple[Moments | None, Moments | None]:
        """The statistics `load` read, as the moments a kppo run starts from."""
        moments = tuple(
            None if rms is None else Moments(*(tf.constant(x, tf.float32) for x in rms))
            for rms in (self.loaded or (None, None))
        )
        return cast(tuple[Moments | None, Moments | None], moments)

    def save(self, path: str | Path) -> None:
        """Writes the settings and statistics as JSON (SB3 pickles the wrapper)."""
        stats = {
            name: None if rms is None else {"mean": rms.mean.tolist(), "var": rms.var.tolist(), "count": rms.count}
            for name, rms in (("obs_rms", self.obs_rms), ("ret_rms", self.ret_rms))
        }
        settings = {
            "training": self.training,
            "norm_obs": self.norm_obs,
            "norm_reward": self.norm_reward,
            "gamma": self.gamma,
            "clip_obs": self.clip_obs,
            "clip_reward": self.clip_reward,
            "epsilon": self.epsilon,
            "norm_obs_keys": None if self.norm_obs_keys is None else list(self.norm_obs_keys),
        }
        Path(path).write_text(json.dumps({"format": FORMAT, **settings, **stats}, indent=2))

    @staticmethod
    def load(load_path: str | Path, venv: VecEnv | VectorEnv) -> VecNormalize:
        """A wrapper around `venv` with the settings and statistics of `load_path`: a JSON file `save` wrote, or
        the `vec_normalize.pkl` Stable-Baselines3's `VecNormalize.save` wrote (read as data by
        `kppo.sb3.saves.vec_normalize_pickle`: nothing is unpickled or executed). The statistics must fit `venv`'s
        observations."""
        settings, loaded = read_statistics(load_path)
        wrapper = VecNormalize(venv, **settings)
        obs_rms = loaded[0]
        if obs_rms is not None and int(np.size(obs_rms.mean)) != flat_dim(wrapper.raw_observation_space):
            raise ValueError(
                f"load_path: {str(load_path)!r} holds statistics of {int(np.size(obs_rms.mean))} observation values, "
                f"expected {flat_dim(wrapper.raw_observation_space)} (venv's {wrapper.raw_observation_space})"
            )
        wrapper.loaded = loaded
        return wrapper


def read_statistics(load_path: str | Path) -> tuple[dict[str, Any], tuple[Any, Any]]:
    """(VecNormalize's constructor settings, (obs_rms, ret_rms) as float64 `RunningMeanStd`, SB3's precision: a
    wrapper loaded holds the statistics saved, bit for bit) of a file `save` wrote (JSON) or SB3's
    `vec_normalize.pkl`; one-line ValueErrors otherwise."""
    if is_pickle(load_path):
        settings, obs, ret = read_vec_normalize(load_path)
        stats = tuple(None if s is None else RunningMeanStd.of(s.mean, s.var, s.count) for s in (obs, ret))
        return settings, cast(tuple[Any, Any], stats)
    try:
        data = json.loads(Path(load_path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"load_path: expected a JSON file written by kppo.VecNormalize.save or SB3's vec_normalize.pkl, could "
            f"not read {str(load_path)!r} ({type(err).__name__})"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(
            f"load_path: expected a file written by kppo.VecNormalize.save (format {FORMAT!r}), got {str(load_path)!r}"
        )
    settings = dict(
        training=data["training"],
        norm_obs=data["norm_obs"],
        norm_reward=data["norm_reward"],
        gamma=data["gamma"],
        norm_obs_keys=data.get("norm_obs_keys"),  # absent in files of earlier versions, as the constants
        **{k: data[k] for k in ("clip_obs", "clip_reward", "epsilon") if k in data},
    )
    from_json: tuple[Any, ...] = tuple(
        None if data[k] is None else RunningMeanStd.of(data[k]["mean"], data[k]["var"], float(data[k]["count"]))
        for k in ("obs_rms", "ret_rms")
    )
    return settings, cast(tuple[Any, Any], from_json)


def frozen_statistics(
    vec_normalize: VecNormalize | str | Path, size: int
) -> tuple[dict, Moments | None, Moments | None]:
    """What `PPO.use_vec_normalize` freezes into a model without an env: (Config fields of the wrapper's settings,
    observation moments, return moments or None) of a wrapper `VecNormalize.load` returned or of the file itself
    (kppo's JSON or SB3's `vec_normalize.pkl`, read as data); a one-line ValueError unless the observation statistics
    hold the model's `size` values. A reward-only wrapper (`norm_obs=False`) may have none: the observation moments
    are then None (the model's stay). The fields leave out `normalize_obs_keys`: the model keeps the keys it was
    trained with."""
    if isinstance(vec_normalize, VecNormalize):
        fields = vec_normalize.config_fields()
        loaded = vec_normalize.loaded or (vec_normalize.obs_rms, vec_normalize.ret_rms)
    else:
        settings, loaded = read_statistics(vec_normalize)
        fields = settings_fields(settings)
    obs_rms, ret_rms = loaded
    if obs_rms is None and not fields["normalize_obs"]:
        pass
    elif obs_rms is None or int(np.size(obs_rms.mean)) != size:
        raise ValueError(
            f"vec_normalize: expected statistics of the model's {size} observation values, got "
            f"{'none' if obs_rms is None else int(np.size(obs_rms.mean))}"
        )
    fields.pop("normalize_obs_keys", None)

    def moments(rms: Any) -> Moments:
        return Moments(*(tf.constant(np.asarray(x), tf.float32) for x in rms))

    return fields, None if obs_rms is None else moments(obs_rms), None if ret_rms is None else moments(ret_rms)
