"""What every runner shares (`kppo.training.runners.base`): schedules, settings, diagnostics, the iteration."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.training.runners.base import (
    ScheduleVariables,
    diagnostics,
    iteration_step,
    learning_rate,
    make_learning_rate_fn,
    update_settings,
)
from kppo.core.types import LossInfo, Rollout, RunnerState, Trajectory
from kppo.update.ppo import UpdateStats


def test_linear_learning_rate_is_sb3s_progress_remaining_at_the_rollout_start():
    config = kppo.Config(
        learning_rate=1e-3, lr_schedule="linear", num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4, eval_freq=1
    )
    # 4 iterations: 1e-3 * (1 - i / 4)
    np.testing.assert_allclose([float(learning_rate(config, i)) for i in range(4)], [1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert float(learning_rate(config.replace(lr_schedule="constant"), 3)) == pytest.approx(1e-3)


def test_the_learning_rate_fn_assigns_the_schedule_or_reads_the_host_value():
    config = kppo.Config(
        learning_rate=1e-3, num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4, eval_freq=1, num_hidden_units=4
    )
    agent = make_agent(config, 3, gym.spaces.Discrete(2))
    assert float(make_learning_rate_fn(config, agent)(2)) == pytest.approx(5e-4)
    assert float(agent.optimizer.learning_rate.numpy()) == pytest.approx(5e-4)  # assigned for the update
    agent.optimizer.learning_rate.assign(7e-4)  # what a host schedule sets
    assert float(make_learning_rate_fn(config, agent, host_scheduled=True)(2)) == pytest.approx(7e-4)


def test_update_settings_read_scheduled_clip_ranges_from_variables():
    config = kppo.Config(clip_range=0.2, clip_range_vf=0.5)
    assert update_settings(config).clip_range == 0.2
    clip = tf.Variable(0.1)
    settings = update_settings(config, ScheduleVariables(clip, None))
    assert settings.clip_range is clip and settings.clip_range_vf == 0.5


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


@pytest.mark.parametrize(
    "changes, on_host, want",
    [
        ({}, False, False),  # TF-native: the update runs inside the compiled loop, graph measured faster
        ({"num_epochs": 4, "num_minibatches": 4}, True, False),  # few gradient steps: XLA's compile time does not pay
        ({"num_epochs": 10, "num_minibatches": 32}, True, True),  # SB3's defaults: 320 gradient steps of 64 samples
        ({"num_epochs": 10, "num_minibatches": 32, "jit_update": False}, True, False),  # an explicit choice wins
        ({"jit_update": True}, False, True),
    ],
)
def test_the_update_is_xla_compiled_by_the_measured_rule_unless_the_config_says(changes, on_host, want):
    from kppo.training.runners.base import jit_update

    assert jit_update(kppo.Config(**changes), on_host) is want
