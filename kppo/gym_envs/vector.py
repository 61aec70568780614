"""Host adapter over gymnasium vector environments (numpy + gymnasium only; no TensorFlow here).

`GymVecEnv` (made by `kppo.gym_envs.make.gym_vec_env` from an env id, a `gym.Env` instance, a zero-argument factory
or an existing `gym.vector.VectorEnv`) follows the same episode contract as the TF-native environments of
`kppo.envs.base`, in numpy:

    reset(seed) -> obs                                                   # float32 [num_envs, flat_obs_dim]
    step(actions) -> GymStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos)

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
step and the env index; non-finite observations or rewards, naming the step, the env index and the value; a worker
process of an async vector env that died (killed, out of memory), naming the worker, its pid and how it ended (the
pipe to a dead worker fails at once, so a run never waits on it), and `close` then ends the other workers.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

from kppo.gym_envs.spaces import (
    action_dtype,
    batch_flattener,
    check_action_space,
    check_observation_space,
    flat_dim,
    flatten_single,
    one_line,
    space_shape,
)
from kppo.gym_envs.checks import EnvError, SubEnvError, seed_spaces
from kppo.gym_envs.vector_info import same_step, vector_env_id, vector_time_limit
from kppo.core.errors import first_line


class GymStep(NamedTuple):
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


#: What talking to a dead worker process raises (from its pipe).
_PIPE_ERRORS = (BrokenPipeError, EOFError, ConnectionResetError)


def _how_it_ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"


def dead_workers(vec_env: VectorEnv) -> list[str]:
    """The worker processes of an async vector env that are no longer alive, as "i (pid P, killed by SIGKILL)"."""
    base = vec_env.unwrapped
    if not isinstance(base, AsyncVectorEnv):
        return []
    return [
        f"{index} (pid {process.pid}, {_how_it_ended(process.exitcode)})"
        for index, process in enumerate(base.processes)
        if not process.is_alive()
    ]


def vector_env_of(env: Any) -> VectorEnv | None:
    """The gymnasium vector env under `env` (its `vector_env`: an SB3-style VecEnv, `DummyVecEnv`, `VecMonitor`, ...;
    any wrapper that has one), or None. Runners and builders read any such env through it, not through its class."""
    vector = getattr(env, "vector_env", None)
    return vector if isinstance(vector, VectorEnv) else None


def sub_env_seeds(seed: int | list[int], num_envs: int) -> list[int]:
    """Each sub-env's reset seed: seed + i for an int, the list itself (one per env) for a list."""
    if isinstance(seed, (list, tuple)):
        if len(seed) != num_envs:
            raise ValueError(f"seed: expected one seed per env ({num_envs}), got {len(seed)}")
        return [int(s) for s in seed]
    return [int(seed) + i for i in range(num_envs)]


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

    def reset(self, seed: int | list[int] | None = None) -> np.ndarray:
        """Resets every sub-env.

        Args:
            seed: env i is seeded with seed + i, and so are its action and observation spaces; a list: env i with
                seed[i] (a population: each member's envs as its own run seeds them); None uses the constructor's
                seed on the first reset, then none.

        Returns:
            obs: float32 [num_envs, flat_obs_dim].
        """
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        seeds = None if seed is None else sub_env_seeds(seed, self.num_envs)
        if seeds is not None:
            self.action_space.seed(seeds[0])
            base = self.vec_env.unwrapped  # sub-envs of other processes: seeded by kppo's CheckedEnv, when built here
            for env, env_seed in zip(base.envs if isinstance(base, SyncVectorEnv) else [], seeds):
                seed_spaces(env, env_seed)
        reset_seed = seeds if isinstance(seed, (list, tuple)) else None if seed is None else int(seed)
        raw_obs, self.reset_infos = self._call(0, self.vec_env.reset, seed=reset_seed)
        self.reset_raw_obs = raw_obs  # as gymnasium returned them (what SB3 callbacks see as the first `obs`)
        self._step_count = 0
        obs = self._flatten(raw_obs)
        _check_finite("observation", obs, 0)
        return obs

    def step(self, actions: np.ndarray) -> GymStep:
        """Steps every sub-env once, auto-resetting finished ones on the same step.

        Args:
            actions: env-unit actions with a leading num_envs dimension: int [N] for Discrete, float [N, act_dim]
                for Box, int [N, k] for MultiDiscrete / MultiBinary; cast to the action space's dtype.

        Returns:
            GymStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos); see `GymStep`.
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
        return GymStep(obs, reward, terminated, truncated, final_obs, raw_obs, infos)

    def _call(self, step: int, method: Callable, *args: Any, **kwargs: Any) -> Any:
        """`method(*args, **kwargs)` of the vector env; an exception becomes a one-line EnvError naming the step."""
        try:
            return method(*args, **kwargs)
        except SubEnvError as err:  # from a CheckedEnv: names the env
            raise EnvError(err.message(step)) from (err.__cause__ or err)
        except _PIPE_ERRORS as err:
            dead = dead_workers(self.vec_env)
            if not dead:
                raise EnvError(
                    f"env raised {type(err).__name__} in {method.__name__}() at step {step}{first_line(err)}"
                ) from err
            raise EnvError(
                f"env worker process {', '.join(dead)} died before {method.__name__}() at step {step} returned"
            ) from err
        except Exception as err:  # a vector env kppo did not build: the env index is unknown
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
        """Closes the vector env (idempotent); an async one with a dead worker is closed by ending the others."""
        if self._closed:
            return
        self._closed = True
        if dead_workers(self.vec_env):
            self.vec_env.unwrapped.close(terminate=True)
            return
        try:
            self.vec_env.close()
        except _PIPE_ERRORS:  # a worker died while closing
            self.vec_env.unwrapped.close(terminate=True)

    def __enter__(self) -> GymVecEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"GymVecEnv({self.env_id or type(self.vec_env.unwrapped).__name__}, num_envs={self.num_envs}, "
            f"flat_obs_dim={self.flat_obs_dim})"
        )


__all__ = ["GymStep", "GymVecEnv"]
