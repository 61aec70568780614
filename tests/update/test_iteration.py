"""The PPO iteration (`kppo.update.ppo.iteration_step`) and its diagnostics."""

import pytest

from kppo._tf import tf
from kppo.core.types import LossInfo, Rollout, RunnerState, Trajectory
from kppo.update.ppo import UpdateStats, diagnostics, iteration_step, rollout_diagnostics, with_update


def _rollout():
    """2 steps x 2 envs; env 1 ends an episode (return 3, length 2) at step 1."""
    zeros = tf.zeros([2, 2])
    traj = Trajectory(
        obs=tf.zeros([2, 2, 1]),
        action=tf.zeros([2, 2], tf.int32),
        log_prob=zeros,
        value=tf.constant([[1.0, 2.0], [3.0, 4.0]]),
        reward=zeros,
        terminated=tf.constant([[False, False], [False, True]]),
        truncated=tf.zeros([2, 2], tf.bool),
        final_value=zeros,
        episode_return=tf.constant([[0.0, 0.0], [0.0, 3.0]]),
        episode_length=tf.constant([[0, 0], [0, 2]]),
        action_mask=tf.zeros([2, 2, 0], tf.bool),
        episode_start=tf.zeros([2, 2], tf.bool),
    )
    return Rollout(traj, zeros, tf.constant([[1.0, 2.0], [3.0, 4.0]]))


def test_diagnostics_average_the_update_over_minibatches_computed():
    stats = UpdateStats(
        LossInfo(*[tf.constant(float(i)) for i in range(6)]), tf.constant(2.0), tf.constant(4), tf.constant(3)
    )
    diag = diagnostics(_rollout(), stats, tf.constant(1e-3))
    assert float(diag.policy_loss) == 0.25 and float(diag.grad_norm) == 0.5  # sums / 4 minibatches
    assert float(diag.minibatch_steps) == 3 and float(diag.explained_variance) == pytest.approx(
        1.0
    )  # returns == values
    assert float(diag.episodes) == 1 and float(diag.episode_return_sum) == 3 and float(diag.episode_length_sum) == 2


def test_iteration_step_splits_keys_schedules_collects_updates_and_counts():
    seen = {}

    def collect(rollout_state, key):
        seen["collect_key"] = key.numpy().tolist()
        return rollout_state + 1, _rollout()

    def update(rollout, key):
        seen["update_key"] = key.numpy().tolist()
        return UpdateStats(LossInfo(*[tf.constant(0.0)] * 6), tf.constant(0.0), tf.constant(1), tf.constant(1))

    state = RunnerState(tf.constant(0), tf.constant([1, 2]), tf.constant(5))
    new_state, diag = iteration_step(lambda it: tf.cast(it, tf.float32) * 1e-4, collect, update, state)
    key, key_rollout, key_update = tf.random.experimental.stateless_split(tf.constant([1, 2]), 3).numpy().tolist()
    assert seen == {"collect_key": key_rollout, "update_key": key_update}
    assert new_state.key.numpy().tolist() == key and int(new_state.iteration) == 6 and int(new_state.rollout) == 1
    assert float(diag.learning_rate) == pytest.approx(5e-4)


def test_rollout_diagnostics_then_the_update_equal_the_diagnostics_of_both():
    stats = UpdateStats(
        LossInfo(*[tf.constant(float(i)) for i in range(6)]), tf.constant(2.0), tf.constant(4), tf.constant(3)
    )
    partial = rollout_diagnostics(_rollout())
    assert float(partial.policy_loss) == 0.0 and float(partial.minibatch_steps) == 0.0  # the update's fields zero
    both, split = diagnostics(_rollout(), stats, tf.constant(1e-3)), with_update(partial, stats, tf.constant(1e-3))
    assert [float(x) for x in both] == [float(x) for x in split]
