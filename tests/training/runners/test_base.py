"""What every runner shares (`kppo.training.runners.base`): schedules and settings."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.training.runners.base import (
    ScheduleVariables,
    learning_rate,
    make_learning_rate_fn,
    update_settings,
)


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
    assert float(make_learning_rate_fn(config, agent, lr_set_outside=True)(2)) == pytest.approx(7e-4)


def test_update_settings_read_scheduled_clip_ranges_from_variables():
    config = kppo.Config(clip_range=0.2, clip_range_vf=0.5)
    assert update_settings(config).clip_range == 0.2
    clip = tf.Variable(0.1)
    settings = update_settings(config, ScheduleVariables(clip, None))
    assert settings.clip_range is clip and settings.clip_range_vf == 0.5


@pytest.mark.parametrize(
    "changes, on_host, want",
    [
        ({}, False, False),  # TF-native: the update runs inside the compiled loop, graph measured faster
        ({"num_epochs": 4, "num_minibatches": 4}, True, False),  # few gradient steps: XLA's compile time does not pay
        ({"num_epochs": 10, "num_minibatches": 32}, True, True),  # SB3's defaults: 320 gradient steps of 64 samples
        ({"num_epochs": 10, "num_minibatches": 32, "jit_update": False}, True, False),  # an explicit choice wins
        ({"jit_update": True}, False, True),
        ({"num_epochs": 10, "num_minibatches": 32, "features_extractor": "cnn"}, True, False),  # XLA conv grads: slow
    ],
)
def test_the_update_is_xla_compiled_by_the_measured_rule_unless_the_config_says(changes, on_host, want):
    from kppo.training.runners.base import jit_update

    assert jit_update(kppo.Config(**changes), on_host) is want
