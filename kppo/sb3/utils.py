"""Stable-Baselines3's and sb3-contrib's helpers that their programs call, with SB3's semantics and kppo's envs:

set_random_seed                                   stable_baselines3.common.utils
FloatSchedule, LinearSchedule, ConstantSchedule   stable_baselines3.common.utils (and the deprecated
get_linear_fn, constant_fn)                       functions, which warn as SB3's do)
get_flattened_obs_dim, maybe_transpose          stable_baselines3.common.preprocessing
is_wrapped, unwrap_wrapper                        stable_baselines3.common.env_util (gymnasium wrappers)
unwrap_vec_wrapper, is_vecenv_wrapped,            stable_baselines3.common.vec_env (kppo's VecEnv wrappers)
unwrap_vec_normalize
check_env                                         stable_baselines3.common.env_checker (SB3's checks, not
                                                  gymnasium's determinism ones; the spaces kppo trains on)
get_action_masks, is_masking_supported            sb3_contrib.common.maskable.utils
sync_envs_normalization                           stable_baselines3.common.vec_env
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import keras
import numpy as np
from gymnasium.vector import AsyncVectorEnv
from gymnasium.utils.env_checker import check_space_limit

from kppo.core.errors import ArgumentError, ArgumentTypeError
from kppo.gym_envs.action_masks import METHOD
from kppo.gym_envs.spaces import check_action_space, check_observation_space, is_image_space, space_shape
from kppo.vec_envs.vec_env import VecEnv, VecEnvWrapper
from kppo.sb3.vec_normalize import VecNormalize

Schedule = Callable[[float], float]


def set_random_seed(seed: int, using_cuda: bool = False) -> None:
    """SB3's `set_random_seed`: seeds Python's `random`, numpy's global generator and TensorFlow's global seed
    (`keras.utils.set_random_seed`), so an env that draws from them repeats its run. kppo's own sampling is
    stateless and follows the model's seed; `using_cuda` (SB3's cuDNN determinism switch) has no Keras meaning and is
    accepted for SB3's signature."""
    del using_cuda
    keras.utils.set_random_seed(int(seed))


# --- schedules: progress_remaining (1 at the start, 0 at the end) -> value --------------------------------------


class ConstantSchedule:
    """The same value at every progress."""

    def __init__(self, val: float):
        self.val = val

    def __call__(self, _: float) -> float:
        """The value, whatever the progress."""
        return self.val

    def __repr__(self) -> str:
        return f"ConstantSchedule(val={self.val})"


class LinearSchedule:
    """From `start` at progress_remaining 1 to `end` once a fraction `end_fraction` of the run is done, then `end`."""

    def __init__(self, start: float, end: float, end_fraction: float) -> None:
        self.start, self.end, self.end_fraction = start, end, end_fraction

    def __call__(self, progress_remaining: float) -> float:
        """The value at `progress_remaining` (1 -> 0)."""
        done = 1 - progress_remaining
        if done > self.end_fraction:
            return self.end
        return self.start + done * (self.end - self.start) / self.end_fraction

    def __repr__(self) -> str:
        return f"LinearSchedule(start={self.start}, end={self.end}, end_fraction={self.end_fraction})"


class FloatSchedule:
    """A number or a schedule whose values are returned as Python floats (SB3 wraps every schedule in one)."""

    def __init__(self, value_schedule: Schedule | float):
        if isinstance(value_schedule, FloatSchedule):
            value_schedule = value_schedule.value_schedule
        elif isinstance(value_schedule, (int, float)) and not isinstance(value_schedule, bool):
            value_schedule = ConstantSchedule(float(value_schedule))
        elif not callable(value_schedule):
            raise ArgumentError(f"value_schedule: expected a number or a callable schedule, got {value_schedule!r}")
        self.value_schedule: Schedule = value_schedule

    def __call__(self, progress_remaining: float) -> float:
        """The schedule's value at `progress_remaining`, as a float."""
        return float(self.value_schedule(progress_remaining))

    def __repr__(self) -> str:
        return f"FloatSchedule({self.value_schedule})"


def get_linear_fn(start: float, end: float, end_fraction: float) -> Schedule:
    """SB3's deprecated `get_linear_fn` (a `LinearSchedule`), with SB3's deprecation warning."""
    warnings.warn("get_linear_fn() is deprecated, please use LinearSchedule() instead", stacklevel=2)
    return LinearSchedule(start, end, end_fraction)


def constant_fn(val: float) -> Schedule:
    """SB3's deprecated `constant_fn` (a `ConstantSchedule`), with SB3's deprecation warning."""
    warnings.warn("constant_fn() is deprecated, please use ConstantSchedule() instead", stacklevel=2)
    return ConstantSchedule(val)


# --- spaces and wrappers ------------------------------------------------------------------------------------------


def get_flattened_obs_dim(observation_space: gym.spaces.Space) -> int:
    """The length of one observation flattened (a Discrete one-hot, a Dict's parts concatenated), as SB3's."""
    return int(gym.spaces.flatdim(observation_space))


def _transposed(image: np.ndarray, space: gym.spaces.Space) -> np.ndarray:
    """`image` (one HWC frame or a batch) as CHW when that is `space`'s shape and `image` is not yet it (SB3's
    `maybe_transpose` of one image space); else as it is."""
    if not is_image_space(space) or image.ndim not in (3, 4):
        return image
    shape = space_shape(space)
    if image.shape == shape or image.shape[1:] == shape:
        return image
    transposed = np.transpose(image, (2, 0, 1) if image.ndim == 3 else (0, 3, 1, 2))
    return transposed if transposed.shape == shape or transposed.shape[1:] == shape else image


def maybe_transpose(observation: Any, observation_space: gym.spaces.Space) -> Any:
    """SB3's `maybe_transpose`: an HWC image observation (one frame or a batch) given to a policy whose image space is
    CHW (an SB3 model trained through `VecTransposeImage`) transposed to CHW; anything else as it is. A Dict's image
    keys each, as SB3's `obs_to_tensor` does."""
    if isinstance(observation_space, gym.spaces.Dict) and isinstance(observation, dict):
        return {
            key: _transposed(np.asarray(value), observation_space[key]) if key in observation_space.spaces else value
            for key, value in observation.items()
        }
    if isinstance(observation, (np.ndarray, list)) and is_image_space(observation_space):
        return _transposed(np.asarray(observation), observation_space)
    return observation


def unwrap_wrapper(env: gym.Env, wrapper_class: type[gym.Wrapper]) -> gym.Wrapper | None:
    """The first `wrapper_class` in `env`'s chain of gymnasium wrappers, or None."""
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, wrapper_class):
            return current
        current = current.env
    return None


def is_wrapped(env: gym.Env, wrapper_class: type[gym.Wrapper]) -> bool:
    """Whether a `wrapper_class` is in `env`'s chain of gymnasium wrappers."""
    return unwrap_wrapper(env, wrapper_class) is not None


def unwrap_vec_wrapper(env: VecEnv, vec_wrapper_class: type[VecEnvWrapper]) -> VecEnvWrapper | None:
    """The first `vec_wrapper_class` in `env`'s chain of VecEnv wrappers (`VecNormalize`, `VecFrameStack`, ...)."""
    current: Any = env
    while isinstance(current, VecEnvWrapper):
        if isinstance(current, vec_wrapper_class):
            return current
        current = current.venv
    return None


def is_vecenv_wrapped(env: VecEnv, vec_wrapper_class: type[VecEnvWrapper]) -> bool:
    """Whether a `vec_wrapper_class` is in `env`'s chain of VecEnv wrappers."""
    return unwrap_vec_wrapper(env, vec_wrapper_class) is not None


def unwrap_vec_normalize(env: VecEnv) -> VecNormalize | None:
    """The `VecNormalize` in `env`'s chain of VecEnv wrappers, or None."""
    found = unwrap_vec_wrapper(env, VecNormalize)
    return found if isinstance(found, VecNormalize) else None


def sync_envs_normalization(env: VecEnv, eval_env: VecEnv) -> None:
    """SB3's `sync_envs_normalization`: `eval_env`'s VecNormalize gets `env`'s statistics as they are now (a copy).
    The two must wrap alike (one-line ArgumentError otherwise). kppo's model normalizes by itself, so an evaluation
    through the model is right without it; this keeps the eval env's `obs_rms` / `normalize_obs` in step, as SB3."""
    here, there = env, eval_env
    while isinstance(here, VecEnvWrapper):
        if not isinstance(there, VecEnvWrapper) or isinstance(here, VecNormalize) != isinstance(there, VecNormalize):
            raise ArgumentError(
                f"eval_env: expected the wrappers of env ({type(here).__name__} here), got {type(there).__name__}"
            )
        if isinstance(here, VecNormalize) and isinstance(there, VecNormalize):
            there.loaded = (here.obs_rms.copy(), here.ret_rms.copy())
        here, there = here.venv, there.venv


def _check_array_obs(obs: np.ndarray, space: gym.spaces.Space, method: str) -> None:
    """SB3's detail for an array observation: the shape, the dtype, then every index outside a Box's bounds."""
    where = f"The observation returned by the `{method}()` method does not match the"
    if obs.shape != space.shape:
        raise ArgumentError(
            f"{where} shape of the given observation space {space}. Expected: {space.shape}, actual shape: {obs.shape}"
        )
    if not np.can_cast(obs.dtype, cast(Any, space.dtype)):
        raise ArgumentError(
            f"{where} data type (cannot cast) of the given observation space {space}. Expected: {space.dtype}, "
            f"actual dtype: {obs.dtype}"
        )
    if isinstance(space, gym.spaces.Box):
        outside = np.argwhere((obs < space.low) | (obs > space.high))
        if len(outside):
            lines = [f"{where} bounds of the given observation space {space}. ", f"{len(outside)} invalid indices: "]
            for index in map(tuple, outside):
                lines.append(
                    f"Expected: {space.low[index]} <= obs[{','.join(map(str, index))}] <= {space.high[index]}, "
                    f"actual value: {obs[index]} "
                )
            raise ArgumentError("\n".join(lines))


def _check_obs(obs: Any, space: gym.spaces.Space, method: str) -> None:
    """SB3's `_check_obs`: one observation of `reset` or `step` against its space, an AssertionError in SB3's words
    naming what differs (a Dict's key first: `Error while checking key=...`)."""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(obs, dict):
            raise ArgumentError(f"The observation returned by `{method}()` must be a dictionary")
        if obs.keys() != space.spaces.keys():
            raise ArgumentError(
                f"The observation keys returned by `{method}()` must match the observation space keys: "
                f"{obs.keys()} != {space.spaces.keys()}"
            )
        for key, sub in space.spaces.items():
            try:
                _check_obs(obs[key], sub, method)
            except AssertionError as err:
                raise ArgumentError(f"Error while checking key={key}: {err}") from err
        return
    if not isinstance(space, gym.spaces.Tuple) and isinstance(obs, tuple):
        raise ArgumentError(
            f"The observation returned by the `{method}()` method should be a single value, not a tuple"
        )
    if isinstance(space, gym.spaces.Discrete) and not np.issubdtype(type(obs), np.integer):
        raise ArgumentError(f"The observation returned by `{method}()` method must be an int")
    if not isinstance(space, (gym.spaces.Discrete, gym.spaces.Tuple)) and not isinstance(obs, np.ndarray):
        raise ArgumentError(f"The observation returned by `{method}()` method must be a numpy array")
    if isinstance(obs, np.ndarray):
        _check_array_obs(obs, space, method)
    if not space.contains(obs):
        raise ArgumentError(
            f"The observation returned by the `{method}()` method does not match the given observation space {space}"
        )


def _check_reset(env: gym.Env) -> None:
    """SB3's checks of one `reset()`: a tuple (obs, info), info a dict, the observation in the space."""
    data = env.reset()
    if not isinstance(data, tuple):
        raise ArgumentError("`reset()` must return a tuple (obs, info)")
    if len(data) != 2:
        raise ArgumentError(f"`reset()` must return a tuple of size 2 (obs, info), not {len(data)}")
    obs, info = data
    if not isinstance(info, dict):
        raise ArgumentError(f"The second element of the tuple return by `reset()` must be a dictionary not {info}")
    _check_obs(obs, env.observation_space, "reset")


def _check_step(env: gym.Env) -> None:
    """SB3's `_check_returned_values` of one `step`: gymnasium's 5-tuple with a number reward, bool flags and a dict
    info, the observation in the space (AssertionErrors with SB3's words)."""
    data = env.step(env.action_space.sample())
    if not (isinstance(data, tuple) and len(data) == 5):
        raise ArgumentError(
            f"The `step()` method must return five values: obs, reward, terminated, truncated, info. Actual: "
            f"{len(data) if isinstance(data, tuple) else type(data).__name__} values returned."
        )
    obs, reward, terminated, truncated, info = data
    _check_obs(obs, env.observation_space, "step")
    if not isinstance(reward, (float, int, np.floating, np.integer)):
        raise ArgumentError("The reward returned by `step()` must be a float")
    if not isinstance(terminated, (bool, np.bool_)) or not isinstance(truncated, (bool, np.bool_)):
        raise ArgumentError("The `terminated` and `truncated` signals must be booleans")
    if not isinstance(info, dict):
        raise ArgumentError("The `info` returned by `step()` must be a python dictionary")


#: Spaces SB3's `check_env` warns about (and then checks no further), by gymnasium class
_WARNED_SPACES = {
    gym.spaces.Tuple: "use a Dict instead",
    gym.spaces.Sequence: "its observations have no fixed size",
    gym.spaces.Graph: "its observations have no fixed size",
    gym.spaces.OneOf: "its observations have no fixed layout",
}


def _unsupported_spaces(observation_space: gym.spaces.Space, action_space: gym.spaces.Space) -> list[str]:
    """The warnings SB3's `check_env` gives for spaces it cannot train on: a Tuple, Sequence, Graph or OneOf anywhere
    in the observation space, a Dict inside a Dict, a Dict or Tuple action space."""
    found, pending = [], [(observation_space, 0)]
    while pending:
        space, dicts = pending.pop()
        kind = type(space)
        if kind in _WARNED_SPACES:
            found.append(
                f"observation_space: a {kind.__name__} space is not supported by kppo ({_WARNED_SPACES[kind]})"
            )
        if isinstance(space, gym.spaces.Dict) and dicts:
            found.append("observation_space: a Dict space inside a Dict is not supported by kppo (flatten it)")
        children = getattr(space, "spaces", None)
        children = children.values() if isinstance(children, dict) else children or ()
        feature = getattr(space, "feature_space", None)  # a Sequence's elements
        pending += [
            (child, dicts + isinstance(space, gym.spaces.Dict)) for child in (*children, *filter(None, [feature]))
        ]
    if isinstance(action_space, (gym.spaces.Dict, gym.spaces.Tuple)):
        found.append(
            f"action_space: a {type(action_space).__name__} space is not supported by kppo (flatten it into a Box or a "
            f"MultiDiscrete)"
        )
    return found


def check_env(env: gym.Env, warn: bool = True, skip_render_check: bool = True) -> None:
    """SB3's `check_env`: the env is a `gymnasium.Env`, `reset` takes a `seed`, `reset` and `step` return gymnasium's
    values with observations in the space (AssertionErrors, as SB3's asserts), and, with `warn`, gymnasium's advice
    on the spaces (unbounded or odd Boxes: warnings). Like SB3's it does not test determinism or the env's use of
    `np_random` (envs that ignore their seed train). With `warn`, a space SB3 warns about (a Tuple, Sequence, Graph or
    OneOf observation, a nested Dict, a Dict or Tuple action) gets SB3's warning and ends the check, as SB3's does;
    other spaces kppo cannot train on get one-line errors."""
    if not isinstance(env, gym.Env):
        raise ArgumentError(f"env: expected a gymnasium.Env, got {type(env).__name__} (check_env checks one env)")
    unsupported = _unsupported_spaces(env.observation_space, env.action_space) if warn else []
    for message in unsupported:
        warnings.warn(message, UserWarning, stacklevel=2)
    if unsupported:
        warnings.warn(
            "check_env: the env's spaces are not supported, so it checks no further", UserWarning, stacklevel=2
        )
        return
    check_observation_space(env.observation_space)
    check_action_space(env.action_space)
    try:
        env.reset(seed=0)
    except TypeError as err:
        raise ArgumentTypeError("The reset() method must accept a `seed` parameter") from err
    if warn:
        check_space_limit(env.observation_space, "observation")
        check_space_limit(env.action_space, "action")
    _check_reset(env)
    _check_step(env)
    if not skip_render_check and env.render_mode is not None:
        env.render()


# --- action masks (sb3-contrib) -----------------------------------------------------------------------------------


def is_masking_supported(env: Any) -> bool:
    """Whether `env` (a gymnasium env or a kppo VecEnv) gives action masks through an `action_masks()` method; a
    `SubprocVecEnv`'s sub-envs are asked without an error in their processes, so the env stays usable."""
    if isinstance(env, VecEnv):
        if isinstance(env.vector_env.unwrapped, AsyncVectorEnv):  # a failed get_attr there closes the worker's pipe
            return all(cast(Any, env.vector_env).call("has_wrapper_attr", METHOD))
        try:
            env.get_attr(METHOD)
        except AttributeError:
            return False
        return True
    return hasattr(env, METHOD)


def get_action_masks(env: Any) -> np.ndarray:
    """bool masks of `env`'s current observations: [num_envs, n] for a VecEnv (each sub-env's `action_masks()`),
    the env's `action_masks()` for a single env."""
    if isinstance(env, VecEnv):
        return np.stack(env.env_method(METHOD)).astype(bool)
    return np.asarray(env.action_masks(), bool)
