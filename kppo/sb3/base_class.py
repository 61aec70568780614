"""`BaseAlgorithm`: Stable-Baselines3's model surface without torch (stable_baselines3/common/base_class.py).

The constructor's common arguments (policy, learning rate, policy_kwargs, seed, device, logging), the env (`env`,
`get_env`, `set_env`, `get_vec_normalize_env`, `n_envs`, the spaces), `policy` and `predict` (the one predict:
`kppo.Policy.predict`), `save` / `load` (`kppo.sb3.save_util`; Stable-Baselines3's own zips through
`kppo.sb3.saves.from_sb3`), `get_parameters` / `set_parameters` as numpy, `set_random_seed`, the logger and
`lr_schedule`. The normalization statistics a model holds are `ModelStatistics`' (`kppo.sb3.model_statistics`);
training is `OnPolicyAlgorithm`'s (`kppo.sb3.on_policy_algorithm`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import gymnasium as gym
import numpy as np

from kppo.core.errors import ArgumentError
from kppo.agent.agent import Agent, make_policy
from kppo.agent.archive import agent_dir
from kppo.agent.policy import Policy, PredictKeys
from kppo.config.options import Config
from kppo.gym_envs.vector import GymVecEnv
from kppo.sb3.arguments import Schedule, extractor_fields, policy_config, split_schedule
from kppo.sb3.arguments import tf_device
from kppo.sb3.buffers import RolloutBufferView, rollout_view
from kppo.sb3.contracts import check_predict, check_stats_window, policy_hint
from kppo.sb3.logger import Logger
from kppo.sb3.model_statistics import ModelStatistics, Stats
from kppo.sb3.parameters import PARAMETER_GROUPS, assign_parameters, get_parameters, numpy_parameters, parameters
from kppo.sb3.policies import ActorCriticPolicy
from kppo.sb3.save_util import load_model, save_model
from kppo.sb3.saves.from_sb3 import model_from_sb3
from kppo.sb3.saves.sb3_save import is_sb3_save, read_sb3_save
from kppo.sb3.utils import maybe_transpose, set_random_seed, unwrap_vec_normalize
from kppo.sb3.vec_normalize import VecNormalize
from kppo.training.agents import load_agent
from kppo.training.runners.settings import agent_spec
from kppo.training.runners import Runner, Start
from kppo.vec_envs.vec_env import VecEnv

__all__ = [
    "MIXED_API_HINT",
    "PARAMETER_GROUPS",
    "BaseAlgorithm",
    "RolloutBufferView",  # kppo.sb3.buffers' own, importable here as before
    "assign_parameters",
    "check_not_gym_tuple",
    "parameters",
    "rollout_view",
]

#: SB3's message for `predict((obs, info))`.
MIXED_API_HINT = (
    "observation: You have passed a tuple to the predict() function instead of a Numpy array or a Dict. You are "
    "probably mixing Gym API with SB3 VecEnv API: `obs, info = env.reset()` (Gym) vs `obs = vec_env.reset()` (SB3 "
    "VecEnv); see https://stable-baselines3.readthedocs.io/en/master/guide/vec_envs.html#vecenv-api-vs-gym-api"
)
_Model = TypeVar("_Model", bound="BaseAlgorithm")
Spaces = tuple[gym.spaces.Space, gym.spaces.Space]  # (observation space, action space)


def check_not_gym_tuple(observation: Any) -> None:
    """SB3's one-line error for `predict((obs, info))`: the Gym API's `reset()` result given as an observation."""
    if isinstance(observation, tuple) and len(observation) == 2 and isinstance(observation[1], dict):
        raise ValueError(MIXED_API_HINT)


def _lstm_sizes(config: Config | None) -> tuple[int, int] | None:
    """(n_lstm_layers, lstm_hidden_size) of a recurrent model's Config; None for a feed-forward one."""
    if config is None or config.recurrent is None:
        return None
    return config.n_lstm_layers, config.lstm_hidden_size


class BaseAlgorithm(ModelStatistics):
    """SB3's `BaseAlgorithm`: what a model is beside its training. Subclasses add the training (`_build` takes an env
    without resetting it, `OnPolicyAlgorithm`) and the arguments a save holds besides these
    (`_saved_hyperparameters`)."""

    policy_names: tuple[str, ...] = ("MlpPolicy", "CnnPolicy", "MultiInputPolicy")
    _policy_config: Callable[[dict], dict[str, Any]] = staticmethod(policy_config)  # policy_kwargs -> Config fields

    def __init__(
        self,
        policy: str,
        learning_rate: float | Schedule,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        device: str = "auto",
        seed: int | None = None,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
    ):
        if policy not in self.policy_names:
            raise ValueError(f"policy: expected one of {self.policy_names}, got {policy!r}{policy_hint(policy)}")
        check_stats_window(stats_window_size)
        self.policy_class = policy
        self.verbose = verbose
        self.seed = int(cast(int, np.random.SeedSequence().entropy) % 2**31) if seed is None else int(seed)
        self._seed_given = seed is not None  # None: a VecEnv's own seed (make_vec_env(seed=...)) seeds its resets
        self.device = tf_device(device)
        self.tensorboard_log = tensorboard_log
        self.sb3_version: str | None = None  # the Stable-Baselines3 version of a loaded SB3 save
        self.learning_rate, self._lr_schedule = split_schedule(learning_rate, "learning_rate")
        self._current_lr = self.learning_rate
        self.use_sde, self.sde_sample_freq = bool(use_sde), int(sde_sample_freq)
        self.stats_window_size = stats_window_size
        self._policy_fields = self._policy_config(dict(policy_kwargs or {}))
        self.policy_kwargs = dict(policy_kwargs or {})
        extractor_fields(policy, dict(self.policy_kwargs), None)  # its one-line errors now
        self.num_timesteps, self._total_timesteps, self._n_updates = 0, 0, 0
        self.agent: Agent | None = None
        self.config: Config | None = None
        self._spaces: Spaces | None = None
        self._loaded_stats: Stats | None = None
        self._runner: Runner | None = None  # the host runner and its state (made by the first learn on an env)
        self.runner_state: Any = None
        self._pending: Start | None = None  # what the runner starts from, until `learn` makes it (SB3's reset)
        self._gym_env: GymVecEnv | None = None  # the gymnasium vector env trained on (`env`: SB3's VecEnv over it)
        self._sb3_env: VecEnv | None = None  # what get_env() returns
        self._policy: Policy | None = None
        self._sb3_policy: ActorCriticPolicy | None = None  # `policy`, made at first use
        self._predict_keys = PredictKeys()  # the keys of stochastic predict calls: [seed, n] for the n-th
        self.logger = Logger(verbose)

    _build: Callable[[Any, Start], None]  # the subclass's: trains on an env from a `Start` from now on

    def _require_agent(self, what: str) -> Agent:
        if self.agent is None:
            raise ValueError(f"{what}: the model has no networks yet; construct it with an env or load() it")
        return self.agent

    # --- the env ---
    def get_env(self) -> VecEnv | None:
        """The training env with SB3's VecEnv interface (`reset() -> obs`, `step -> (obs, rewards, dones,
        infos)`): the VecEnv the model was given, or one over the gymnasium vector env it trains on."""
        return self._sb3_env

    env = property(get_env, doc="SB3's `model.env` (and lit_sb3's): the training env as a VecEnv, or None.")

    def set_env(self, env: Any, force_reset: bool = True) -> None:
        """Uses `env` from now on; its spaces and number of envs must be the model's (`load(path, env)` takes any
        number), a one-line error otherwise. Nothing is reset here, as in SB3 (a VecNormalize's statistics stay as they
        are): the next `learn` resets the env first; with `force_reset=False` and the env the model holds
        (`get_env()`), it goes on from the last observations, as SB3's."""
        given = getattr(env, "num_envs", 1)
        if self.agent is not None and self.config is not None and given != self.config.num_envs:
            raise ArgumentError(
                f"env: The number of environments to be set is different from the number of environments in the "
                f"model: ({given} != {self.config.num_envs}), whereas `set_env` requires them to be the same. To load "
                f"a model with a different number of environments, you must use `{type(self).__name__}.load(path, "
                f"env)` instead"
            )
        if force_reset or self._runner is None or env is not self._sb3_env:
            self._use_env(env)

    def _use_env(self, env: Any) -> None:
        """`set_env` without SB3's check of the number of envs (a load takes any number)."""
        if self.agent is None:
            self._build(env, Start())
            return
        old_runner, old_env = self._runner, self._gym_env
        self._build(env, Start(self.agent, *self._statistics()))
        new_env = self._gym_env
        if old_env is not None and new_env is not None and old_env.vec_env is new_env.vec_env:
            return  # the same envs again (`set_env(model.get_env())`): they stay open
        if old_runner is not None:
            old_runner.close()

    def get_vec_normalize_env(self) -> VecNormalize | None:
        """The `VecNormalize` in the training env's wrappers, or None."""
        return None if self._sb3_env is None else unwrap_vec_normalize(self._sb3_env)

    @property
    def n_envs(self) -> int:
        return 0 if self._gym_env is None else self._gym_env.num_envs

    @property
    def observation_space(self) -> gym.spaces.Space:
        return self._model_spaces()[0]

    @property
    def action_space(self) -> gym.spaces.Space:
        return self._model_spaces()[1]

    def _model_spaces(self) -> tuple[gym.spaces.Space, gym.spaces.Space]:
        """The networks' (observation space, action space), set with them (`_build`, `load`)."""
        assert self._spaces is not None, "the model has no networks yet"
        return self._spaces

    # --- the policy ---
    @property
    def policy(self) -> ActorCriticPolicy:
        """SB3's `model.policy`: the `ActorCriticPolicy` surface over the networks (`kppo.sb3.policies`)."""
        if self._sb3_policy is None:
            self._sb3_policy = ActorCriticPolicy(self)
        return self._sb3_policy

    @property
    def kppo_policy(self) -> Policy:
        """kppo's own policy (numpy acting, what `kppo.export` converts) with the current normalization statistics."""
        return self._get_policy()

    @property
    def _last_obs(self) -> Any:
        """SB3's `_last_obs`: the observations the next rollout step acts on, as the env returned them; set by the
        first `learn`'s reset (None before it, and again after `set_env`, as SB3's)."""
        return None if self._runner is None else self.runner_state.rollout.raw_obs

    def _get_policy(self) -> Policy:
        agent = self._require_agent("predict")
        if self._policy is None:
            assert self.config is not None  # set with the agent
            self._policy = make_policy(agent, self._statistics()[0], agent_spec(self.config), *self._model_spaces())
            self._policy.keys = self._predict_keys  # one count of predict calls across rebuilt policies
        self._predict_keys.seed = self.seed  # set_random_seed may have changed it
        return self._policy

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: Any = None,
    ):
        """(action, state) for one raw observation or a batch (`kppo.Policy.predict`; an HWC image for a CHW policy
        transposed first, as SB3's `maybe_transpose`): state None (zeros, as `episode_start` True), or a recurrent
        policy's (h, c), each [n_lstm_layers, n, lstm_hidden_size]; `action_masks`: sb3-contrib's MaskablePPO's."""
        check_not_gym_tuple(observation)
        if self._spaces is not None:  # SB3's maybe_transpose: an HWC frame for a CHW policy, then SB3's checks
            observation = maybe_transpose(observation, self._spaces[0])
            check_predict(observation, state, episode_start, self._spaces[0], _lstm_sizes(self.config))
        return self._get_policy().predict(observation, state, episode_start, deterministic, action_masks)

    # --- parameters, seeds, logger ---
    def get_parameters(self) -> dict[str, dict[str, np.ndarray]]:
        """SB3's `get_parameters` as numpy: {"policy": SB3's `policy.state_dict()` names and torch's layouts
        ("mlp_extractor.value_net.0.bias", ...; kppo's Keras paths for a user's extractor), "policy.optimizer":
        kppo's optimizer variables by Keras path} (`kppo.sb3.parameters`)."""
        return get_parameters(self._require_agent("get_parameters"))

    def set_parameters(
        self, load_path_or_dict: str | Path | IO[bytes] | dict, exact_match: bool = True, device: str = "auto"
    ) -> None:
        """Sets the networks' (and optimizer's) variables from `get_parameters`' dict ("policy" under SB3's names
        or kppo's) or from a saved model (a path or file that `load` reads; an SB3 zip gives its `policy.pth`, and
        kppo's optimizer state stays); `exact_match=False` allows a subset, as torch's `strict=False`. `device` is
        accepted for SB3's signature (TensorFlow places the variables)."""
        del device
        agent = self._require_agent("set_parameters")
        if isinstance(load_path_or_dict, dict):
            assign_parameters(agent, load_path_or_dict, exact_match)
        elif is_sb3_save(load_path_or_dict):  # its optimizer state is torch's: kppo's stays
            assign_parameters(agent, {"policy": read_sb3_save(load_path_or_dict).state_dict}, exact_match, ("policy",))
        else:
            assign_parameters(agent, numpy_parameters(load_agent(agent_dir(load_path_or_dict)).agent), exact_match)
        self._policy = None  # the next predict acts with the new weights

    def set_random_seed(self, seed: int | None = None) -> None:
        """SB3's `set_random_seed`: the model's seed (its sampling keys), Python's, numpy's and TensorFlow's global
        generators (`kppo.set_random_seed`), and the env's next reset and action space."""
        if seed is None:
            return
        self.seed = int(seed)
        set_random_seed(self.seed)
        if self._sb3_env is not None:
            self._sb3_env.action_space.seed(self.seed)
            self._sb3_env.seed(self.seed)

    def set_logger(self, logger: Any) -> None:
        """Uses `logger` (anything with SB3's `record(key, value)` and `dump(step)`) from now on."""
        self.logger = logger

    def get_logger(self) -> Any:
        return self.logger

    @property
    def lr_schedule(self) -> Callable[[float], float]:
        """SB3's `lr_schedule`: progress_remaining (1 -> 0) -> learning rate (a float, as SB3 casts it)."""
        schedule, constant = self._lr_schedule, float(self.learning_rate)
        return lambda progress_remaining: constant if schedule is None else float(schedule(progress_remaining))

    # --- save and load ---
    def save(self, path: str | Path | Any, exclude: Any = None, include: Any = None) -> None:
        """Writes the model as SB3 does: to `path.zip` (`path` itself when it ends in .zip) or into an open binary
        file. The zip holds a kppo agent directory (config.yaml, metadata.json, weights/): no pickle. Schedules are
        saved as their current values. `exclude` names arguments to leave out (a load gives them their defaults),
        unless `include` names them too, as SB3's; the policy and its networks are always saved."""
        save_model(self, path, exclude, include)

    @classmethod
    def load(
        cls: type[_Model],
        path: str | Path | Any,
        env: Any = None,
        device: str = "auto",
        custom_objects: dict | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> _Model:
        """Rebuilds a saved model (a zip as `save` writes, `path` saved as `path.zip`, an open binary file, a kppo
        agent directory, or a zip Stable-Baselines3 2.x saved, read without torch: `kppo.sb3.saves.sb3_save`); `env`
        must have the saved spaces. Nothing is unpickled: a user's Keras `features_extractor_class` is given again as
        `custom_objects={"features_extractor_class": cls}`; `print_system_info` is ignored."""
        del print_system_info, force_reset
        if is_sb3_save(path):  # a zip Stable-Baselines3 wrote: read without torch, nothing unpickled
            return model_from_sb3(cls, read_sb3_save(path), env, device, kwargs)
        return load_model(cls, path, env, device, custom_objects or {}, kwargs)

    def _set_networks(
        self, config: Config, agent: Agent, spaces: Spaces, stats: Stats, timesteps: int, env: Any
    ) -> None:
        """The networks of a save and its `timesteps` (`load`, `kppo.sb3.saves.from_sb3`); then `env`, when given."""
        self.config, self.agent = config, agent
        self._spaces, self._loaded_stats = spaces, stats
        self.num_timesteps = timesteps
        self._current_lr = self.learning_rate
        if env is not None:
            self._use_env(env)
