"""Stable-Baselines3's `VecFrameStack` (stable_baselines3.common.vec_env.vec_frame_stack, .stacked_observations) on
kppo's SB3-style `VecEnv` (`kppo.vec_envs.vec_env`); its twin `VecTransposeImage` is `kppo.vec_envs.vec_transpose`.

kppo trains on the gymnasium vector env under a VecEnv (`VecEnv.vector_env`), not on its SB3 API, so the wrapper
does its work once, as a gymnasium vector wrapper over a SAME_STEP vector env (`VectorFrameStack`), and the VecEnv
wrapper only exposes it as its `vector_env`: `kppo.PPO` trains on the stacked observations the SB3 API returns, and
`model.predict` takes them. A finished episode's last observation is stacked too, both in gymnasium's
`infos["final_obs"]` (what kppo bootstraps truncated episodes from) and in SB3's `infos[i]["terminal_observation"]`.
`FrameStack` stacks one env's observations the same way, for envs a factory makes (`Config.frame_stack`).
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
from kppo.vec_envs.vec_env import VecEnv, VecEnvWrapper, checked_venv
from kppo.gym_envs.spaces import is_image_space, is_image_space_channels_first
from kppo.gym_envs.vector_info import final_observations, same_step, with_final_observations

ChannelsOrder = str | Mapping[str, str | None] | None
_ORDERS = ("first", "last")


def shift_in(frames: np.ndarray, obs: np.ndarray, axis: int) -> np.ndarray:
    """A new array: `frames` [B, ...] with its oldest `obs.shape[axis]` channels along `axis` dropped and `obs`
    appended as the newest, i.e. `np.concatenate((frames[<c:>], obs), axis)`.

    A channels-last stack whose channels of one pixel fill 2, 4 or 8 bytes (Atari's 4 grey frames: 4) is shifted as one
    unsigned integer a pixel, on a little-endian machine: an order of magnitude faster than the strided copy for Atari
    stacks (`docs/benchmarks/images.md`, "Measurements behind the defaults")."""
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


class VecFrameStack(VecEnvWrapper):
    """SB3's `VecFrameStack(venv, n_stack, channels_order=None)`: the last `n_stack` observations of each env
    stacked along the channel axis (last for HxWxC, first for CxHxW images, see `VectorFrameStack`), zeros at
    every episode start; `infos[i]["terminal_observation"]` is stacked too. Box and Dict observation spaces (Dict:
    a stack per key, `channels_order` a str or a mapping key -> order)."""

    def __init__(self, venv: VecEnv, n_stack: int, channels_order: ChannelsOrder = None):
        venv = checked_venv(venv, "VecFrameStack")
        super().__init__(venv, VectorFrameStack(venv.vector_env, n_stack, channels_order))
        self.n_stack = int(n_stack)


__all__ = ["FrameStack", "VecFrameStack", "VectorFrameStack", "shift_in"]
