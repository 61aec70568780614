"""Checks on gymnasium envs with one-line errors (`EnvError`): gymnasium's errors for an id in kppo's words
(`make_env`, with the extra to install for a missing dependency), and `CheckedEnv`, the wrapper that names a sub-env
that raises or breaks the gymnasium API (which `kppo.gym_envs.vector` puts around every sub-env it builds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import gymnasium as gym
import numpy as np

from kppo.gym_envs.spaces import one_line
from kppo.core.errors import first_line


class EnvError(ValueError):
    """A one-line error about a gymnasium env in kppo's words (the original exception, if any, is chained)."""


class UnavailableEnvError(EnvError, gym.error.Error):
    """An id gymnasium cannot make, in kppo's words; also gymnasium's error, so that a program catching it (SB3's
    tests fall back on Taxi-v4 when Taxi-v3 raises `gym.error.DeprecatedEnv`) still does."""


class DeprecatedEnvError(UnavailableEnvError, gym.error.DeprecatedEnv):
    """A deprecated version of an id (`gym.error.DeprecatedEnv`)."""


class NameNotFoundError(UnavailableEnvError, gym.error.NameNotFound):
    """An id gymnasium has no env of (`gym.error.NameNotFound`)."""


class VersionNotFoundError(UnavailableEnvError, gym.error.VersionNotFound):
    """A version an id does not have (`gym.error.VersionNotFound`)."""


#: gymnasium's error -> kppo's, each both.
_UNAVAILABLE: tuple[tuple[type, type[UnavailableEnvError]], ...] = (
    (gym.error.DeprecatedEnv, DeprecatedEnvError),
    (gym.error.NameNotFound, NameNotFoundError),
    (gym.error.VersionNotFound, VersionNotFoundError),
)


def _unavailable(err: gym.error.Error) -> type[UnavailableEnvError]:
    """The class of kppo's error for gymnasium's `err` (the most specific of those above)."""
    return next((ours for theirs, ours in _UNAVAILABLE if isinstance(err, theirs)), UnavailableEnvError)


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


def describe(value: Any) -> str:
    """What a value is, for messages: "shape (5,) float32" for arrays, else its type (and short repr)."""
    if isinstance(value, np.ndarray):
        return f"shape {value.shape} {value.dtype}"
    text = one_line(value)
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
        return describe(obs), f"shape {space.shape} {space.dtype} ({one_line(space)})"
    if array.shape == space.shape and np.can_cast(array.dtype, cast(np.dtype, space.dtype), "same_kind"):
        return None
    got = describe(obs)
    if not isinstance(obs, np.ndarray) and array.dtype != object:  # a list or scalar: also its shape and dtype
        got = f"{got} of {describe(array)}"
    return got, f"shape {space.shape} {space.dtype} ({one_line(space)})"


_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def _is_scalar(value: Any) -> bool:
    """A real number or bool, also as a 0-d array (what a vector env can write into its reward/flag arrays)."""
    if isinstance(value, _SCALARS):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"


def seed_spaces(env: gym.Env, seed: int) -> None:
    """Seeds the env's action and observation spaces (and its unwrapped env's, when its wrappers have their own), as
    SB3's `set_random_seed` seeds the model's action space: envs that sample from their own spaces then repeat."""
    spaces = [env.action_space, env.observation_space, env.unwrapped.action_space, env.unwrapped.observation_space]
    for space in {id(space): space for space in spaces}.values():
        space.seed(int(seed))


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
        if seed is not None:  # sub-env `index` gets seed + index from its vector env
            seed_spaces(self.env, seed)
        try:  # options only when given: envs written before gymnasium's `options` keyword reset as SB3 resets them
            result = self.env.reset(seed=seed) if options is None else self.env.reset(seed=seed, options=options)
        except Exception as err:  # any env error: named, chained, re-raised
            raise SubEnvError(self.index, f"raised {type(err).__name__} in reset()", first_line(err)) from err
        if not isinstance(result, tuple) or len(result) != 2:
            raise SubEnvError(self.index, f"returned {self._count(result)} from reset()", ", expected 2 (obs, info)")
        self._check("reset()", result[0], result[1])
        return result

    def step(self, action: Any) -> Any:
        try:
            result = self.env.step(action)
        except Exception as err:
            raise SubEnvError(self.index, f"raised {type(err).__name__} in step()", first_line(err)) from err
        if not isinstance(result, tuple) or len(result) != 5:
            raise SubEnvError(
                self.index,
                f"returned {self._count(result)} from step()",
                ", expected 5 (obs, reward, terminated, truncated, info)",
            )
        obs, reward, terminated, truncated, info = result
        if (
            isinstance(obs, np.ndarray)
            and (obs.shape, obs.dtype) == self._box
            and isinstance(reward, _SCALARS)
            and isinstance(terminated, _SCALARS)
            and isinstance(truncated, _SCALARS)
            and isinstance(info, dict)
        ):
            return result
        for name, value in (("reward", reward), ("terminated", terminated), ("truncated", truncated)):
            if not _is_scalar(value):
                raise SubEnvError(
                    self.index,
                    f"returned a {name} of {describe(value)} from step()",
                    f", expected a scalar (e.g. {'float' if name == 'reward' else 'bool'}({name}))",
                )
        self._check("step()", obs, info)
        return result

    @staticmethod
    def _count(result: Any) -> str:
        return f"{len(result)} values" if isinstance(result, tuple) else f"one {type(result).__name__}, not a tuple,"

    def _check(self, call: str, obs: Any, info: Any) -> None:
        problem = observation_problem(self.observation_space, obs)
        if problem is not None:
            raise SubEnvError(
                self.index, f"returned an observation of {problem[0]} from {call}", f", expected {problem[1]}"
            )
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
        see = (
            "; list the registered ids with gymnasium.pprint_registry()"
            if isinstance(err, (gym.error.NameNotFound, gym.error.NamespaceNotFound))
            else ""
        )
        raise _unavailable(err)(
            f"env: {env_id!r} is not available in gymnasium {gym.__version__}: "
            f"{' '.join(str(err).split()).rstrip('.')}{see}"
        ) from None
    except TypeError as err:
        if kwargs and "unexpected keyword argument" in str(err):
            detail = str(err).split(" was raised from the environment creator")[0]
            raise EnvError(f"env_kwargs: {env_id!r} does not take {kwargs}: {detail}") from None
        raise EnvError(f"env: gym.make({env_id!r}) raised TypeError{first_line(err)}") from err
    except Exception as err:  # the env's constructor: named, chained
        raise EnvError(f"env: gym.make({env_id!r}) raised {type(err).__name__}{first_line(err)}") from err
