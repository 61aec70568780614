"""Stable-Baselines3's `VecFrameStack` and `VecTransposeImage` (stable_baselines3.common.vec_env.vec_frame_stack,
.stacked_observations, .vec_transpose) on kppo's SB3-style `VecEnv` (`kppo.gym_envs.sb3_vec_env`).

kppo trains on the gymnasium vector env under a VecEnv (`VecEnv.vector_env`), not on its SB3 API, so each wrapper
does its work once, as a gymnasium vector wrapper over a SAME_STEP vector env (`VectorFrameStack`,
`VectorTransposeImage`), and the VecEnv wrapper only exposes it as its `vector_env`: `kppo.PPO` trains on the
stacked (transposed) observations the SB3 API returns, and `model.predict` takes them. A finished episode's last
observation is stacked (transposed) too, both in gymnasium's `infos["final_obs"]` (what kppo bootstraps truncated
episodes from) and in SB3's `infos[i]["terminal_observation"]`. `FrameStack` stacks one env's observations the same
way, for envs a factory makes (`Config.frame_stack`).
"""

from __future__ import annotations

import sys
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from kppo.core.errors import ArgumentError, ArgumentTypeError
from kppo.gym_envs.sb3_vec_env import VecEnv, VecEnvWrapper
from kppo.gym_envs.vector_info import same_step

ChannelsOrder = str | Mapping[str, str | None] | None
_ORDERS = ("first", "last")


# ---------------------------------------------------------------------------------------------------------------
# Images (SB3's common.preprocessing)
# ---------------------------------------------------------------------------------------------------------------


def is_image_space(space: spaces.Space) -> bool:
    """SB3's `is_image_space`: a 3-D uint8 Box bounded by 0 and 255."""
    return (
        isinstance(space, spaces.Box)
        and len(space.shape) == 3
        and space.dtype == np.uint8
        and bool(np.all(space.low == 0) and np.all(space.high == 255))
    )


def is_image_space_channels_first(space: spaces.Box) -> bool:
    """SB3's heuristic: the channels are the smallest dimension; first (CxHxW) when that is dimension 0, else last
    (a warning when it is the middle one)."""
    smallest = int(np.argmin(space.shape))
    if smallest == 1:
        warnings.warn("Treating image space as channels-last, while second dimension was smallest of the three.")
    return smallest == 0


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


# ---------------------------------------------------------------------------------------------------------------
# Frame stacking
# ---------------------------------------------------------------------------------------------------------------


def shift_in(frames: np.ndarray, obs: np.ndarray, axis: int) -> np.ndarray:
    """A new array: `frames` [B, ...] with its oldest `obs.shape[axis]` channels along `axis` dropped and `obs`
    appended as the newest, i.e. `np.concatenate((frames[<c:>], obs), axis)`.

    A channels-last stack whose channels of one pixel fill 2, 4 or 8 bytes (Atari's 4 grey frames: 4) is shifted as one
    unsigned integer a pixel, on a little-endian machine: 15x faster than the strided copy (28 vs 426 us for 8 envs of
    84x84x4 frames)."""
    c, last = obs.shape[axis], frames.ndim - 1
    group, part = frames.shape[-1] * frames.itemsize, c * frames.itemsize
    if axis == last and group in (2, 4, 8) and part in (1, 2, 4) and part < group and sys.byteorder == "little":
        word = np.dtype(f"<u{group}")
        newest = np.ascontiguousarray(obs, frames.dtype).view(f"<u{part}")[..., 0].astype(word)
        older = np.ascontiguousarray(frames).view(word)[..., 0] >> word.type(8 * part)
        return (older | (newest << word.type(8 * (group - part))))[..., None].view(frames.dtype)
    kept = (slice(None),) * axis + (slice(c, None),)
    return np.concatenate((frames[kept], np.asarray(obs, frames.dtype)), axis=axis)


class _BoxStack:
    """The last `n_stack` observations of a Box space for every env, concatenated along the channel axis (SB3's
    `StackedObservations`): zeros before an episode's first observation."""

    def __init__(self, space: spaces.Box, num_envs: int, n_stack: int, channels_order: Any, name: str):
        if channels_order is None:  # SB3: images by their shape, anything else stacks on the last axis
            channels_first = is_image_space(space) and is_image_space_channels_first(space)
        elif channels_order in _ORDERS:
            channels_first = channels_order == "first"
        else:
            raise ArgumentError(f"{name}: expected 'first', 'last' or None, got {channels_order!r}")
        if not space.shape:
            raise ArgumentError(f"{name}: VecFrameStack expected a Box of one or more dimensions, got {space}")
        self.channels_first = channels_first
        self.axis = 0 if channels_first else len(space.shape) - 1  # of one observation
        self.size = int(space.shape[self.axis])  # channels of one observation
        low, high = np.repeat(space.low, n_stack, self.axis), np.repeat(space.high, n_stack, self.axis)
        self.space = spaces.Box(low, high, dtype=cast(Any, space.dtype))
        self.frames = np.zeros((num_envs, *self.space.shape), dtype=space.dtype)

    def _cut(self, part: slice) -> tuple:
        return (slice(None),) * (self.axis + 1) + (part,)

    def reset(self, obs: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        newest = self._cut(slice(-self.size, None))
        if rows is None:
            self.frames[...] = 0
            self.frames[newest] = obs
        else:  # a partial reset (gymnasium's reset_mask): the other envs' stacks stay
            restarted = np.zeros_like(self.frames[rows])
            restarted[newest] = np.asarray(obs)[rows]
            self.frames[rows] = restarted
        return self.frames.copy()

    def step(
        self, obs: np.ndarray, ended: np.ndarray, finals: dict[int, Any]
    ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        stacked_finals = {
            i: shift_in(self.frames[i : i + 1], np.asarray(final)[None], self.axis + 1)[0]
            for i, final in finals.items()
        }
        self.frames = shift_in(self.frames, obs, self.axis + 1)
        self.frames[self._cut(slice(None, -self.size))][ended] = 0  # a new episode starts from zeros
        return self.frames.copy(), stacked_finals


class _DictStack:
    """A stack per key of a Dict space (SB3: `channels_order` per key from a mapping)."""

    def __init__(self, space: spaces.Dict, num_envs: int, n_stack: int, channels_order: Any, name: str):
        if isinstance(channels_order, Mapping):
            missing = [key for key in space.spaces if key not in channels_order]
            if missing:
                raise ArgumentError(f"{name}: expected an order for every key of the Dict space, missing {missing}")
            orders = dict(channels_order)
        else:
            orders = dict.fromkeys(space.spaces, channels_order)
        self.stacks = {
            key: _stack(sub, num_envs, n_stack, orders[key], f"{name}[{key!r}]") for key, sub in space.spaces.items()
        }
        self.space = spaces.Dict(OrderedDict((key, stack.space) for key, stack in self.stacks.items()))

    def reset(self, obs: dict[str, Any], rows: np.ndarray | None) -> dict[str, Any]:
        return {key: stack.reset(obs[key], rows) for key, stack in self.stacks.items()}

    def step(
        self, obs: dict[str, Any], ended: np.ndarray, finals: dict[int, Any]
    ) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
        stacked: dict[str, Any] = {}
        stacked_finals: dict[int, dict[str, Any]] = {i: {} for i in finals}
        for key, stack in self.stacks.items():
            stacked[key], per_env = stack.step(obs[key], ended, {i: final[key] for i, final in finals.items()})
            for i, value in per_env.items():
                stacked_finals[i][key] = value
        return stacked, stacked_finals


def _stack(space: spaces.Space, num_envs: int, n_stack: int, channels_order: Any, name: str) -> Any:
    if isinstance(space, spaces.Dict):
        return _DictStack(space, num_envs, n_stack, channels_order, name)
    if not isinstance(space, spaces.Box):
        raise ArgumentTypeError(f"observation_space: VecFrameStack stacks Box and Dict spaces, got {space}")
    if isinstance(channels_order, Mapping):
        raise ArgumentTypeError(f"{name}: a mapping is for a Dict observation space, got {space}")
    return _BoxStack(space, num_envs, n_stack, channels_order, name)


def _check_n_stack(n_stack: Any) -> int:
    if isinstance(n_stack, bool) or not isinstance(n_stack, (int, np.integer)) or n_stack < 1:
        raise ArgumentError(f"n_stack: expected a positive int, got {n_stack!r}")
    return int(n_stack)


def _batch_of_one(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {key: np.asarray(value)[None] for key, value in obs.items()}
    return np.asarray(obs)[None]


def _first(obs: Any) -> Any:
    return {key: value[0] for key, value in obs.items()} if isinstance(obs, dict) else obs[0]


class FrameStack(gym.Wrapper):
    """`VecFrameStack` for one env (its stacks, `_BoxStack` / `_DictStack`, over a batch of one): the last `n_stack`
    observations along the channel axis, zeros before an episode's first. For envs made one by one from a factory
    (`Config.frame_stack`): in a SAME_STEP vector env the step that ends an episode returns its last stack (the final
    observation) and the auto-reset starts a new one, so the vector env sees what `VectorFrameStack` gives.

    Args:
        env: the env whose observations (a Box, or a Dict of Boxes) are stacked.
        n_stack: observations per stack.
        channels_order: as `VectorFrameStack`'s. Defaults to `None` (images by SB3's heuristic, else the last axis).
    """

    def __init__(self, env: gym.Env, n_stack: int, channels_order: ChannelsOrder = None):
        super().__init__(env)
        self.n_stack = _check_n_stack(n_stack)
        self._stack = _stack(env.observation_space, 1, self.n_stack, channels_order, "channels_order")
        self.observation_space = self._stack.space

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Resets the env; the stack starts from zeros, the reset observation last."""
        obs, info = self.env.reset(**kwargs)
        return _first(self._stack.reset(_batch_of_one(obs), None)), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Steps the env; the stack with the new observation last (also when the episode ends: the next reset
        clears it)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        stacked, _ = self._stack.step(_batch_of_one(obs), np.zeros(1, bool), {})
        return _first(stacked), reward, terminated, truncated, info


class VectorFrameStack(VectorWrapper):
    """A gymnasium vector wrapper stacking the last `n_stack` observations of each sub-env along the channel axis,
    as SB3's `VecFrameStack`: what `VecFrameStack` exposes as its `vector_env`.

    Args:
        env: a vector env in SAME_STEP autoreset mode (an unwrapped NEXT_STEP one is re-created, as
            `kppo.gym_envs.vector_info.same_step` says).
        n_stack: observations per stack.
        channels_order: "first" or "last" axis; None: an image (3-D uint8 Box in 0..255) by SB3's heuristic
            (the channels are its smallest dimension), anything else "last". A mapping key -> order for a Dict
            space; its Box subspaces are stacked one by one.

    A stack starts from zeros at every reset and every episode start; where an episode ended, `infos["final_obs"]`
    holds its last stack (the last observation after the `n_stack - 1` before it).
    """

    def __init__(self, env: VectorEnv, n_stack: int, channels_order: ChannelsOrder = None):
        n_stack = _check_n_stack(n_stack)
        env = same_step(env)
        super().__init__(env)
        self.n_stack = n_stack
        self._stack = _stack(env.single_observation_space, env.num_envs, self.n_stack, channels_order, "channels_order")
        self.single_observation_space = self._stack.space
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets the vector env; every stack (the masked ones for a `reset_mask` option) starts from zeros."""
        mask = (options or {}).get("reset_mask")  # read before the vector env pops it
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._stack.reset(obs, None if mask is None else np.asarray(mask, bool)), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Steps the vector env; stacked observations, and finished episodes' last stacks in `infos["final_obs"]`."""
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        finals = final_observations(infos, ended)
        if len(finals) < int(ended.sum()):
            warnings.warn("VecFrameStack wrapping a VecEnv without terminal_observation info")  # SB3's warning
        stacked, stacked_finals = self._stack.step(obs, ended, finals)
        if ended.any():
            infos = with_final_observations(infos, self.num_envs, stacked_finals)
        return stacked, rewards, terminated, truncated, infos


def _checked_venv(venv: Any, wrapper: str) -> VecEnv:
    if not isinstance(venv, VecEnv):
        raise ValueError(
            f"venv: {wrapper} expected a kppo VecEnv (DummyVecEnv, SubprocVecEnv...), got {type(venv).__name__}"
        )
    return venv


class VecFrameStack(VecEnvWrapper):
    """SB3's `VecFrameStack(venv, n_stack, channels_order=None)`: the last `n_stack` observations of each env
    stacked along the channel axis (last for HxWxC, first for CxHxW images, see `VectorFrameStack`), zeros at
    every episode start; `infos[i]["terminal_observation"]` is stacked too. Box and Dict observation spaces (Dict:
    a stack per key, `channels_order` a str or a mapping key -> order)."""

    def __init__(self, venv: VecEnv, n_stack: int, channels_order: ChannelsOrder = None):
        venv = _checked_venv(venv, "VecFrameStack")
        super().__init__(venv, VectorFrameStack(venv.vector_env, n_stack, channels_order))
        self.n_stack = int(n_stack)


# ---------------------------------------------------------------------------------------------------------------
# Transposing images
# ---------------------------------------------------------------------------------------------------------------


def transpose_space(space: spaces.Box, key: str = "") -> spaces.Box:
    """An HxWxC image space as CxHxW (SB3's `VecTransposeImage.transpose_space`)."""
    where = f"observation_space[{key!r}]" if key else "observation_space"
    if not is_image_space(space):
        raise ArgumentError(f"{where}: expected an image (a 3-D uint8 Box in 0..255), got {space}")
    if is_image_space_channels_first(space):
        raise ArgumentError(f"{where}: expected channels last (HxWxC) to transpose, got shape {space.shape}")
    return spaces.Box(np.transpose(space.low, (2, 0, 1)), np.transpose(space.high, (2, 0, 1)), dtype=np.uint8)


def transpose_image(image: np.ndarray) -> np.ndarray:
    """An HxWxC image, or a batch NxHxWxC, as CxHxW (NxCxHxW), contiguous."""
    image = np.asarray(image)
    return np.ascontiguousarray(np.moveaxis(image, -1, -3))


class VectorTransposeImage(VectorWrapper):
    """A gymnasium vector wrapper turning HxWxC image observations into CxHxW (a Dict's image keys; final
    observations too): what `VecTransposeImage` exposes as its `vector_env`. `env` in SAME_STEP autoreset mode."""

    def __init__(self, env: VectorEnv):
        env = same_step(env)
        super().__init__(env)
        space = env.single_observation_space
        if isinstance(space, spaces.Dict):
            self.image_space_keys = [key for key, sub in space.spaces.items() if is_image_space(sub)]
            self.single_observation_space = spaces.Dict(
                OrderedDict(
                    (key, transpose_space(cast(spaces.Box, sub), key) if key in self.image_space_keys else sub)
                    for key, sub in space.spaces.items()
                )
            )
        else:
            self.image_space_keys = []
            self.single_observation_space = transpose_space(cast(spaces.Box, space))
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def transpose_observations(self, obs: Any) -> Any:
        """Observations (one env's or a batch) with their images as CxHxW."""
        if isinstance(obs, dict):
            return {
                key: transpose_image(value) if key in self.image_space_keys else value for key, value in obs.items()
            }
        return transpose_image(obs)

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets the vector env; the observations as CxHxW."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return self.transpose_observations(obs), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Steps the vector env; the observations and finished episodes' last observations as CxHxW."""
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        if ended.any() and "final_obs" in infos:
            finals = final_observations(infos, ended)
            rows = {i: self.transpose_observations(final) for i, final in finals.items()}
            infos = with_final_observations(infos, self.num_envs, rows)
        return self.transpose_observations(obs), rewards, terminated, truncated, infos


class VecTransposeImage(VecEnvWrapper):
    """SB3's `VecTransposeImage(venv, skip=False)`: image observations from HxWxC to CxHxW (a Dict's image keys;
    `terminal_observation` too), for programs written for PyTorch's channels-first convolutions; `skip=True`
    leaves them as they are. kppo's CNNs are channels last (NHWC) and take CxHxW images as well, so kppo needs no
    transposition: this wrapper is for SB3 code that asks for it."""

    def __init__(self, venv: VecEnv, skip: bool = False):
        venv = _checked_venv(venv, "VecTransposeImage")
        space = venv.observation_space
        if not (is_image_space(space) or isinstance(space, spaces.Dict)):
            raise ArgumentError(f"observation_space: expected an image or a Dict observation space, got {space}")
        self.skip = bool(skip)
        super().__init__(venv, None if self.skip else VectorTransposeImage(venv.vector_env))
        self.image_space_keys = [] if self.skip else cast(VectorTransposeImage, self.vector_env).image_space_keys

    transpose_space = staticmethod(transpose_space)
    transpose_image = staticmethod(transpose_image)

    def transpose_observations(self, observations: Any) -> Any:
        """SB3's method: `observations` with their images as CxHxW (unchanged when `skip`)."""
        if self.skip:
            return observations
        return cast(VectorTransposeImage, self.vector_env).transpose_observations(observations)


__all__ = [
    "FrameStack",
    "VecFrameStack",
    "VecTransposeImage",
    "VectorFrameStack",
    "VectorTransposeImage",
    "final_observations",
    "is_image_space",
    "is_image_space_channels_first",
    "with_final_observations",
]
