"""What kppo reads from a gymnasium vector env besides observations and rewards: the sub-envs' time limit and id,
the auto-reset mode, and per-env info dicts (one sub-env's entries; Stable-Baselines3's per-env infos of a step).
numpy + gymnasium only."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers import TimeLimit

# ---------------------------------------------------------------------------------------------------------------
# Episode-length and id discovery
# ---------------------------------------------------------------------------------------------------------------


def time_limit_of(env: gym.Env) -> int | None:
    """The `max_episode_steps` of the outermost TimeLimit wrapper around `env`, else of its spec, else None."""
    inner = env
    while isinstance(inner, gym.Wrapper):
        if isinstance(inner, TimeLimit):
            return int(inner._max_episode_steps)
        inner = inner.env
    spec = env.spec
    return spec.max_episode_steps if spec is not None else None


def vector_time_limit(vec_env: VectorEnv) -> int | None:
    """Time limit of a vector env's sub-envs: from the first sub-env of a SyncVectorEnv, else from `vec_env.spec`.

    Async sub-envs are not queried (an attribute error there kills the worker process).
    """
    base = vec_env.unwrapped
    if isinstance(base, SyncVectorEnv) and base.envs:
        return time_limit_of(base.envs[0])
    spec = vec_env.spec
    if spec is None:
        return None
    return spec.kwargs.get("max_episode_steps", spec.max_episode_steps)  # make_vec keeps an override in kwargs


def vector_env_id(vec_env: VectorEnv) -> str | None:
    """The id of a vector env's spec, or of its first sync sub-env's spec, else None."""
    if vec_env.spec is not None:
        return vec_env.spec.id
    base = vec_env.unwrapped
    if isinstance(base, SyncVectorEnv) and base.envs and base.envs[0].spec is not None:
        return base.envs[0].spec.id
    return None


def _autoreset_mode(vec_env: VectorEnv) -> AutoresetMode | None:
    """`vec_env.metadata["autoreset_mode"]` as an AutoresetMode (None when missing)."""
    mode = vec_env.metadata.get("autoreset_mode")
    if mode is None or isinstance(mode, AutoresetMode):
        return mode
    try:
        return AutoresetMode(mode)
    except ValueError:
        return mode


def check_same_step(vec_env: VectorEnv) -> None:
    """Raises a one-line ValueError unless `vec_env` auto-resets in `AutoresetMode.SAME_STEP`."""
    mode = _autoreset_mode(vec_env)
    if mode != AutoresetMode.SAME_STEP:
        found = mode.value if isinstance(mode, AutoresetMode) else mode
        raise ValueError(
            f"autoreset_mode: expected {AutoresetMode.SAME_STEP.value!r}, got {found!r}; create the vector env with "
            f"autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP"
        )


def sub_env_info(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env i's entries of a gymnasium vector info dict: entry i of every key whose `_key` mask (if any) is set
    for i, recursing into nested dicts (e.g. SAME_STEP's `final_info`)."""
    selected = {}
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        selected[key] = sub_env_info(value, i) if isinstance(value, dict) else _item(value, i)
    return selected


def _item(value: Any, i: int) -> Any:
    try:
        return value[i]
    except (TypeError, IndexError, KeyError):
        return value


def sb3_infos(infos: dict[str, Any] | None, terminated: np.ndarray, truncated: np.ndarray, final_obs: np.ndarray,
              episode_return: np.ndarray, episode_length: np.ndarray, elapsed_s: float) -> list[dict[str, Any]]:
    """One dict per env as Stable-Baselines3's VecEnv + Monitor give them: the env's own entries, and where an
    episode ended `"terminal_observation"` (the raw final observation; `final_obs[i]` when gymnasium gave none),
    `"episode": {"r", "l", "t"}` (unless the env's own wrappers already wrote one) and `"TimeLimit.truncated"`."""
    dones = terminated | truncated
    per_env = [sub_env_info(infos, i) if infos else {} for i in range(len(dones))]
    for i in np.flatnonzero(dones):
        info = per_env[i]
        final_info = info.pop("final_info", None)
        if isinstance(final_info, dict):  # SAME_STEP: the finished episode's last info
            info.update(final_info)
        info["terminal_observation"] = info.pop("final_obs", final_obs[i])
        monitor = {"r": float(episode_return[i]), "l": int(episode_length[i]), "t": round(elapsed_s, 6)}
        info.setdefault("episode", monitor)
        info["TimeLimit.truncated"] = bool(truncated[i])
    return per_env
