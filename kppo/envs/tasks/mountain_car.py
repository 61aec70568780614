"""MountainCar-v0 and MountainCarContinuous-v0 as TF-native tasks (gymnasium/envs/classic_control/
mountain_car.py and continuous_mountain_car.py, gymnasium 1.4)."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.envs.base import Task


class MountainCarState(NamedTuple):
    """Car position and velocity, each [num_envs] (gymnasium's `state`)."""

    position: tf.Tensor
    velocity: tf.Tensor


class _MountainCarBase(Task):
    """What both mountain-car tasks share: bounds, initial states, observations and state conversions."""

    min_position = -1.2
    max_position = 0.6
    max_speed = 0.07
    goal_velocity = 0.0
    goal_position: float  # each task's own
    _low = np.array([min_position, -max_speed], dtype=np.float32)
    _high = np.array([max_position, max_speed], dtype=np.float32)
    observation_space = gym.spaces.Box(_low, _high, dtype=np.float32)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> MountainCarState:
        """Position uniform in [-0.6, -0.4), velocity 0."""
        position = counter_rng.uniform(key, [num_envs], -0.6, -0.4, self.dtype)
        return MountainCarState(position, tf.zeros_like(position))

    def observe(self, state: MountainCarState) -> tf.Tensor:
        """[position, velocity], [num_envs, 2]."""
        return tf.stack(list(state), axis=1)

    def _move(self, state: MountainCarState, velocity: tf.Tensor) -> MountainCarState:
        """Clips the new velocity, moves, clips the position and stops the car at the left wall."""
        velocity = tf.clip_by_value(velocity, -self.max_speed, self.max_speed)
        position = tf.clip_by_value(state.position + velocity, self.min_position, self.max_position)
        at_wall = tf.logical_and(tf.equal(position, self.min_position), velocity < 0)
        return MountainCarState(position, tf.where(at_wall, tf.zeros_like(velocity), velocity))

    def _at_goal(self, state: MountainCarState) -> tf.Tensor:
        return tf.logical_and(state.position >= self.goal_position, state.velocity >= self.goal_velocity)

    def from_gym_state(self, gym_state: np.ndarray) -> MountainCarState:
        """[num_envs, 2] array in gymnasium's `env.unwrapped.state` layout -> `MountainCarState`."""
        return MountainCarState(*tf.unstack(tf.constant(gym_state, self.dtype), axis=1))

    def to_gym_state(self, state: MountainCarState) -> np.ndarray:
        """`MountainCarState` -> float64 [num_envs, 2] array in gymnasium's layout."""
        return np.stack([np.asarray(v, np.float64) for v in state], axis=1)


class MountainCar(_MountainCarBase):
    """Drive an under-powered car up the right hill; reward -1 per step.

    Actions are int32 [num_envs] in {0: accelerate left, 1: coast, 2: accelerate right}.
    """

    gym_id = "MountainCar-v0"
    max_episode_steps = 200
    goal_position = 0.5
    force = 0.001
    gravity = 0.0025
    action_space = gym.spaces.Discrete(3)

    def transition(self, state: MountainCarState, action: tf.Tensor):
        """velocity += (action - 1) * force - gravity * cos(3 position), then `_move`."""
        push = tf.cast(tf.cast(action, tf.int32) - 1, self.dtype) * self.force
        next_state = self._move(state, state.velocity + (push + tf.cos(3 * state.position) * (-self.gravity)))
        return next_state, -tf.ones_like(push), self._at_goal(next_state)


class MountainCarContinuous(_MountainCarBase):
    """Continuous-force mountain car; reward 100 on reaching the goal minus 0.1 * action² per step.

    Actions are [num_envs, 1] forces (clipped to [-1, 1] for the physics, not for the reward). gymnasium keeps
    `state` as a float32 array after every step, so here too the state is float32-valued (initial states
    included) and `3 * position` is formed in float32; in float64 this reproduces gymnasium fed float64
    actions in [-1, 1] to 1e-9 (gymnasium computes in float32 where it clips), and changes nothing for
    `dtype=tf.float32`.
    """

    gym_id = "MountainCarContinuous-v0"
    max_episode_steps = 999
    goal_position = 0.45
    power = 0.0015
    action_space = gym.spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)

    def _float32(self, x: tf.Tensor) -> tf.Tensor:
        return tf.cast(tf.cast(x, tf.float32), self.dtype)

    def initial_state(self, key: tf.Tensor, num_envs: int) -> MountainCarState:
        """Position uniform in [-0.6, -0.4) (rounded to float32), velocity 0."""
        state = super().initial_state(key, num_envs)
        return MountainCarState(self._float32(state.position), state.velocity)

    def to_gym_state(self, state: MountainCarState) -> np.ndarray:
        """`MountainCarState` -> float32 [num_envs, 2] array: gymnasium's layout after any step."""
        return super().to_gym_state(state).astype(np.float32)

    def transition(self, state: MountainCarState, action: tf.Tensor):
        """velocity += power * clip(action) - 0.0025 * cos(3 position), then `_move`."""
        action = tf.cast(action, self.dtype)[:, 0]
        force = tf.clip_by_value(action, -1.0, 1.0)
        three_x = self._float32(3 * state.position)
        moved = self._move(state, state.velocity + (force * self.power - 0.0025 * tf.cos(three_x)))
        terminated = self._at_goal(moved)
        reward = 100.0 * tf.cast(terminated, self.dtype) - tf.square(action) * 0.1
        return MountainCarState(self._float32(moved.position), self._float32(moved.velocity)), reward, terminated
