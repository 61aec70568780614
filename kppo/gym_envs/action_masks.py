"""Invalid-action masks of gymnasium envs, read as sb3-contrib's MaskablePPO reads them, and `ActionMasker`.

A mask is bool [num_envs, n] (True = allowed) for the observations the policy is about to act on; for MultiDiscrete
the dimensions' masks are concatenated (n = sum(nvec)). Where it comes from, first found:

1. the vector env's own `action_masks()` (a user's vector wrapper);
2. the sub-envs' `action_masks()` (sb3-contrib's contract; `ActionMasker` adds one), through `VectorEnv.call`;
3. `info["action_mask"]` (gymnasium's Taxi, CliffWalking-style envs): gymnasium's vector info after `reset` and
   after every step (in SAME_STEP mode a finished sub-env's info is that of its reset, so it matches `obs`).
"""

from __future__ import annotations

from typing import Any, cast
from collections.abc import Callable

import gymnasium as gym
import numpy as np

METHOD = "action_masks"
INFO_KEY = "action_mask"


class ActionMasker(gym.Wrapper):
    """sb3-contrib's `ActionMasker(env, action_mask_fn)`: adds `action_masks()` to an env, from a function of the env
    or the name of one of its methods."""

    def __init__(self, env: gym.Env, action_mask_fn: str | Callable[[gym.Env], np.ndarray]):
        super().__init__(env)
        if isinstance(action_mask_fn, str):
            method = env.get_wrapper_attr(action_mask_fn)
            if not callable(method):
                raise ValueError(
                    f"action_mask_fn: expected the name of a method of the env, got {action_mask_fn!r}, a "
                    f"{type(method).__name__}"
                )

            def from_method(_env: gym.Env) -> np.ndarray:
                return method()

            action_mask_fn = from_method
        if not callable(action_mask_fn):
            raise ValueError(
                f"action_mask_fn: expected a function of the env or a method name, got {type(action_mask_fn).__name__}"
            )
        self._action_mask_fn = action_mask_fn

    def action_masks(self) -> np.ndarray:
        """The wrapped env's current action mask, `action_mask_fn(env)` (True = allowed)."""
        return np.asarray(self._action_mask_fn(self.env))


def _sub_envs_have_method(vec_env: gym.vector.VectorEnv) -> bool:
    envs = getattr(vec_env, "envs", None)
    if envs is not None:  # SyncVectorEnv: ask the first sub-env without calling anything
        return envs[0].has_wrapper_attr(METHOD)
    call = getattr(vec_env, "call", None)
    if call is None:
        return False
    try:  # gymnasium's `has_wrapper_attr`: an AsyncVectorEnv whose worker is asked for a missing method closes
        return all(call("has_wrapper_attr", METHOD))
    except AttributeError:  # sub-envs without gymnasium's Env methods
        return False


def mask_source(vec_env: gym.vector.VectorEnv, reset_infos: dict) -> str | None:
    """ "vector", "sub_envs" or "info" (see the module docstring), or None when the env gives no masks."""
    if callable(getattr(vec_env, METHOD, None)):
        return "vector"
    if _sub_envs_have_method(vec_env):
        return "sub_envs"
    if INFO_KEY in reset_infos:
        return "info"
    return None


class MaskReader:
    """Reads and checks the masks of one vector env after each `reset` and `step` (one-line ValueErrors naming the
    env and the step since the reset); the source is found at the first reset. Not `enabled` (sb3-contrib's
    `use_masking=False`), it reads nothing and allows every action, so an env without masks runs too."""

    def __init__(self, vec_env: gym.vector.VectorEnv, action_space: gym.spaces.Space, enabled: bool = True):
        self.vec_env, self.enabled = vec_env, enabled
        self.source: str | None = None
        self.sizes = mask_sizes(action_space)
        self.width, self.num_envs = int(sum(self.sizes)), int(vec_env.num_envs)
        self.steps = 0

    def reset(self, infos: dict) -> np.ndarray:
        """The masks of the first observations (`infos`: what the vector env's reset returned)."""
        if self.enabled and self.source is None:
            self.source = mask_source(self.vec_env, infos)
            if self.source is None:
                raise ValueError(
                    f"action_masks: expected the env to give masks (an action_masks() method, e.g. "
                    f"kppo.ActionMasker(env, fn), or info['{INFO_KEY}']), got none from "
                    f"{type(self.vec_env.unwrapped).__name__}"
                )
        self.steps = 0
        return self._read(infos)

    def step(self, infos: dict) -> np.ndarray:
        """The masks of the observations a step returned (`infos`: that step's vector info)."""
        self.steps += 1
        return self._read(infos)

    def _read(self, infos: dict) -> np.ndarray:
        if not self.enabled:
            return np.ones((self.num_envs, self.width), bool)
        if self.source == "vector":
            raw = getattr(self.vec_env, METHOD)()
        elif self.source == "sub_envs":
            raw = cast(Any, self.vec_env).call(METHOD)  # found by `_sub_envs_have_method`
        else:
            raw, present = infos.get(INFO_KEY), infos.get("_" + INFO_KEY)
            if raw is None or (present is not None and not np.all(present)):
                missing = 0 if raw is None else int(np.flatnonzero(~np.asarray(present))[0])
                raise ValueError(
                    f"action_mask: expected info['{INFO_KEY}'] from every env, env {missing} gave none "
                    f"at step {self.steps}"
                )
        return self.check(raw, self.steps)

    def check(self, raw: Any, step: int) -> np.ndarray:
        """`raw` (an array or a sequence of per-env masks) as bool [num_envs, width]; every dimension allows one
        action at least."""
        try:
            mask = np.asarray([np.asarray(m).reshape(-1) for m in raw] if isinstance(raw, (list, tuple)) else raw)
            mask = mask.reshape(self.num_envs, -1)
        except (TypeError, ValueError):
            mask = None
        if mask is None or mask.shape[1] != self.width:
            shape = getattr(np.asarray(raw, dtype=object), "shape", None)
            raise ValueError(
                f"action_mask: expected {self.width} entries per env ({self.num_envs} envs), got shape "
                f"{shape} at step {step}"
            )
        if mask.dtype != bool:
            bad = mask[(mask != 0) & (mask != 1)]
            if bad.size:
                raise ValueError(f"action_mask: expected booleans or 0/1, got {bad.flat[0]!r} at step {step}")
            mask = mask.astype(bool)
        allowed = (
            np.add.reduceat(mask, np.cumsum([0, *self.sizes[:-1]]), axis=1)
            if len(self.sizes) > 1
            else mask.sum(axis=1, keepdims=True)
        )
        if not np.all(allowed > 0):
            env = int(np.flatnonzero((allowed == 0).any(axis=1))[0])
            raise ValueError(
                f"action_mask: env {env} allows no action at step {step} (expected at least one True "
                f"per action dimension)"
            )
        return mask


def env_mask(env: gym.Env, info: dict) -> np.ndarray:
    """One env's mask for the observation that came with `info`: its `action_masks()`, else `info["action_mask"]`
    (bool, flat); a one-line ValueError when it has neither."""
    if env.has_wrapper_attr(METHOD):
        return np.asarray(env.get_wrapper_attr(METHOD)(), bool).reshape(-1)
    if isinstance(info, dict) and INFO_KEY in info:
        return np.asarray(info[INFO_KEY], bool).reshape(-1)
    raise ValueError(
        f"action_masks: expected the env to give masks (an action_masks() method or info['{INFO_KEY}']),"
        f" got none from {type(env.unwrapped).__name__}"
    )


def mask_sizes(action_space: gym.spaces.Space) -> list[int]:
    """The widths of a mask's parts: [n] for Discrete(n), nvec for MultiDiscrete, [2] per bit for MultiBinary
    (sb3-contrib's layout: each bit's [0 allowed, 1 allowed]); a one-line ValueError otherwise."""
    if isinstance(action_space, gym.spaces.Discrete):
        return [int(action_space.n)]
    if isinstance(action_space, gym.spaces.MultiBinary) and len(action_space.shape) == 1:
        return [2] * int(action_space.shape[0])
    if isinstance(action_space, gym.spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        return [int(n) for n in action_space.nvec]
    raise ValueError(
        f"action_masks: expected a Discrete, 1-D MultiDiscrete or 1-D MultiBinary action space, got {action_space}"
    )
