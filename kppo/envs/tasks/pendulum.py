"""Pendulum-v1 as a TF-native task (gymnasium/envs/classic_control/pendulum.py, gymnasium 1.4, g=10.0)."""

from __future__ import annotations

import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.base import Task


class PendulumState(NamedTuple):
    """Angle (unbounded, 0 = upright) and angular velocity, each [num_envs] (gymnasium's `state`)."""

    theta: tf.Tensor
    theta_dot: tf.Tensor


def angle_normalize(x: tf.Tensor) -> tf.Tensor:
    """Maps an angle to [-π, π) (gymnasium's `angle_normalize`)."""
    return tf.math.floormod(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(Task):
    """Swing up and hold an inverted pendulum; reward -(θ² + 0.1 θ'² + 0.001 u²), never terminates.

    Actions are [num_envs, 1] torques, clipped to [-2, 2]; the state is a `PendulumState`.
    """

    gym_id = "Pendulum-v1"
    max_episode_steps = 200
    max_speed = 8
    max_torque = 2.0
    dt = 0.05
    g = 10.0
    m = 1.0
    l = 1.0  # noqa: E741 (gymnasium's PendulumEnv attribute names: g, m, l, dt)
    _high = np.array([1.0, 1.0, max_speed], dtype=np.float32)
    observation_space = gym.spaces.Box(low=-_high, high=_high, dtype=np.float32)
    action_space = gym.spaces.Box(low=-max_torque, high=max_torque, shape=(1,), dtype=np.float32)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> PendulumState:
        """Angle uniform in [-π, π), angular velocity uniform in [-1, 1)."""
        unit = counter_rng.uniform(key, [num_envs, 2], -1.0, 1.0, self.dtype)
        return PendulumState(theta=math.pi * unit[:, 0], theta_dot=unit[:, 1])

    def observe(self, state: PendulumState) -> tf.Tensor:
        """[cos θ, sin θ, θ'], [num_envs, 3]."""
        return tf.stack([tf.cos(state.theta), tf.sin(state.theta), state.theta_dot], axis=1)

    def transition(self, state: PendulumState, action: tf.Tensor):
        """Semi-implicit Euler step with the torque clipped to [-2, 2] and the velocity to [-8, 8]."""
        th, thdot = state
        g, m, length, dt = self.g, self.m, self.l, self.dt
        u = tf.clip_by_value(tf.cast(action, self.dtype)[:, 0], -self.max_torque, self.max_torque)
        costs = tf.square(angle_normalize(th)) + 0.1 * tf.square(thdot) + 0.001 * tf.square(u)
        newthdot = thdot + (3 * g / (2 * length) * tf.sin(th) + 3.0 / (m * length**2) * u) * dt
        newthdot = tf.clip_by_value(newthdot, -self.max_speed, self.max_speed)
        newth = th + newthdot * dt
        return PendulumState(newth, newthdot), -costs, tf.zeros_like(th, dtype=tf.bool)

    def from_gym_state(self, gym_state: np.ndarray) -> PendulumState:
        """[num_envs, 2] array in gymnasium's `env.unwrapped.state` layout -> `PendulumState`."""
        return PendulumState(*tf.unstack(tf.constant(gym_state, self.dtype), axis=1))

    def to_gym_state(self, state: PendulumState) -> np.ndarray:
        """`PendulumState` -> float64 [num_envs, 2] array in gymnasium's layout."""
        return np.stack([np.asarray(v, np.float64) for v in state], axis=1)
