"""Test envs with invalid actions: a gymnasium env (masks from `action_masks()` or `info["action_mask"]`) and a
TF-native task (`Task.action_mask`).

Each step a target action is drawn and shown one-hot; `num_valid` actions are allowed (the target among them).
Reward: +1 for the target, 0 for another allowed action, -1 for a masked one (counted in `invalid_actions`).
"""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.envs import counter_rng
from kppo.envs.base import Task


class MaskedChoiceEnv(gym.Env):
    """Discrete(n) (or MultiDiscrete(nvec) when `nvec` is given: one target per dimension) with masks given by the
    `action_masks()` method (source="method") or in the info (source="info"), episodes of `length` steps."""

    def __init__(self, n: int = 6, num_valid: int = 2, length: int = 16, source: str = "method", nvec=None):
        self.nvec = [n] if nvec is None else list(nvec)
        self.num_valid, self.length, self.source = num_valid, length, source
        self.action_space = gym.spaces.Discrete(n) if nvec is None else gym.spaces.MultiDiscrete(self.nvec)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (sum(self.nvec),), np.float32)
        self.invalid_actions = 0
        self._mask = np.ones(sum(self.nvec), bool)

    def _draw(self):
        self._target, masks = [], []
        for n in self.nvec:
            target = int(self.np_random.integers(n))
            others = self.np_random.permutation([a for a in range(n) if a != target])[: self.num_valid - 1]
            mask = np.zeros(n, bool)
            mask[[target, *others]] = True
            self._target.append(target)
            masks.append(mask)
        self._mask = np.concatenate(masks)
        obs = np.zeros(sum(self.nvec), np.float32)
        obs[np.cumsum([0, *self.nvec[:-1]]) + np.asarray(self._target)] = 1.0
        return obs, ({"action_mask": self._mask.astype(np.int8)} if self.source == "info" else {})

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    def __getattribute__(self, name):  # with source="info" the env has no action_masks() at all
        if name == "action_masks" and object.__getattribute__(self, "source") != "method":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw()

    def step(self, action):
        actions = np.atleast_1d(action)
        offsets = np.cumsum([0, *self.nvec[:-1]])
        allowed = self._mask[offsets + actions].all()
        self.invalid_actions += int(not allowed)
        reward = -1.0 if not allowed else float(np.mean(actions == np.asarray(self._target)))
        self._t += 1
        obs, info = self._draw()
        return obs, reward, False, self._t >= self.length, info


class ChoiceState(NamedTuple):
    target: tf.Tensor  # int32 [B]
    t: tf.Tensor  # int32 [B]


class MaskedChoiceTask(Task):
    """The TF-native twin: Discrete(n); the target cycles deterministically; allowed: the target and target + 2."""

    observation_space = gym.spaces.Box(0.0, 1.0, (5,), np.float32)
    action_space = gym.spaces.Discrete(5)
    max_episode_steps = 16

    def initial_state(self, key, num_envs):
        target = counter_rng.uniform_int(key, [num_envs], 0, 5)
        return ChoiceState(target, tf.zeros([num_envs], tf.int32))

    def observe(self, state):
        return tf.one_hot(state.target, 5, dtype=self.dtype)

    def action_mask(self, state):
        return tf.logical_or(tf.one_hot(state.target, 5) > 0, tf.one_hot((state.target + 2) % 5, 5) > 0)

    def transition(self, state, action):
        allowed = tf.gather(self.action_mask(state), action, batch_dims=1)
        reward = tf.where(action == state.target, 1.0, tf.where(allowed, 0.0, -1.0))
        target = (state.target * 3 + state.t + 1) % 5
        return ChoiceState(target, state.t + 1), tf.cast(reward, self.dtype), tf.zeros_like(allowed)
