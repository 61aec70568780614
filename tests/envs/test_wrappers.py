"""Episode bookkeeping: same-step auto-reset, FixedInit, OffsetStep and EpisodeStatistics."""

from __future__ import annotations

import numpy as np
import pytest

import kppo.envs
from kppo._tf import tf
from kppo.envs import EnvState

KEY = tf.constant([0, 0])


def _run(env, num_envs, num_steps, action_fn):
    """Steps `env` with the actions `action_fn(t)`; returns the reset (state, obs) and the StepResults."""
    state, obs = env.reset(KEY, num_envs)
    step = tf.function(env.step)
    results = []
    for t in range(num_steps):
        results.append(step(results[-1].state if results else state, action_fn(t), tf.constant([1, t])))
    return (state, obs), results


def test_same_step_auto_reset_returns_final_obs():
    env = kppo.envs.make("CartPole-v1", max_episode_steps=5, episode_statistics=False)
    task = env.unwrapped.task
    (_state, _), results = _run(env, 4, 5, lambda t: tf.zeros([4], tf.int32))
    last, before = results[-1], results[-2].state
    next_task_state, _, _ = task.transition(before.task, tf.zeros([4], tf.int32))
    assert last.truncated.numpy().all() and not last.terminated.numpy().any()
    np.testing.assert_allclose(last.final_obs, task.observe(next_task_state))  # the finished episode's end
    np.testing.assert_allclose(last.obs, task.observe(last.state.task))  # the new episode's start
    assert not np.isclose(last.obs.numpy(), last.final_obs.numpy()).all(axis=1).any()
    np.testing.assert_array_equal(last.state.time, [0, 0, 0, 0])
    for result in results[:-1]:  # before the time limit: obs == final_obs
        assert not (result.terminated | result.truncated).numpy().any()
        np.testing.assert_array_equal(result.obs, result.final_obs)


def test_truncated_only_when_not_terminated():
    """At the time limit, an env that reaches the goal is terminated, not truncated."""
    env = kppo.envs.make("MountainCar-v0", episode_statistics=False)
    task = env.unwrapped.task
    start = task.from_gym_state(np.array([[0.49, 0.05], [-0.5, 0.0], [0.49, 0.05]]))
    time = tf.constant([env.max_episode_steps - 1, env.max_episode_steps - 1, 0])
    result = env.step(EnvState(task=start, time=time, init=start), tf.constant([2, 1, 2]), KEY)
    np.testing.assert_array_equal(result.terminated, [True, False, True])
    np.testing.assert_array_equal(result.truncated, [False, True, False])


def test_fixed_init_restarts_from_own_initial_state():
    env = kppo.envs.make("Pendulum-v1", max_episode_steps=3, fixed_init=True, episode_statistics=False)
    (state, obs), results = _run(env, 4, 6, lambda t: tf.fill([4, 1], 1.5))
    init = state.init
    assert len(set(init.theta.numpy().tolist())) == 4  # each env has its own initial state
    for t in (2, 5):
        done = results[t]
        assert done.truncated.numpy().all()
        tf.nest.map_structure(np.testing.assert_array_equal, done.state.task, init)
        np.testing.assert_array_equal(done.obs, obs)
        tf.nest.map_structure(np.testing.assert_array_equal, done.state.init, init)
    plain = kppo.envs.make("Pendulum-v1", max_episode_steps=3, episode_statistics=False)  # resamples instead
    _, plain_results = _run(plain, 4, 3, lambda t: tf.fill([4, 1], 1.5))
    assert not np.isin(plain_results[-1].state.task.theta.numpy(), init.theta.numpy()).any()


def test_offset_step_staggers_truncations():
    max_steps, num_envs = 8, 4
    env = kppo.envs.make("Pendulum-v1", max_episode_steps=max_steps, offset_step=True, episode_statistics=False)
    (state, _), results = _run(env, num_envs, 2 * max_steps, lambda t: tf.zeros([num_envs, 1]))
    np.testing.assert_array_equal(state.time, [0, 2, 4, 6])  # i * max_steps // num_envs
    truncated = np.stack([r.truncated.numpy() for r in results])  # [steps, envs]
    for i in range(num_envs):
        first = max_steps - i * max_steps // num_envs  # steps until env i's first truncation
        np.testing.assert_array_equal(np.flatnonzero(truncated[:, i]) + 1, [first, first + max_steps])


def test_episode_statistics_cartpole_return_equals_length():
    """CartPole pays 1 per step, so each finished episode's return equals its length (counted here)."""
    env = kppo.envs.make("CartPole-v1", max_episode_steps=30)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (120, 8)).astype(np.int32)
    _, results = _run(env, 8, 120, lambda t: tf.constant(actions[t]))
    length, num_done = np.zeros(8, np.int64), 0
    for result in results:
        length += 1
        done = (result.terminated | result.truncated).numpy()
        stats = result.state
        np.testing.assert_array_equal(stats.returned_episode_length.numpy()[done], length[done])
        np.testing.assert_array_equal(stats.returned_episode_return.numpy()[done], length[done])
        np.testing.assert_array_equal(stats.episode_length.numpy()[done], 0)
        np.testing.assert_array_equal(stats.episode_length.numpy()[~done], length[~done])
        num_done += done.sum()
        length[done] = 0
    assert num_done > 8 and np.stack([r.terminated.numpy() for r in results]).any()


@pytest.mark.parametrize("num_steps", [200, 400])
def test_episode_statistics_pendulum_truncates_at_200(num_steps):
    env = kppo.envs.make("Pendulum-v1", dtype=tf.float64)
    _, results = _run(env, 3, num_steps, lambda t: tf.fill([3, 1], tf.constant(0.5, tf.float64)))
    rewards = np.stack([r.reward.numpy() for r in results])
    last = results[-1]
    assert last.truncated.numpy().all() and sum(r.truncated.numpy().sum() for r in results) == 3 * num_steps // 200
    np.testing.assert_array_equal(last.state.returned_episode_length, [200, 200, 200])
    np.testing.assert_allclose(last.state.returned_episode_return, rewards[-200:].sum(0), rtol=1e-5)
    assert last.state.returned_episode_return.dtype == tf.float32
