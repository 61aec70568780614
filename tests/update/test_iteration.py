"""The PPO iteration (`kppo.update.ppo.iteration_step`), the loop over iterations (`drive`) and their diagnostics."""

import pytest

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.core.types import LossInfo, Rollout, RunnerState, Trajectory
from kppo.rollout.gymnasium import RolloutStopped
from kppo.update.ppo import UpdateStats
from kppo.update.diagnostics import diagnostics, rollout_diagnostics, with_update
from kppo.update.driver import drive
from kppo.update.iteration import iteration_step
from kppo.update.schedules import Schedules


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

    def update(rollout, key, schedules):
        seen["update_key"] = key.numpy().tolist()
        seen["clip_range"] = float(schedules.clip_range)
        return UpdateStats(LossInfo(*[tf.constant(0.0)] * 6), tf.constant(0.0), tf.constant(1), tf.constant(1))

    state = RunnerState(tf.constant(0), tf.constant([1, 2]), tf.constant(5))

    def schedule_fn(iteration):  # computed once per iteration, from the iteration before its rollout
        step = tf.cast(iteration, tf.float32)
        return Schedules(learning_rate=step * 1e-4, clip_range=step * 0.01, ent_coef=step * 0.001)

    new_state, diag = iteration_step(schedule_fn, collect, update, state)
    key, key_rollout, key_update = counter_rng.split(tf.constant([1, 2]), 3).numpy().tolist()
    assert seen == {"collect_key": key_rollout, "update_key": key_update, "clip_range": pytest.approx(0.05)}
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


def _counting_iteration(stop_at=None):
    def iteration(state):
        if stop_at is not None and int(state.iteration) == stop_at:
            raise RolloutStopped(state.rollout + 100)  # the rollout state at the stopping step
        diag = diagnostics(_rollout(), UpdateStats(LossInfo(*[tf.constant(1.0)] * 6), 1.0, 1, 1), 1e-3)
        return state._replace(iteration=state.iteration + 1, rollout=state.rollout + 1), diag

    return iteration


def test_drive_sums_the_diagnostics_of_n_iterations_in_python_and_in_graph():
    state = RunnerState(tf.constant(0), tf.constant([1, 2]), tf.constant(0))
    eager = drive(_counting_iteration(), state, 3)
    graph = tf.function(lambda s: drive(_counting_iteration(), s, tf.constant(3), rollout_diagnostics(_rollout())))
    in_graph = graph(state)
    assert eager.completed == 3 and not eager.stopped and int(eager.state.iteration) == 3
    assert float(eager.diagnostics.policy_loss) == 3.0 and float(eager.diagnostics.episodes) == 3.0
    assert int(in_graph.state.iteration) == 3
    assert float(in_graph.diagnostics.policy_loss) == 3.0  # its zeros (here: a rollout's partial diagnostics) + 3
    assert float(in_graph.diagnostics.episodes) == 4.0


def test_a_stopped_rollout_ends_the_python_drive_at_its_step_before_the_update():
    state = RunnerState(tf.constant(0), tf.constant([1, 2]), tf.constant(0))
    result = drive(_counting_iteration(stop_at=2), state, 5)
    assert result.stopped and result.completed == 2 and float(result.diagnostics.policy_loss) == 2.0
    assert int(result.state.iteration) == 2 and int(result.state.rollout) == 102  # the rollout state at the stop
