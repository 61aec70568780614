"""What kppo reads from gymnasium vector envs besides observations and rewards: the sub-envs' time limit and id; the
auto-reset mode (gymnasium's default NEXT_STEP re-created as SAME_STEP: `same_step`); per-env info dicts (one sub-env's
entries; Stable-Baselines3's per-env infos of a step); the final observations of finished episodes in a step's infos
(read per env, written back by the wrappers that change observations). The checks on envs are
`kppo.gym_envs.checks`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.wrappers import TimeLimit

from kppo.core.errors import first_line

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


# ---------------------------------------------------------------------------------------------------------------
# Auto-reset mode
# ---------------------------------------------------------------------------------------------------------------


def _autoreset_mode(vec_env: VectorEnv) -> AutoresetMode | None:
    """`vec_env.metadata["autoreset_mode"]` as an AutoresetMode (None when missing)."""
    mode = vec_env.metadata.get("autoreset_mode")
    if mode is None or isinstance(mode, AutoresetMode):
        return mode
    try:
        return AutoresetMode(mode)
    except ValueError:
        return mode


_SAME_STEP_FIX = (
    "create it with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (gym.make_vec: "
    "vectorization_mode='sync', vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP})"
)


def same_step(vec_env: VectorEnv) -> VectorEnv:
    """`vec_env` in `AutoresetMode.SAME_STEP`: itself when it is; gymnasium's default NEXT_STEP mode re-created.

    NEXT_STEP cannot be adapted step by step: an env that ended an episode spends the next `step` on its reset
    (ignoring that step's action, with reward 0) while the others step on. So an unwrapped NEXT_STEP vector env is
    re-created in SAME_STEP mode: a SyncVectorEnv around the same sub-env objects (kept, not closed); an
    AsyncVectorEnv from its `env_fns` with its settings (the original is closed); a `gym.make_vec` vector env from
    a vector entry point (e.g. CartPole-v1's CartPoleVectorEnv) as a SyncVectorEnv of single envs of its spec, with
    the spec's kwargs (the original is closed). Sub-envs start afresh on the next `reset`.

    Raises:
        ValueError: (one line) for DISABLED mode, a NEXT_STEP env inside vector wrappers (which may track the
            NEXT_STEP reset steps themselves), or a NEXT_STEP env of another class.
    """
    mode = _autoreset_mode(vec_env)
    if mode == AutoresetMode.SAME_STEP:
        return vec_env
    found = mode.value if isinstance(mode, AutoresetMode) else mode
    if mode != AutoresetMode.NEXT_STEP:
        raise ValueError(f"autoreset_mode: expected 'SameStep' or 'NextStep', got {found!r}; {_SAME_STEP_FIX}")
    if vec_env is not vec_env.unwrapped:
        raise ValueError(
            f"autoreset_mode: expected 'SameStep' inside vector wrappers, got 'NextStep' under "
            f"{_wrapper_names(vec_env)} (kppo re-creates only unwrapped NextStep vector envs); "
            f"{_SAME_STEP_FIX}"
        )
    spec = vec_env.spec
    rebuilt: VectorEnv
    if isinstance(vec_env, SyncVectorEnv):
        rebuilt = SyncVectorEnv(
            [returning(env) for env in vec_env.envs],
            copy=vec_env.copy,
            observation_mode=vec_env.observation_mode,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
    elif isinstance(vec_env, AsyncVectorEnv):
        rebuilt = AsyncVectorEnv(
            vec_env.env_fns,
            shared_memory=vec_env.shared_memory,
            copy=vec_env.copy,
            context=vec_env.context,
            daemon=vec_env.daemon,
            worker=vec_env.worker,
            observation_mode=vec_env.observation_mode,
            max_concurrency=vec_env.max_concurrency,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        vec_env.close()
    elif spec is not None and spec.kwargs.get("vectorization_mode") == "vector_entry_point" and spec.entry_point:
        kwargs = {k: v for k, v in spec.kwargs.items() if k not in ("num_envs", "vectorization_mode")}
        try:
            rebuilt = gym.make_vec(
                spec.id,
                vec_env.num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                **kwargs,
            )
        except Exception as err:  # e.g. a kwarg only the vector entry point takes
            raise ValueError(
                f"autoreset_mode: expected 'SameStep', got 'NextStep' from {type(vec_env).__name__}, "
                f"and re-creating {spec.id!r} with {kwargs} as single envs raised "
                f"{type(err).__name__}{first_line(err)}; {_SAME_STEP_FIX}"
            ) from err
        vec_env.close()
        return rebuilt
    else:
        raise ValueError(
            f"autoreset_mode: expected 'SameStep', got 'NextStep' from {type(vec_env).__name__}, "
            f"which kppo cannot re-create; {_SAME_STEP_FIX}"
        )
    rebuilt.spec = spec
    return rebuilt


def returning(env: gym.Env) -> Callable[[], gym.Env]:
    """A factory that returns the existing `env` (to re-create a SyncVectorEnv around the same sub-envs)."""
    return lambda: env


def _wrapper_names(vec_env: VectorEnv) -> str:
    """ "A(B(SyncVectorEnv))" for vector wrappers A and B around a SyncVectorEnv."""
    names, inner = [], vec_env
    while inner is not inner.unwrapped and hasattr(inner, "env"):
        names.append(type(inner).__name__)
        inner = inner.env
    return "(".join([*names, type(inner).__name__]) + ")" * len(names)


# ---------------------------------------------------------------------------------------------------------------
# Per-env infos
# ---------------------------------------------------------------------------------------------------------------


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


def sb3_info(
    infos: dict[str, Any] | None,
    i: int,
    terminated: bool,
    truncated: bool,
    final_obs: Any = None,
    episode: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Env i's info as Stable-Baselines3's VecEnv (+ Monitor) gives it, the one builder of SB3's infos (`VecEnv.step`
    and the host rollout's callbacks): the env's own entries and, where its episode ended (terminated or truncated),
    `"terminal_observation"` (the raw final observation; `final_obs` when gymnasium gave none), `"episode"` (Monitor's
    {"r", "l", "t"} when given, unless the env's own wrappers already wrote one) and `"TimeLimit.truncated"`: truncated
    and not terminated (SB3's rule: a step that is both is a termination)."""
    info = sub_env_info(infos, i) if infos else {}
    if not (terminated or truncated):
        return info
    final_info = info.pop("final_info", None)
    if isinstance(final_info, dict):  # SAME_STEP: the finished episode's last info
        info.update(final_info)
    info["terminal_observation"] = info.pop("final_obs", final_obs)
    if episode is not None:
        info.setdefault("episode", episode)
    info["TimeLimit.truncated"] = bool(truncated and not terminated)
    return info


# ---------------------------------------------------------------------------------------------------------------
# Final observations in gymnasium's vector infos
# ---------------------------------------------------------------------------------------------------------------


def final_observations(infos: dict[str, Any], ended: np.ndarray) -> dict[int, Any]:
    """{env index: last observation of its episode} for the envs in `ended` that have one in `infos["final_obs"]`
    (gymnasium: an object array masked by `_final_obs`; also a dense array, or a dict of them, per env in rows)."""
    final, mask = infos.get("final_obs"), infos.get("_final_obs")
    if final is None:
        return {}
    rows = {}
    for i in np.flatnonzero(ended):
        if mask is None or mask[i]:
            rows[int(i)] = {key: value[i] for key, value in final.items()} if isinstance(final, dict) else final[i]
    return rows


def with_final_observations(infos: dict[str, Any], num_envs: int, rows: dict[int, Any]) -> dict[str, Any]:
    """`infos` with `rows` ({env index: observation}) as gymnasium's `final_obs` (an object array, None elsewhere)
    and `_final_obs` mask."""
    values = np.full(num_envs, None, dtype=object)
    mask = np.zeros(num_envs, dtype=bool)
    for i, obs in rows.items():
        values[i], mask[i] = obs, True
    return {**infos, "final_obs": values, "_final_obs": mask}
