"""`gym_vec_env`: a gymnasium env id, `gym.Env` instance, zero-argument factory or vector env made into a `GymVecEnv`
(SAME_STEP auto-reset, flat float32 observations), with one-line errors for an id, a factory or spaces kppo cannot
use (`kppo.gym_envs.checks`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from kppo.core.errors import first_line
from kppo.gym_envs.checks import CheckedEnv, EnvError, install_hint, make_env
from kppo.gym_envs.spaces import check_action_space, check_observation_space
from kppo.gym_envs.vector import GymVecEnv, vector_env_of
from kppo.gym_envs.vector_info import time_limit_of

_VECTORIZATIONS = ("sync", "async")


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
    except Exception as err:  # user code: named, chained
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


def gym_vec_env(
    env: str | gym.Env | Callable[[], gym.Env] | VectorEnv | object,
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
            - anything holding a gymnasium vector env as `vector_env` (an SB3-style `kppo.VecEnv`: `DummyVecEnv`,
              `SubprocVecEnv`, `VecMonitor`, ...): that vector env, seeded as its `pending_seed` asks when `seed` is
              None;
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
    vector = vector_env_of(env)
    if vector is not None:  # SB3's VecEnv interface (or any env holding one): its vector env, its pending seed
        seed = getattr(env, "pending_seed", None) if seed is None else seed
        env = vector
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
