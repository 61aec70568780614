"""Acrobot-v1 as a TF-native task (gymnasium/envs/classic_control/acrobot.py, gymnasium 1.4)."""

from __future__ import annotations

import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.base import Task


class AcrobotState(NamedTuple):
    """Joint angles and angular velocities, each [num_envs] (gymnasium's `state`)."""

    theta1: tf.Tensor
    theta2: tf.Tensor
    dtheta1: tf.Tensor
    dtheta2: tf.Tensor


def _wrap(x: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """gymnasium's `wrap`: shifts `x` by whole periods `high - low` until `low <= x <= high`."""
    period = high - low
    above = x - tf.math.ceil((x - high) / period) * period
    below = x + tf.math.ceil((low - x) / period) * period
    return tf.where(x > high, above, tf.where(x < low, below, x))


class Acrobot(Task):
    """Swing the tip of a two-link pendulum above a line; reward -1 per step, 0 on the terminal step.

    "book" dynamics (Sutton & Barto), one RK4 step of `dt`, no torque noise. Actions are int32 [num_envs]
    in {0, 1, 2} (torque -1, 0, +1); the state is an `AcrobotState`.
    """

    gym_id = "Acrobot-v1"
    max_episode_steps = 500
    dt = 0.2
    LINK_LENGTH_1 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_POS_1 = 0.5
    LINK_COM_POS_2 = 0.5
    LINK_MOI = 1.0
    MAX_VEL_1 = 4 * math.pi
    MAX_VEL_2 = 9 * math.pi
    _high = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], dtype=np.float32)
    observation_space = gym.spaces.Box(low=-_high, high=_high, dtype=np.float32)
    action_space = gym.spaces.Discrete(3)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> AcrobotState:
        """Every state variable uniform in [-0.1, 0.1), rounded to float32 as gymnasium does."""
        values = counter_rng.uniform(key, [num_envs, 4], -0.1, 0.1)
        return AcrobotState(*tf.unstack(tf.cast(values, self.dtype), axis=1))

    def observe(self, state: AcrobotState) -> tf.Tensor:
        """[cos θ1, sin θ1, cos θ2, sin θ2, θ1', θ2'], [num_envs, 6]."""
        theta1, theta2, dtheta1, dtheta2 = state
        return tf.stack([tf.cos(theta1), tf.sin(theta1), tf.cos(theta2), tf.sin(theta2), dtheta1, dtheta2], axis=1)

    def _dsdt(self, s: tuple, torque: tf.Tensor) -> tuple:
        """Time derivative of the state (gymnasium's `_dsdt`, book dynamics); same operation order."""
        m1, m2 = self.LINK_MASS_1, self.LINK_MASS_2
        l1, lc1, lc2 = self.LINK_LENGTH_1, self.LINK_COM_POS_1, self.LINK_COM_POS_2
        I1 = I2 = self.LINK_MOI
        g = 9.8
        pi = math.pi
        theta1, theta2, dtheta1, dtheta2 = s
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * tf.cos(theta2)) + I1 + I2
        d2 = m2 * (lc2**2 + l1 * lc2 * tf.cos(theta2)) + I2
        phi2 = m2 * lc2 * g * tf.cos(theta1 + theta2 - pi / 2.0)
        phi1 = (
            -m2 * l1 * lc2 * tf.square(dtheta2) * tf.sin(theta2)
            - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * tf.sin(theta2)
            + (m1 * lc1 + m2 * l1) * g * tf.cos(theta1 - pi / 2)
            + phi2
        )
        ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * tf.square(dtheta1) * tf.sin(theta2) - phi2) / (
            m2 * lc2**2 + I2 - tf.square(d2) / d1
        )
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return dtheta1, dtheta2, ddtheta1, ddtheta2

    def transition(self, state: AcrobotState, action: tf.Tensor):
        """One RK4 step over [0, dt], then angles wrapped to [-π, π] and velocities clipped."""
        torque = tf.cast(action, self.dtype) - 1.0  # AVAIL_TORQUE = [-1, 0, +1]
        dt, dt2 = self.dt, self.dt / 2.0

        def shifted(y, k, h):
            return tuple(yi + h * ki for yi, ki in zip(y, k))

        k1 = self._dsdt(state, torque)
        k2 = self._dsdt(shifted(state, k1, dt2), torque)
        k3 = self._dsdt(shifted(state, k2, dt2), torque)
        k4 = self._dsdt(shifted(state, k3, dt), torque)
        ns = [y + dt / 6.0 * (a + 2 * b + 2 * c + d) for y, a, b, c, d in zip(state, k1, k2, k3, k4)]
        next_state = AcrobotState(
            theta1=_wrap(ns[0], -math.pi, math.pi),
            theta2=_wrap(ns[1], -math.pi, math.pi),
            dtheta1=tf.clip_by_value(ns[2], -self.MAX_VEL_1, self.MAX_VEL_1),
            dtheta2=tf.clip_by_value(ns[3], -self.MAX_VEL_2, self.MAX_VEL_2),
        )
        terminated = -tf.cos(next_state.theta1) - tf.cos(next_state.theta2 + next_state.theta1) > 1.0
        reward = tf.where(terminated, tf.zeros_like(torque), -tf.ones_like(torque))
        return next_state, reward, terminated

    def from_gym_state(self, gym_state: np.ndarray) -> AcrobotState:
        """[num_envs, 4] array in gymnasium's `env.unwrapped.state` layout -> `AcrobotState`."""
        return AcrobotState(*tf.unstack(tf.constant(gym_state, self.dtype), axis=1))

    def to_gym_state(self, state: AcrobotState) -> np.ndarray:
        """`AcrobotState` -> float64 [num_envs, 4] array in gymnasium's layout."""
        return np.stack([np.asarray(v, np.float64) for v in state], axis=1)
