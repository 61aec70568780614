"""SB3's `make_vec_env` (stable_baselines3.common.env_util): n copies of an env, each in a `Monitor` (writing
`monitor_dir/<rank>.monitor.csv` when given) and an optional wrapper, as a `DummyVecEnv` or `SubprocVecEnv`."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym

from kppo.gym_envs.checks import make_env
from kppo.vec_envs.monitor import Monitor
from kppo.vec_envs.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

#: kppo's earlier spellings of `vec_env_cls`, still read.
_VEC_ENV_NAMES = {"sync": DummyVecEnv, "async": SubprocVecEnv}


def _env_maker(
    env_id: str | Callable[..., gym.Env],
    rank: int,
    seed: int | None,
    monitor_dir: str | None,
    wrapper_class: Callable[..., gym.Env] | None,
    kwargs: tuple[dict, dict, dict],
) -> Callable[[], gym.Env]:
    env_kwargs, monitor_kwargs, wrapper_kwargs = kwargs

    def build() -> gym.Env:
        env = make_env(env_id, env_kwargs) if isinstance(env_id, str) else env_id(**env_kwargs)
        if seed is not None:  # as SB3: the action space now, the env at its first reset (VecEnv.seed)
            env.action_space.seed(seed + rank)
        path = None
        if monitor_dir is not None:
            os.makedirs(monitor_dir, exist_ok=True)
            path = os.path.join(monitor_dir, str(rank))
        env = Monitor(env, filename=path, **monitor_kwargs)
        return env if wrapper_class is None else wrapper_class(env, **wrapper_kwargs)

    return build


def make_vec_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_class: Callable[..., gym.Env] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[VecEnv] | str | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """SB3's `make_vec_env`: env i (rank = start_index + i) is `gym.make(env_id, **env_kwargs)` (or
    `env_id(**env_kwargs)` for a callable), its action space seeded with seed + rank, in a `Monitor`, then in
    `wrapper_class(env, **wrapper_kwargs)`; all of them in `vec_env_cls` (default `DummyVecEnv`; kppo's older
    "sync" / "async" are read too), seeded with `seed` for the first reset.

    Unlike SB3, `gym.make` is not given `render_mode="rgb_array"`: pass it in `env_kwargs` to record videos."""
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise ValueError(f"n_envs: expected a positive int, got {n_envs!r}")
    if not isinstance(env_id, str) and not callable(env_id):
        raise ValueError(f"env_id: expected an env id or a function returning a gym.Env, got {type(env_id).__name__}")
    cls: Any = _VEC_ENV_NAMES.get(vec_env_cls, vec_env_cls) if isinstance(vec_env_cls, str) else vec_env_cls
    if cls is None:
        cls = DummyVecEnv
    if not (isinstance(cls, type) and issubclass(cls, VecEnv)):
        raise ValueError(f"vec_env_cls: expected DummyVecEnv, SubprocVecEnv or 'sync' / 'async', got {vec_env_cls!r}")
    kwargs = (dict(env_kwargs or {}), dict(monitor_kwargs or {}), dict(wrapper_kwargs or {}))
    makers = [_env_maker(env_id, start_index + i, seed, monitor_dir, wrapper_class, kwargs) for i in range(n_envs)]
    vec_env: VecEnv = cast(Any, cls)(makers, **(vec_env_kwargs or {}))  # a VecEnv class taking env_fns
    vec_env.seed(seed)
    return vec_env
