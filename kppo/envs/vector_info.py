"""What kppo reads from and checks on gymnasium envs besides observations and rewards: the sub-envs' time limit and
id; the auto-reset mode (gymnasium's default NEXT_STEP re-created as SAME_STEP: `same_step`); one-line errors
(`EnvError`): gymnasium's errors for an id in kppo's words (`make_env`) and `CheckedEnv`, the wrapper that names a
sub-env that raises or breaks the gymnasium API; per-env info dicts (one sub-env's entries; Stable-Baselines3's
per-env infos of a step). numpy + gymnasium only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
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


_SAME_STEP_FIX = ("create it with autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP (gym.make_vec: "
                  "vectorization_mode='sync', vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP})")


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
        raise ValueError(f"autoreset_mode: expected 'SameStep' inside vector wrappers, got 'NextStep' under "
                         f"{_wrapper_names(vec_env)} (kppo re-creates only unwrapped NextStep vector envs); "
                         f"{_SAME_STEP_FIX}")
    spec = vec_env.spec
    if isinstance(vec_env, SyncVectorEnv):
        rebuilt = SyncVectorEnv([lambda env=env: env for env in vec_env.envs], copy=vec_env.copy,
                                observation_mode=vec_env.observation_mode, autoreset_mode=AutoresetMode.SAME_STEP)
    elif isinstance(vec_env, AsyncVectorEnv):
        rebuilt = AsyncVectorEnv(
            vec_env.env_fns, shared_memory=vec_env.shared_memory, copy=vec_env.copy, context=vec_env.context,
            daemon=vec_env.daemon, worker=vec_env.worker, observation_mode=vec_env.observation_mode,
            max_concurrency=vec_env.max_concurrency, autoreset_mode=AutoresetMode.SAME_STEP)
        vec_env.close()
    elif spec is not None and spec.kwargs.get("vectorization_mode") == "vector_entry_point" and spec.entry_point:
        kwargs = {k: v for k, v in spec.kwargs.items() if k not in ("num_envs", "vectorization_mode")}
        try:
            rebuilt = gym.make_vec(spec.id, vec_env.num_envs, vectorization_mode="sync",
                                   vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kwargs)
        except Exception as err:  # noqa: BLE001  (e.g. a kwarg only the vector entry point takes)
            raise ValueError(f"autoreset_mode: expected 'SameStep', got 'NextStep' from {type(vec_env).__name__}, "
                             f"and re-creating {spec.id!r} with {kwargs} as single envs raised "
                             f"{type(err).__name__}{first_line(err)}; {_SAME_STEP_FIX}") from err
        vec_env.close()
        return rebuilt
    else:
        raise ValueError(f"autoreset_mode: expected 'SameStep', got 'NextStep' from {type(vec_env).__name__}, "
                         f"which kppo cannot re-create; {_SAME_STEP_FIX}")
    rebuilt.spec = spec
    return rebuilt


def _wrapper_names(vec_env: VectorEnv) -> str:
    """"A(B(SyncVectorEnv))" for vector wrappers A and B around a SyncVectorEnv."""
    names, inner = [], vec_env
    while inner is not inner.unwrapped and hasattr(inner, "env"):
        names.append(type(inner).__name__)
        inner = inner.env
    return "(".join(names + [type(inner).__name__]) + ")" * len(names)


# ---------------------------------------------------------------------------------------------------------------
# One-line errors about envs: gymnasium's errors for an id, and the sub-env check
# ---------------------------------------------------------------------------------------------------------------


class EnvError(ValueError):
    """A one-line error about a gymnasium env in kppo's words (the original exception, if any, is chained)."""


class SubEnvError(EnvError):
    """Sub-env `index` raised or broke the gymnasium API; args (index, what, detail) read "env {what} in env {index}
    {detail}", and `GymVecEnv` adds the step. Rebuilt from its args alone, so it crosses AsyncVectorEnv's process
    boundary (which re-raises `type(err)(err)`)."""

    def __init__(self, *args: Any):
        if len(args) == 1 and isinstance(args[0], SubEnvError):
            args = args[0].args
        super().__init__(*args)

    def message(self, step: int | None = None) -> str:
        index, what, detail = self.args
        return f"env {what}{'' if step is None else f' at step {step}'} in env {index}{detail}"

    def __str__(self) -> str:
        return self.message()


def first_line(err: BaseException, sep: str = ": ") -> str:
    """The first line of `err`'s message after `sep` ("" for an empty message)."""
    lines = str(err).strip().splitlines()
    return f"{sep}{lines[0].strip()}" if lines else ""


def _one_line(value: Any) -> str:
    return " ".join(repr(value).split())


def describe(value: Any) -> str:
    """What a value is, for messages: "shape (5,) float32" for arrays, else its type (and short repr)."""
    if isinstance(value, np.ndarray):
        return f"shape {value.shape} {value.dtype}"
    text = _one_line(value)
    return f"type {type(value).__name__}" + (f" ({text})" if len(text) <= 40 else "")


def observation_problem(space: gym.spaces.Space, obs: Any) -> tuple[str, str] | None:
    """None when `obs` is one observation a vector env can batch for `space` (a Box's shape, a dtype castable to the
    Box's dtype; a Dict's keys), else ("what was received", "what was expected") for a one-line message."""
    if isinstance(space, gym.spaces.Dict):
        keys = list(space.keys())
        if not isinstance(obs, Mapping) or any(key not in obs for key in keys):
            got = f"keys {list(obs)}" if isinstance(obs, Mapping) else describe(obs)
            return got, f"a dict with keys {keys}"
        for key in keys:
            problem = observation_problem(space[key], obs[key])
            if problem is not None:
                return f"[{key!r}] {problem[0]}", problem[1]
        return None
    if isinstance(obs, np.ndarray) and obs.shape == space.shape and obs.dtype == space.dtype:
        return None  # the fast path
    try:
        array = np.asarray(obs)
    except ValueError:  # ragged nested sequences
        return describe(obs), f"shape {space.shape} {space.dtype} ({_one_line(space)})"
    if array.shape == space.shape and np.can_cast(array.dtype, space.dtype, "same_kind"):
        return None
    got = describe(obs)
    if not isinstance(obs, np.ndarray) and array.dtype != object:  # a list or scalar: also its shape and dtype
        got = f"{got} of {describe(array)}"
    return got, f"shape {space.shape} {space.dtype} ({_one_line(space)})"


_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def _is_scalar(value: Any) -> bool:
    """A real number or bool, also as a 0-d array (what a vector env can write into its reward/flag arrays)."""
    if isinstance(value, _SCALARS):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"


class CheckedEnv(gym.Wrapper):
    """Wraps sub-env `index` of the vector envs kppo builds: an exception in `reset`/`step` becomes a `SubEnvError`
    naming it (type and first line; the original chained), and so does a return the vector env cannot batch: not
    (obs, info) / (obs, reward, terminated, truncated, info), an observation off the space's shape or dtype, a
    non-scalar reward or flag, an info that is not a dict."""

    def __init__(self, env: gym.Env, index: int):
        super().__init__(env)
        self.index = index
        space = env.observation_space  # the fast path of `step`: a Box observation of its exact shape and dtype
        self._box = (space.shape, space.dtype) if isinstance(space, gym.spaces.Box) else None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        try:
            result = self.env.reset(seed=seed, options=options)
        except Exception as err:  # noqa: BLE001  (any env error: named, chained, re-raised)
            raise SubEnvError(self.index, f"raised {type(err).__name__} in reset()", first_line(err)) from err
        if not isinstance(result, tuple) or len(result) != 2:
            raise SubEnvError(self.index, f"returned {self._count(result)} from reset()", ", expected 2 (obs, info)")
        self._check("reset()", result[0], result[1])
        return result

    def step(self, action: Any) -> Any:
        try:
            result = self.env.step(action)
        except Exception as err:  # noqa: BLE001
            raise SubEnvError(self.index, f"raised {type(err).__name__} in step()", first_line(err)) from err
        if not isinstance(result, tuple) or len(result) != 5:
            raise SubEnvError(self.index, f"returned {self._count(result)} from step()",
                              ", expected 5 (obs, reward, terminated, truncated, info)")
        obs, reward, terminated, truncated, info = result
        if (isinstance(obs, np.ndarray) and (obs.shape, obs.dtype) == self._box and isinstance(reward, _SCALARS)
                and isinstance(terminated, _SCALARS) and isinstance(truncated, _SCALARS) and isinstance(info, dict)):
            return result
        for name, value in (("reward", reward), ("terminated", terminated), ("truncated", truncated)):
            if not _is_scalar(value):
                raise SubEnvError(self.index, f"returned a {name} of {describe(value)} from step()",
                                  f", expected a scalar (e.g. {'float' if name == 'reward' else 'bool'}({name}))")
        self._check("step()", obs, info)
        return result

    @staticmethod
    def _count(result: Any) -> str:
        return f"{len(result)} values" if isinstance(result, tuple) else f"one {type(result).__name__}, not a tuple,"

    def _check(self, call: str, obs: Any, info: Any) -> None:
        problem = observation_problem(self.observation_space, obs)
        if problem is not None:
            raise SubEnvError(self.index, f"returned an observation of {problem[0]} from {call}",
                              f", expected {problem[1]}")
        if not isinstance(info, dict):
            raise SubEnvError(self.index, f"returned an info of {describe(info)} from {call}", ", expected a dict")


_EXTRAS = {"box2d": ("Box2D", "box2d"), "mujoco": ("MuJoCo", "mujoco")}


def install_hint(err: BaseException, entry_point: Any = None) -> str | None:
    """'Box2D, which is not installed: pip install -e ".[box2d]"' for a DependencyNotInstalled about one of kppo's
    extras (pyproject.toml: box2d, mujoco), found in the message or the env's entry point; None otherwise."""
    text = f"{err} {entry_point if isinstance(entry_point, str) else ''}".lower()
    for key, (name, extra) in _EXTRAS.items():
        if key in text:
            return f'{name}, which is not installed: pip install -e ".[{extra}]"'
    return None


def make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """`gym.make(env_id, **kwargs)`, with gymnasium's errors as one-line EnvErrors naming the id and the fix: an
    unknown, deprecated or malformed id (gymnasium's own words, which name the versions there are), a missing extra
    (the pip command), kwargs the env does not take; any other exception of the env's constructor (chained)."""
    try:
        return gym.make(env_id, **kwargs)
    except gym.error.DependencyNotInstalled as err:
        spec = gym.registry.get(env_id)
        hint = install_hint(err, spec.entry_point if spec is not None else None)
        needs = hint or f"a package that is not installed{first_line(err)}"
        raise EnvError(f"env: {env_id!r} needs {needs}") from None
    except gym.error.Error as err:  # NameNotFound, VersionNotFound, DeprecatedEnv, NamespaceNotFound, malformed ids
        see = ("; list the registered ids with gymnasium.pprint_registry()"
               if isinstance(err, (gym.error.NameNotFound, gym.error.NamespaceNotFound)) else "")
        raise EnvError(f"env: {env_id!r} is not available in gymnasium {gym.__version__}: "
                       f"{' '.join(str(err).split()).rstrip('.')}{see}") from None
    except TypeError as err:
        if kwargs and "unexpected keyword argument" in str(err):
            detail = str(err).split(" was raised from the environment creator")[0]
            raise EnvError(f"env_kwargs: {env_id!r} does not take {kwargs}: {detail}") from None
        raise EnvError(f"env: gym.make({env_id!r}) raised TypeError{first_line(err)}") from err
    except Exception as err:  # noqa: BLE001  (the env's constructor: named, chained)
        raise EnvError(f"env: gym.make({env_id!r}) raised {type(err).__name__}{first_line(err)}") from err


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
