"""Stable-Baselines3's VecEnv interface over gymnasium vector envs: what SB3 programs call `env` (`reset() -> obs`,
`step(actions) -> (obs, rewards, dones, infos)` with `terminal_observation` and `TimeLimit.truncated` in the infos
of finished episodes, `seed`, `set_options`, `get_attr`, `set_attr`, `env_method`, `env_is_wrapped`, `num_envs`).

Underneath is always a gymnasium `VectorEnv` in SAME_STEP autoreset mode (`VecEnv.vector_env`): `DummyVecEnv` is a
`SyncVectorEnv`, `SubprocVecEnv` an `AsyncVectorEnv`. kppo trains on that vector env directly, so a wrapper that
changes what the envs do (`VecMonitor`, `VecExtractDictObs`) is a gymnasium vector wrapper around it, and this
module only translates the calls. Not to be confused with `kppo.envs.VecEnv`, the TF-native vector env.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv, VectorWrapper

from kppo.vec_envs.custom_vec_env import CustomVecEnvAdapter
from kppo.vec_envs.monitor import EpisodeWriter
from kppo.gym_envs.vector_info import returning, same_step, sb3_info, sub_env_info

Indices = int | Sequence[int] | None


def _as_list(indices: Indices, num_envs: int) -> list[int]:
    if indices is None:
        return list(range(num_envs))
    return [int(indices)] if isinstance(indices, (int, np.integer)) else [int(i) for i in indices]


def sb3_infos(infos: dict[str, Any], terminated: np.ndarray, truncated: np.ndarray) -> list[dict[str, Any]]:
    """A gymnasium vector info dict (SAME_STEP) as SB3's list of per-env infos (`vector_info.sb3_info` each): a
    finished episode's info is its last step's, with `terminal_observation` and `TimeLimit.truncated`."""
    return [sb3_info(infos, i, bool(terminated[i]), bool(truncated[i])) for i in range(len(terminated))]


class VecEnv:
    """SB3's `VecEnv` over `vector_env`, a gymnasium vector env (re-created in SAME_STEP mode when it is an
    unwrapped NEXT_STEP one, `kppo.gym_envs.vector_info.same_step`). A user's subclass written as SB3's abstract
    `VecEnv` calls `super().__init__(num_envs, observation_space, action_space)` and defines `reset`, `step_async`,
    `step_wait` (and `close`, `get_attr`, ... as it needs): kppo then trains on it through
    `kppo.vec_envs.custom_vec_env.CustomVecEnvAdapter`."""

    def __init__(
        self,
        vector_env: VectorEnv | int,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
    ):
        if isinstance(vector_env, (int, np.integer)) and not isinstance(vector_env, bool):
            # SB3's abstract VecEnv: a user's subclass defines reset / step_async / step_wait (custom_vec_env)
            if observation_space is None or action_space is None:
                raise ValueError("VecEnv(num_envs, observation_space, action_space): expected both spaces, got None")
            self.num_envs, self.observation_space, self.action_space = int(vector_env), observation_space, action_space
            vector_env = CustomVecEnvAdapter(self, closes_itself=type(self).close is not VecEnv.close)
        if not isinstance(vector_env, VectorEnv):
            raise ValueError(
                f"vector_env: expected a gymnasium VectorEnv (or SB3's num_envs, observation_space, action_space), "
                f"got {type(vector_env).__name__}"
            )
        self.vector_env = same_step(vector_env)
        self.num_envs = self.vector_env.num_envs
        self.observation_space = self.vector_env.single_observation_space
        self.action_space = self.vector_env.single_action_space
        self.render_mode = self.vector_env.render_mode
        self.metadata = self.vector_env.metadata
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._seeds: list[int] | None = None
        self._options: dict[str, Any] | None = None
        self._actions: np.ndarray | None = None

    # --- SB3's stepping API ---
    def reset(self) -> Any:
        """Resets every env (with the seeds of `seed` and the options of `set_options`, used once); the observations."""
        obs, infos = self.vector_env.reset(seed=cast(Any, self._seeds), options=self._options)  # a seed per env
        self.reset_infos = [sub_env_info(infos, i) for i in range(self.num_envs)]
        self._seeds, self._options = None, None
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Keeps the actions for `step_wait` (SB3's split of `step`)."""
        self._actions = actions

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Steps every env with the actions of `step_async`: (obs, rewards, dones, infos), as `step`."""
        if self._actions is None:
            raise RuntimeError("step_wait: expected step_async(actions) first")
        obs, rewards, terminated, truncated, infos = self.vector_env.step(self._actions)
        self._actions = None
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        dones = terminated | truncated
        return obs, np.asarray(rewards, np.float32), dones, sb3_infos(infos, terminated, truncated)

    def step(self, actions: np.ndarray) -> tuple[Any, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """SB3's 4-tuple: observations (the next episode's first where one ended), rewards, dones, infos."""
        self.step_async(actions)
        return self.step_wait()

    def seed(self, seed: int | None = None) -> list[int]:
        """Seeds for the next `reset`: env i gets seed + i (a random seed when None, as SB3)."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seeds = [int(seed) + i for i in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: dict | list[dict] | None = None) -> None:
        """Options for the next `reset`; a list must hold one dict for every env, all equal (gymnasium's vector
        reset takes one options dict)."""
        if isinstance(options, list):
            if len(options) != self.num_envs or any(o != options[0] for o in options):
                raise ValueError(f"options: expected one dict or {self.num_envs} equal dicts, got {options!r}")
            options = options[0]
        self._options = options

    def close(self) -> None:
        """Closes the vector env and its sub-envs."""
        self.vector_env.close()

    def render(self, mode: str | None = None) -> Any:
        """The vector env's render (gymnasium renders every sub-env: a tuple of frames in rgb_array mode)."""
        del mode  # gymnasium fixes the render mode when the env is made
        return self.vector_env.render()

    def get_images(self) -> list[np.ndarray]:
        """Each sub-env's frame (envs made with render_mode="rgb_array")."""
        frames = self.vector_env.render()
        return list(cast(Any, frames)) if frames is not None else []

    # --- the sub-envs ---
    def _local_envs(self) -> list[gym.Env] | None:
        """The sub-envs when they run in this process (a SyncVectorEnv underneath), else None."""
        base = self.vector_env.unwrapped
        return list(base.envs) if isinstance(base, SyncVectorEnv) else None

    def get_attr(self, attr_name: str, indices: Indices = None) -> list[Any]:
        """The attribute of each env in `indices` (through the env's wrappers)."""
        chosen = _as_list(indices, self.num_envs)
        local = self._local_envs()
        if local is not None:  # only the chosen envs need to have it
            return [local[i].get_wrapper_attr(attr_name) for i in chosen]
        values = cast(Any, self.vector_env).get_attr(attr_name)
        return [values[i] for i in chosen]

    def set_attr(self, attr_name: str, value: Any, indices: Indices = None) -> None:
        """Sets the attribute of each env in `indices` to `value`."""
        chosen = _as_list(indices, self.num_envs)
        local = self._local_envs()
        if local is not None:
            for i in chosen:
                local[i].set_wrapper_attr(attr_name, value)
            return
        vector_env = cast(Any, self.vector_env)  # an AsyncVectorEnv sets every sub-env's: keep the others' values
        current = vector_env.get_attr(attr_name) if len(chosen) < self.num_envs else [None] * self.num_envs
        vector_env.set_attr(attr_name, [value if i in chosen else current[i] for i in range(self.num_envs)])

    def env_method(self, method_name: str, *method_args: Any, indices: Indices = None, **method_kwargs: Any) -> list:
        """Calls `method_name(*method_args, **method_kwargs)` on each env in `indices`; their results."""
        chosen = _as_list(indices, self.num_envs)
        local = self._local_envs()
        if local is not None:
            return [getattr(local[i], method_name)(*method_args, **method_kwargs) for i in chosen]
        if len(chosen) < self.num_envs:
            raise ValueError(
                f"indices: {type(self).__name__}.env_method calls every sub-env of an AsyncVectorEnv, got {indices!r}"
            )
        return list(cast(Any, self.vector_env).call(method_name, *method_args, **method_kwargs))

    def env_is_wrapped(self, wrapper_class: type, indices: Indices = None) -> list[bool]:
        """Whether each env in `indices` is wrapped in `wrapper_class` (a gymnasium wrapper class)."""
        local = self._local_envs()
        if local is None:
            raise ValueError(
                "env_is_wrapped: expected a DummyVecEnv (a SyncVectorEnv), got "
                f"{type(self.vector_env.unwrapped).__name__}"
            )

        def wrapped(env: gym.Env) -> bool:
            while isinstance(env, gym.Wrapper):
                if isinstance(env, wrapper_class):
                    return True
                env = env.env
            return isinstance(env, wrapper_class)

        return [wrapped(local[i]) for i in _as_list(indices, self.num_envs)]

    @property
    def envs(self) -> list[gym.Env]:
        """The sub-envs, when they run in this process (SB3's `DummyVecEnv.envs`); a user's SB3-style subclass sets
        its own (`self.envs = [...]`, as DummyVecEnv does)."""
        own = self.__dict__.get("_own_envs")
        if own is not None:
            return own
        local = self._local_envs()
        if local is None:
            raise AttributeError(
                f"envs: the sub-envs of a {type(self.vector_env.unwrapped).__name__} run in other processes"
            )
        return local

    @envs.setter
    def envs(self, envs: list[gym.Env]) -> None:
        self._own_envs = list(envs)

    @property
    def pending_seed(self) -> int | None:
        """The seed of env 0 that the next `reset` uses (set by `seed`), or None."""
        return None if self._seeds is None else self._seeds[0]

    @property
    def unwrapped(self) -> VecEnv:
        return self

    def getattr_recursive(self, name: str) -> Any:
        """SB3's attribute lookup through the wrappers (`VecEnvWrapper` forwards to `venv`)."""
        return getattr(self, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.vector_env!r})"


def _checked_fns(env_fns: list[Callable[[], gym.Env]]) -> list[Callable[[], gym.Env]]:
    if not isinstance(env_fns, (list, tuple)) or not env_fns or not all(callable(f) for f in env_fns):
        raise ValueError(f"env_fns: expected a non-empty list of functions returning a gym.Env, got {env_fns!r}")
    return list(env_fns)


class DummyVecEnv(VecEnv):
    """SB3's `DummyVecEnv(env_fns)`: every env stepped in this process (a gymnasium SyncVectorEnv, SAME_STEP)."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]]):
        envs = [fn() for fn in _checked_fns(env_fns)]
        if len({id(env.unwrapped) for env in envs}) < len(envs):  # wrappers (Monitor) over one env: the same
            raise ValueError(
                "env_fns: expected a new env from every function, got one env twice: the function to create them "
                "returned the same instance (`make_vec_env(lambda: env)`: pass `lambda: gym.make(...)`)"
            )
        super().__init__(SyncVectorEnv([returning(env) for env in envs], autoreset_mode=AutoresetMode.SAME_STEP))


class SubprocVecEnv(VecEnv):
    """SB3's `SubprocVecEnv(env_fns, start_method=None)`: one process per env (a gymnasium AsyncVectorEnv,
    SAME_STEP; `start_method` is its multiprocessing context: "fork", "spawn" or "forkserver")."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], start_method: str | None = None):
        fns = _checked_fns(env_fns)
        super().__init__(AsyncVectorEnv(fns, context=start_method, autoreset_mode=AutoresetMode.SAME_STEP))


def checked_venv(venv: Any, wrapper: str = "") -> VecEnv:
    """`venv` when it is a kppo `VecEnv`, else a one-line ValueError naming the `wrapper` that was given it."""
    if not isinstance(venv, VecEnv):
        who = f"{wrapper} " if wrapper else ""
        raise ValueError(
            f"venv: {who}expected a kppo VecEnv (DummyVecEnv, SubprocVecEnv...), got {type(venv).__name__}"
        )
    return venv


class VecEnvWrapper(VecEnv):
    """SB3's `VecEnvWrapper(venv)`: the SB3 API of `venv`, over `vector_env` (by default `venv`'s own); attributes
    the wrapper lacks are looked up on `venv`."""

    def __init__(self, venv: VecEnv, vector_env: VectorEnv | None = None):
        self.venv = checked_venv(venv)
        super().__init__(venv.vector_env if vector_env is None else vector_env)
        self._seeds, self._options = venv._seeds, venv._options  # SB3: venv.reset() still uses venv's seed

    @property
    def unwrapped(self) -> VecEnv:
        return self.venv.unwrapped

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "venv":
            raise AttributeError(name)
        return getattr(self.venv, name)


class _EpisodeRecorder(VectorWrapper):
    """A gymnasium vector wrapper that does what SB3's VecMonitor does: each finished episode's
    {"r", "l", "t"} in the vector info (key "episode", masked) and a row of `monitor.csv`."""

    def __init__(self, env: VectorEnv, writer: EpisodeWriter | None, info_keywords: tuple[str, ...]):
        super().__init__(env)
        self.writer, self.info_keywords, self.t_start = writer, info_keywords, time.time()
        self.returns = np.zeros(env.num_envs, np.float64)
        self.lengths = np.zeros(env.num_envs, np.int64)

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        self.returns[:], self.lengths[:] = 0.0, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        self.returns += np.asarray(rewards, np.float64)
        self.lengths += 1
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        if ended.any():
            now = round(time.time() - self.t_start, 6)
            episode = {"r": np.round(self.returns, 6), "l": self.lengths.copy(), "t": np.full(len(ended), now)}
            if self.writer is not None:
                per_env = sb3_infos(infos, np.asarray(terminated, bool), np.asarray(truncated, bool))
                for i in np.flatnonzero(ended):
                    extra = {key: per_env[i].get(key) for key in self.info_keywords}
                    self.writer.write({"r": episode["r"][i], "l": int(episode["l"][i]), "t": now, **extra})
            infos = {**infos, "episode": episode, "_episode": ended}
            self.returns[ended], self.lengths[ended] = 0.0, 0
        return obs, rewards, terminated, truncated, infos

    def close(self, **kwargs: Any) -> None:
        super().close(**kwargs)
        if self.writer is not None:
            self.writer.close()


class VecMonitor(VecEnvWrapper):
    """SB3's `VecMonitor(venv, filename=None, info_keywords=())`: every finished episode's return, length and time
    in its info (`info["episode"]`) and, with a `filename`, in SB3's `monitor.csv`; recorded during kppo's training
    too (it wraps the vector env kppo steps)."""

    def __init__(self, venv: VecEnv, filename: str | None = None, info_keywords: tuple[str, ...] = ()):
        writer = None
        if filename is not None:
            spec = getattr(venv.vector_env, "spec", None)
            header = {"t_start": time.time(), "env_id": str(spec.id if spec is not None else None)}
            writer = EpisodeWriter(filename, header, tuple(info_keywords))
        super().__init__(venv, _EpisodeRecorder(venv.vector_env, writer, tuple(info_keywords)))


class _DictKey(VectorWrapper):
    """Observations of one key of a Dict space (the final observations of finished episodes too)."""

    def __init__(self, env: VectorEnv, key: str):
        space = env.single_observation_space
        if not isinstance(space, gym.spaces.Dict) or key not in space.spaces:
            raise ValueError(f"key: expected a key of the Dict observation space, got {key!r}")
        super().__init__(env)
        self.key = key
        self.single_observation_space = space[key]
        self.observation_space = cast(gym.spaces.Dict, env.observation_space)[key]

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return obs[self.key], infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        final = infos.get("final_obs")
        if isinstance(final, dict):  # a dict of arrays
            infos = {**infos, "final_obs": final[self.key]}
        elif isinstance(final, np.ndarray) and final.dtype == object:  # an array of each env's dict (None if going on)
            picked = np.empty(len(final), dtype=object)
            picked[:] = [o[self.key] if isinstance(o, dict) else o for o in final]
            infos = {**infos, "final_obs": picked}
        return obs[self.key], rewards, terminated, truncated, infos


class VecExtractDictObs(VecEnvWrapper):
    """SB3's `VecExtractDictObs(venv, key)`: the observations of one key of a Dict observation space."""

    def __init__(self, venv: VecEnv, key: str):
        super().__init__(venv, _DictKey(venv.vector_env, key))
        self.key = key
