"""Host adapter over gymnasium vector environments (numpy + gymnasium only; no TensorFlow here).

`make_vec_env(env, num_envs)` turns an env id, a `gym.Env` instance, a zero-argument factory or an existing
`gym.vector.VectorEnv` into a `GymVecEnv`, which follows the same episode contract as the TF-native
environments of `kppo.envs.base`, in numpy:

    reset(seed) -> obs                                                   # float32 [num_envs, flat_obs_dim]
    step(actions) -> HostStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos)

The vector env runs in gymnasium's `AutoresetMode.SAME_STEP` (one in gymnasium's default NEXT_STEP mode is
re-created, see `kppo.gym_envs.vector_info.same_step`): where `terminated | truncated`, `obs` is the
first observation of the next episode and `final_obs` the last observation of the finished one (gymnasium puts
it in `infos["final_obs"]`, masked by `infos["_final_obs"]`); elsewhere `final_obs` equals `obs`. As in
`kppo.envs.wrappers.TimeLimitAutoReset`, `truncated` is False where `terminated` (gymnasium's TimeLimit sets
both when an episode terminates on its last allowed step).

Observations are flattened to float32 vectors as `kppo.gym_envs.spaces` describes. Bad envs give one-line `ValueError`s
(`EnvError`): gymnasium's errors for an id (unknown, deprecated, a missing extra such as Box2D or MuJoCo), a factory
that needs arguments, raises or returns no `gym.Env`; and, from the sub-envs kppo builds (each wrapped in `CheckedEnv`),
an exception in `reset`/`step` (its type and first line, chained) or a return that breaks the gymnasium API, naming the
step and the env index; non-finite observations or rewards, naming the step, the env index and the value.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from kppo.gym_envs.spaces import (
    action_dtype,
    batch_flattener,
    check_action_space,
    check_observation_space,
    flat_dim,
    flatten_obs,
    flatten_single,
    one_line,
    space_shape,
)
from kppo.gym_envs.checks import CheckedEnv, EnvError, SubEnvError, install_hint, make_env
from kppo.gym_envs.vector_info import same_step, time_limit_of, vector_env_id, vector_time_limit
from kppo.core.errors import first_line

_VECTORIZATIONS = ("sync", "async")


class HostStep(NamedTuple):
    """What `GymVecEnv.step` returns (numpy arrays with leading dimension num_envs).

    Attributes:
        obs: float32 [N, D], flattened; the first observation of the next episode where an episode ended.
        reward: float32 [N].
        terminated: bool [N].
        truncated: bool [N], False where `terminated`.
        final_obs: float32 [N, D], the last observation of the finished episode where
            `terminated | truncated`, else equal to `obs`.
        raw_obs: the observations as gymnasium returned them (an array, or a dict of arrays for Dict spaces).
        infos: gymnasium's vector info dict of the step (`sub_env_info` picks one sub-env's entries).
    """

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray
    raw_obs: Any = None
    infos: Any = None


# ---------------------------------------------------------------------------------------------------------------
# The adapter
# ---------------------------------------------------------------------------------------------------------------


def _format_values(values: np.ndarray) -> str:
    """A one-line, abbreviated rendering of a 1-D array (or a scalar)."""
    return np.array2string(
        np.asarray(values), separator=", ", threshold=8, edgeitems=3, max_line_width=sys.maxsize
    ).replace("\n", " ")


def _check_finite(what: str, values: np.ndarray, step: int, rows: np.ndarray | None = None) -> None:
    """Raises a one-line ValueError naming the step and first env whose `values` row is NaN/inf.

    Args:
        what: "observation", "final observation" or "reward".
        values: float [N] or [N, D].
        step: steps since reset (0 for the reset observation).
        rows: bool [N]; only these rows are checked (all when None).
    """
    finite = np.isfinite(values)
    if finite.ndim > 1:
        finite = finite.all(axis=tuple(range(1, finite.ndim)))
    bad = ~finite if rows is None else (~finite & rows)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"env returned a non-finite {what} at step {step} in env {index}: {_format_values(values[index])}"
        )


class GymVecEnv:
    """A gymnasium vector env in SAME_STEP auto-reset mode, seen through flat float32 numpy observations.

    Attributes:
        num_envs: number of sub-environments N.
        observation_space: the ORIGINAL single-env observation space (a Box or a Dict of Boxes).
        action_space: the single-env action space (1-D Box, Discrete, 1-D MultiDiscrete or 1-D MultiBinary).
        flat_obs_dim: D, the length of a flattened observation (Dict: Boxes concatenated in key order).
        max_episode_steps: the sub-envs' time limit (TimeLimit wrapper or spec), None when unknown.
        env_id: the gymnasium id, None for unregistered envs.
        vec_env: the wrapped gymnasium vector env.
    """

    def __init__(
        self,
        vec_env: VectorEnv,
        *,
        env_id: str | None = None,
        max_episode_steps: int | None = None,
        seed: int | None = None,
    ):
        """Wraps `vec_env`, validating its auto-reset mode and spaces (one-line ValueErrors).

        Args:
            vec_env: a gymnasium vector env with `autoreset_mode=AutoresetMode.SAME_STEP`, or one in NEXT_STEP
                mode that `kppo.gym_envs.vector_info.same_step` re-creates in SAME_STEP mode.
            env_id: the gymnasium id; defaults to the one found in the vector env's spec.
            max_episode_steps: the time limit; defaults to the one found on the sub-envs or the spec.
            seed: used by the first `reset()` called without a seed (env i then gets seed + i).
        """
        vec_env = same_step(vec_env)
        check_observation_space(vec_env.single_observation_space)
        check_action_space(vec_env.single_action_space)
        self.vec_env = vec_env
        self.num_envs = int(vec_env.num_envs)
        self.observation_space = vec_env.single_observation_space
        self.action_space = vec_env.single_action_space
        self.flat_obs_dim = flat_dim(self.observation_space)
        self._flatten = batch_flattener(self.observation_space)
        self.env_id = env_id if env_id is not None else vector_env_id(vec_env)
        self.max_episode_steps = max_episode_steps if max_episode_steps is not None else vector_time_limit(vec_env)
        self._action_shape = (self.num_envs, *space_shape(self.action_space))
        self.action_dtype = action_dtype(self.action_space)
        self._pending_seed = seed
        self._step_count: int | None = None  # None until the first reset
        self.reset_raw_obs: Any = None
        self.reset_infos: dict = {}  # gymnasium's vector info of the last reset (action masks read it)
        self._closed = False

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every sub-env.

        Args:
            seed: env i is seeded with seed + i; None uses the constructor's seed on the first reset, then none.

        Returns:
            obs: float32 [num_envs, flat_obs_dim].
        """
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        if seed is not None:
            self.action_space.seed(int(seed))
        raw_obs, self.reset_infos = self._call(0, self.vec_env.reset, seed=None if seed is None else int(seed))
        self.reset_raw_obs = raw_obs  # as gymnasium returned them (what SB3 callbacks see as the first `obs`)
        self._step_count = 0
        obs = self._flatten(raw_obs)
        _check_finite("observation", obs, 0)
        return obs

    def step(self, actions: np.ndarray) -> HostStep:
        """Steps every sub-env once, auto-resetting finished ones on the same step.

        Args:
            actions: env-unit actions with a leading num_envs dimension: int [N] for Discrete, float [N, act_dim]
                for Box, int [N, k] for MultiDiscrete / MultiBinary; cast to the action space's dtype.

        Returns:
            HostStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos); see `HostStep`.
        """
        if self._step_count is None:
            raise RuntimeError("step() called before reset()")
        step = self._step_count + 1
        raw_obs, reward, terminated, truncated, infos = self._call(step, self.vec_env.step, self._cast_actions(actions))
        self._step_count += 1
        obs = self._flatten(raw_obs)
        reward = np.asarray(reward, dtype=np.float32).reshape(self.num_envs)
        terminated = np.asarray(terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(truncated, dtype=bool).reshape(self.num_envs) & ~terminated
        done = terminated | truncated
        final_obs = self._final_obs(obs, done, infos)
        if not (np.isfinite(obs).all() and np.isfinite(reward).all() and np.isfinite(final_obs).all()):
            _check_finite("reward", reward, self._step_count)  # which one, where: the first one-line error
            _check_finite("final observation", final_obs, self._step_count, rows=done)
            _check_finite("observation", obs, self._step_count)
        return HostStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos)

    @staticmethod
    def _call(step: int, method: Callable, *args: Any, **kwargs: Any) -> Any:
        """`method(*args, **kwargs)` of the vector env; an exception becomes a one-line EnvError naming the step."""
        try:
            return method(*args, **kwargs)
        except SubEnvError as err:  # from a CheckedEnv: names the env
            raise EnvError(err.message(step)) from (err.__cause__ or err)
        except Exception as err:
            raise EnvError(
                f"env raised {type(err).__name__} in {method.__name__}() at step {step}{first_line(err)}"
            ) from err

    def _cast_actions(self, actions: np.ndarray) -> np.ndarray:
        """Actions as an array of the action space's dtype and shape [N, *action_space.shape]."""
        actions = np.asarray(actions)
        if actions.shape != self._action_shape:
            raise ValueError(
                f"actions: expected shape {self._action_shape} for {one_line(self.action_space)}, got {actions.shape}"
            )
        return actions.astype(self.action_dtype, copy=False)

    def _final_obs(self, obs: np.ndarray, done: np.ndarray, infos: dict) -> np.ndarray:
        """float32 [N, D]: `infos["final_obs"][i]` (flattened) where done[i], else obs[i]."""
        final_obs = obs.copy()
        if not done.any():
            return final_obs
        values, mask = infos.get("final_obs"), infos.get("_final_obs")
        for index in np.flatnonzero(done):
            if values is None or mask is None or not mask[index]:
                raise RuntimeError(
                    f"env {index} ended an episode at step {self._step_count} without infos['final_obs'] "
                    f"(is the vector env in SAME_STEP autoreset mode?)"
                )
            final_obs[index] = flatten_single(self.observation_space, values[index])
        return final_obs

    def close(self) -> None:
        """Closes the vector env (idempotent)."""
        if not self._closed:
            self._closed = True
            self.vec_env.close()

    def __enter__(self) -> GymVecEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"GymVecEnv({self.env_id or type(self.vec_env.unwrapped).__name__}, num_envs={self.num_envs}, "
            f"flat_obs_dim={self.flat_obs_dim})"
        )


# ---------------------------------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------------------------------


def _call_factory(factory: Callable[[], gym.Env]) -> gym.Env:
    """Calls a zero-argument factory; one-line EnvErrors when it needs arguments, raises, or returns no gym.Env."""
    name = getattr(factory, "__qualname__", type(factory).__name__)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins and other callables without a signature: just call
        signature = None
    required = (
        [
            p.name
            for p in signature.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if signature is not None
        else []
    )
    if required:
        raise EnvError(
            f"env: expected a zero-argument factory, got {name}, which needs {', '.join(required)}; pass "
            f"an env id, a gym.Env or e.g. functools.partial({name}, ...)"
        )
    try:
        env = factory()
    except EnvError:
        raise
    except Exception as err:
        hint = install_hint(err) if isinstance(err, gym.error.DependencyNotInstalled) else None
        raise EnvError(
            f"env: the factory {name} raised {type(err).__name__}{first_line(err)}"
            f"{'; it needs ' + hint if hint else ''}"
        ) from err
    if not isinstance(env, gym.Env):
        raise EnvError(f"env: expected the factory {name} to return a gym.Env, got {type(env).__name__}")
    return env


def _checked(factory: Callable[[], gym.Env], index: int) -> gym.Env:
    """Sub-env `index` of a vector env kppo builds: the factory's env inside a `CheckedEnv`."""
    return CheckedEnv(_call_factory(factory), index)


def _check_single_env(env: gym.Env, verbose: int) -> None:
    """Validates the spaces of one env and, when verbose >= 1, runs gymnasium's env checker on it."""
    check_observation_space(env.observation_space)
    check_action_space(env.action_space)
    if verbose >= 1:
        from gymnasium.utils.env_checker import check_env

        check_env(env.unwrapped, skip_render_check=True)  # rendering is not needed (and may open a window)


def _vectorize(factories: list[Callable[[], gym.Env]], vectorization: str) -> VectorEnv:
    """A SyncVectorEnv or AsyncVectorEnv over `factories` in SAME_STEP autoreset mode, each env in a CheckedEnv."""
    cls = SyncVectorEnv if vectorization == "sync" else AsyncVectorEnv
    checked = [functools.partial(_checked, factory, index) for index, factory in enumerate(factories)]
    return cls(checked, autoreset_mode=AutoresetMode.SAME_STEP)


def _from_factory(
    factory: Callable[[], gym.Env], num_envs: int, vectorization: str, verbose: int
) -> tuple[VectorEnv, int | None, str | None]:
    """Builds the vector env from a factory, probing one env first for its spaces, time limit and id.

    Returns:
        (vector env, max_episode_steps, env_id).
    """
    probe = _call_factory(factory)
    try:
        _check_single_env(probe, verbose)
        max_steps = time_limit_of(probe)
        env_id = probe.spec.id if probe.spec is not None else None
    except BaseException:
        probe.close()
        raise
    if vectorization == "sync":  # the probe becomes env 0; `reset` starts it afresh
        return _vectorize([lambda: probe] + [factory] * (num_envs - 1), "sync"), max_steps, env_id
    probe.close()
    return _vectorize([factory] * num_envs, "async"), max_steps, env_id


def make_vec_env(
    env: str | gym.Env | Callable[[], gym.Env] | VectorEnv,
    num_envs: int = 1,
    *,
    vectorization: str = "sync",
    seed: int | None = None,
    verbose: int = 0,
    env_kwargs: dict | None = None,
) -> GymVecEnv:
    """Builds a `GymVecEnv` (SAME_STEP auto-reset, flat float32 observations) from a gymnasium env.

    Args:
        env: one of
            - a registered env id: each sub-env is `gym.make(env, **env_kwargs)` (standard wrappers included:
              TimeLimit, OrderEnforcing, PassiveEnvChecker);
            - a `gym.Env` instance: wrapped as is in a one-env SyncVectorEnv (num_envs must be 1);
            - a zero-argument factory returning a `gym.Env`: called once per sub-env;
            - a `gym.vector.VectorEnv` with `autoreset_mode=AutoresetMode.SAME_STEP`: used as is; an unwrapped one in
              NEXT_STEP mode (`gym.make_vec`'s default) is re-created in SAME_STEP mode (`vector_info.same_step`);
              `vectorization` and `verbose` are ignored.
        num_envs: number of sub-environments (ids and factories); for a vector env, 1 (its own count) or that count.
        vectorization: "sync" (SyncVectorEnv, default) or "async" (AsyncVectorEnv, one process per sub-env).
            A `gym.Env` instance is always wrapped synchronously.
        seed: seed of the first `reset()` called without one (sub-env i gets seed + i) and of the action space.
        verbose: when >= 1, runs `gymnasium.utils.env_checker.check_env` on one single env (unwrapped, render
            checks skipped) first; its warnings are shown.
        env_kwargs: keyword arguments of `gym.make` (e.g. `max_episode_steps`); ids only.

    Returns:
        The adapter; observation spaces must be a Box or a Dict of Boxes (flattened, Dict Boxes concatenated
        in the Dict space's key order), action spaces a 1-D Box, Discrete, 1-D MultiDiscrete or 1-D MultiBinary.

    Raises:
        ValueError: (one line, starting with the offending field) for an unsupported env, space, autoreset mode,
            vectorization or num_envs; an `EnvError` for gymnasium's errors about an id (unknown, deprecated, a
            missing extra) and a factory that needs arguments, raises or returns no gym.Env.
    """
    if vectorization not in _VECTORIZATIONS:
        raise ValueError(f"vectorization: expected 'sync' or 'async', got {vectorization!r}")
    if env_kwargs and not isinstance(env, str):
        raise ValueError(f"env_kwargs: only used with an env id, got env of type {type(env).__name__}")
    if isinstance(env, VectorEnv):
        if num_envs not in (1, env.num_envs):  # 1: the default (kppo.PPO passes it for every env)
            raise ValueError(
                f"num_envs: expected {env.num_envs}, the vector env's number of sub-envs, got {num_envs}; "
                f"set Config(num_envs={env.num_envs})"
            )
        return GymVecEnv(env, seed=seed)
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
    num_envs = int(num_envs)
    env_id: str | None
    if isinstance(env, str):
        factory = functools.partial(make_env, env, env_kwargs or {})
        vec_env, max_steps, _ = _from_factory(factory, num_envs, vectorization, verbose)
        env_id = env
    elif isinstance(env, gym.Env):
        if num_envs != 1:
            raise ValueError(
                f"num_envs: a gym.Env instance can only be used with num_envs=1, got {num_envs}; "
                f"pass an env id or a zero-argument factory to make several envs"
            )
        _check_single_env(env, verbose)
        vec_env, max_steps = _vectorize([lambda: env], "sync"), time_limit_of(env)
        env_id = env.spec.id if env.spec is not None else None
    elif callable(env):
        vec_env, max_steps, env_id = _from_factory(env, num_envs, vectorization, verbose)
    else:
        raise ValueError(
            f"env: expected an env id, a gym.Env, a zero-argument factory or a gym.vector.VectorEnv, "
            f"got {type(env).__name__}"
        )
    return GymVecEnv(vec_env, env_id=env_id, max_episode_steps=max_steps, seed=seed)


__all__ = [
    "EnvError",
    "GymVecEnv",
    "HostStep",
    "check_action_space",
    "check_observation_space",
    "flat_dim",
    "flatten_obs",
    "make_vec_env",
    "same_step",
]
