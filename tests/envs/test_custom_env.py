"""Writing your own environment: a ten-line `Task`, made trainable by `kppo.envs.wrap`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import kppo.envs
from kppo._tf import tf


class WalkToGoal(kppo.envs.Task):
    """A walker starts at 0 on a line and steps left (action 0) or right (action 1); reward 1 at +3, the goal."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)
    max_episode_steps = 10

    def initial_state(self, key, num_envs):
        return tf.zeros([num_envs], self.dtype)  # deterministic start; sample with tf.random.stateless_* and key

    def observe(self, state):
        return state[:, None]

    def transition(self, state, action):
        position = state + 2 * tf.cast(action, self.dtype) - 1
        at_goal = position >= 3
        return position, tf.cast(at_goal, self.dtype), at_goal


def test_custom_task_terminates_truncates_and_auto_resets():
    env = kppo.envs.wrap(WalkToGoal(), max_episode_steps=5)
    state, obs = env.reset(tf.constant([0, 0]), num_envs=2)
    assert obs.shape == (2, 1) and obs.dtype == tf.float32
    action = tf.constant([1, 0])  # env 0 walks to the goal, env 1 away from it
    step = tf.function(env.step, jit_compile=True)  # eager and tf.function work too
    for t in range(5):
        result = step(state, action, tf.constant([1, t]))
        state = result.state
        if t == 2:  # env 0 reaches +3 on its third step, is rewarded and restarts at 0 on the same step
            np.testing.assert_array_equal(result.terminated, [True, False])
            np.testing.assert_array_equal(result.reward, [1.0, 0.0])
            np.testing.assert_array_equal(result.final_obs[:, 0], [3.0, -3.0])
            np.testing.assert_array_equal(result.obs[:, 0], [0.0, -3.0])
    # env 1 hits the time limit of 5 steps (truncated, not terminated); env 0 is 2 steps into its next episode
    np.testing.assert_array_equal(result.truncated, [False, True])
    np.testing.assert_array_equal(result.final_obs[:, 0], [2.0, -5.0])
    np.testing.assert_array_equal(result.obs[:, 0], [2.0, 0.0])
    np.testing.assert_array_equal(state.returned_episode_length, [3, 5])  # from the default EpisodeStatistics
    np.testing.assert_array_equal(state.returned_episode_return, [1.0, 0.0])
