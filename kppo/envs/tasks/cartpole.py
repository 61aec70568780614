"""CartPole-v1 as a TF-native task (gymnasium/envs/classic_control/cartpole.py, gymnasium 1.4)."""

from __future__ import annotations

import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.base import Task


class CartPoleState(NamedTuple):
    """Cart position and velocity, pole angle and angular velocity; each [num_envs] (gymnasium's `state`)."""

    x: tf.Tensor
    x_dot: tf.Tensor
    theta: tf.Tensor
    theta_dot: tf.Tensor


class CartPole(Task):
    """Balance a pole on a cart (Barto, Sutton & Anderson), reward +1 per step including the terminal one.

    Actions are int32 [num_envs] in {0: push left, 1: push right}; the state is a `CartPoleState`.
    """

    gym_id: str | None = "CartPole-v1"
    max_episode_steps = 500
    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    _high = np.array([x_threshold * 2, np.inf, theta_threshold_radians * 2, np.inf], dtype=np.float32)
    observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> CartPoleState:
        """Every state variable uniform in [-0.05, 0.05)."""
        values = counter_rng.uniform(key, [num_envs, 4], -0.05, 0.05, self.dtype)
        return CartPoleState(*tf.unstack(values, axis=1))

    def observe(self, state: CartPoleState) -> tf.Tensor:
        """The state itself, [num_envs, 4]."""
        return tf.stack(list(state), axis=1)

    def transition(self, state: CartPoleState, action: tf.Tensor):
        """Explicit Euler step of the cart-pole equations of motion (gymnasium's default integrator)."""
        x, x_dot, theta, theta_dot = state
        force = tf.where(tf.equal(tf.cast(action, tf.int32), 1), self.force_mag, -self.force_mag)
        force = tf.cast(force, self.dtype)
        costheta, sintheta = tf.cos(theta), tf.sin(theta)
        temp = (force + self.polemass_length * tf.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * tf.square(costheta) / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        next_state = CartPoleState(
            x=x + self.tau * x_dot,
            x_dot=x_dot + self.tau * xacc,
            theta=theta + self.tau * theta_dot,
            theta_dot=theta_dot + self.tau * thetaacc,
        )
        terminated = (
            (next_state.x < -self.x_threshold)
            | (next_state.x > self.x_threshold)
            | (next_state.theta < -self.theta_threshold_radians)
            | (next_state.theta > self.theta_threshold_radians)
        )
        return next_state, tf.ones_like(x), terminated

    def from_gym_state(self, gym_state: np.ndarray) -> CartPoleState:
        """[num_envs, 4] array in gymnasium's `env.unwrapped.state` layout -> `CartPoleState`."""
        return CartPoleState(*tf.unstack(tf.constant(gym_state, self.dtype), axis=1))

    def to_gym_state(self, state: CartPoleState) -> np.ndarray:
        """`CartPoleState` -> float64 [num_envs, 4] array in gymnasium's layout."""
        return np.stack([np.asarray(v, np.float64) for v in state], axis=1)


class CartPoleNoVel(CartPole):
    """CartPole observed without its velocities, [x, theta] (RL-Zoo's CartPoleNoVel-v1, sb3-contrib's
    CartPoleNoVelEnv): the same dynamics and rewards; a memoryless policy cannot tell where the pole is going."""

    gym_id = None
    _high = np.array([CartPole.x_threshold * 2, CartPole.theta_threshold_radians * 2], dtype=np.float32)
    observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)

    def observe(self, state: CartPoleState) -> tf.Tensor:
        """[num_envs, 2]: the cart's position and the pole's angle."""
        return tf.stack([state.x, state.theta], axis=1)
