"""What every runner shares (`kppo.training.runners.base`): schedules and settings."""

import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.training.runners import make_runner
from kppo.training.runners.settings import schedule_spec, update_settings
from kppo.training.runners import make_population_runner
from kppo.update.schedules import Schedules, schedules_at, with_schedules


def _learning_rate(config, iteration):
    return float(schedules_at(schedule_spec(config), iteration).learning_rate)


def test_linear_learning_rate_is_sb3s_progress_remaining_at_the_rollout_start():
    config = kppo.Config(
        learning_rate=1e-3, lr_schedule="linear", num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4, eval_freq=1
    )
    # 4 iterations: 1e-3 * (1 - i / 4)
    np.testing.assert_allclose([_learning_rate(config, i) for i in range(4)], [1e-3, 7.5e-4, 5e-4, 2.5e-4])
    assert _learning_rate(config.replace(lr_schedule="constant"), 3) == pytest.approx(1e-3)


def test_a_linear_clip_range_is_annealed_as_the_learning_rate_is():
    config = kppo.Config(
        clip_range=0.2, clip_schedule="linear", num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4, eval_freq=1
    )
    # 4 iterations: 0.2 * (1 - i / 4), RL-Zoo's lin_0.2 at progress_remaining 1, 0.75, 0.5, 0.25
    clips = [float(schedules_at(schedule_spec(config), i).clip_range) for i in range(4)]
    np.testing.assert_allclose(clips, [0.2, 0.15, 0.1, 0.05], rtol=1e-6)
    assert float(schedules_at(schedule_spec(config.replace(clip_schedule="constant")), 3).clip_range) == pytest.approx(
        0.2
    )
    members = Schedules(tf.constant([1e-3, 2e-3]), tf.constant([0.2, 0.1]), tf.constant([0.0, 0.02]))  # own values
    np.testing.assert_allclose(
        schedules_at(schedule_spec(config), 2, members).clip_range.numpy(), [0.1, 0.05], rtol=1e-6
    )
    np.testing.assert_allclose(
        schedules_at(schedule_spec(config), 2, members).ent_coef.numpy(), [0.0, 0.02]
    )  # ent: constant
    assert _learning_rate(config, 3) == pytest.approx(2.5e-4 * 0.25)  # the default lr_schedule is linear


def test_a_linear_ent_coef_is_annealed_as_the_learning_rate_is():
    config = kppo.Config(ent_coef=0.01, ent_schedule="linear", num_envs=4, num_steps=8, total_timesteps=4 * 8 * 4)
    ents = [float(schedules_at(schedule_spec(config), i).ent_coef) for i in range(4)]
    np.testing.assert_allclose(ents, [0.01, 0.0075, 0.005, 0.0025], rtol=1e-6)
    assert float(schedules_at(schedule_spec(config.replace(ent_schedule="constant")), 3).ent_coef) == pytest.approx(
        0.01
    )
    members = Schedules(tf.constant([1e-3, 1e-3]), tf.constant([0.2, 0.2]), tf.constant([0.0, 0.02]))
    np.testing.assert_allclose(schedules_at(schedule_spec(config), 2, members).ent_coef.numpy(), [0.0, 0.01], rtol=1e-6)


def test_the_update_reads_each_iterations_schedules_in_place_of_the_configs_numbers():
    config = kppo.Config(clip_range=0.2, clip_range_vf=0.5, clip_schedule="linear", total_timesteps=16 * 128 * 4)
    settings = with_schedules(
        update_settings(config.replace(ent_schedule="linear")), schedules_at(schedule_spec(config), 2)
    )
    assert float(settings.clip_range) == pytest.approx(0.1) and float(settings.clip_range_vf) == 0.5
    assert float(settings.ent_coef) == pytest.approx(0.01)  # ent_schedule "constant" in `config`
    assert update_settings(config).clip_range == 0.2  # the settings keep the Config's number
    assert schedules_at(schedule_spec(config.replace(clip_range_vf=None)), 0).clip_range_vf is None  # no value clipping


SCHEDULED = dict(
    clip_range=0.2,
    clip_schedule="linear",
    ent_coef=0.01,
    ent_schedule="linear",
    num_envs=4,
    num_steps=8,
    total_timesteps=4 * 8 * 4,
    num_epochs=1,
    num_minibatches=2,
    num_hidden_units=8,
    eval_freq=1,
    num_eval_envs=2,
    jit_rollout=False,  # faster to build here (a population's program is built by XLA otherwise)
)


@pytest.mark.parametrize("kind", ["native", "host", "population", "host_population"])
def test_the_update_at_iteration_k_uses_the_scheduled_clip_range_and_ent_coef_on_every_runner(kind, schedule_spy):
    config = kppo.Config(**SCHEDULED, env_backend="gymnasium" if kind.startswith("host") else "auto")
    if kind.endswith("population"):  # members with their own clip ranges, both scheduled
        runner, _ = make_population_runner("CartPole-v1", config.sweep(clip_range=[0.2, 0.1]).members([0]))
        want = np.array([[0.2, 0.1], [0.15, 0.075], [0.1, 0.05], [0.05, 0.025]])
    else:
        runner = make_runner("CartPole-v1", config)
        want = np.array([0.2, 0.15, 0.1, 0.05])  # 0.2 * (1 - k / 4) at iteration k
    state, used, reported, entropy_coefs = runner.state, [], [], []
    for _ in range(4):  # one iteration a call: a call's diagnostics are that iteration's
        result = runner.run_iterations(state, 1)
        state = result.state
        used.append(np.asarray(result.diagnostics.clip_fraction))
        entropy_coefs.append(np.asarray(result.diagnostics.approx_kl))
        reported.append(runner.clip_range(state))  # what `train/clip_range` reports after the call
    runner.close()
    np.testing.assert_allclose(used, want, rtol=1e-6)
    np.testing.assert_allclose(reported, want, rtol=1e-6)
    ent_want = 0.01 * (1 - np.arange(4) / 4)  # RL-Zoo's lin_0.01 at iteration k
    per_member = ent_want.reshape(-1, *[1] * (want.ndim - 1))  # a population's members share it here
    np.testing.assert_allclose(entropy_coefs, np.broadcast_to(per_member, want.shape), rtol=1e-6)


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
    from kppo.training.runners.settings import jit_update

    assert jit_update(kppo.Config(**changes), on_host) is want


@pytest.mark.parametrize(
    "changes, sequence_length, rows_per_env",
    [
        ({}, 16, 16),  # feed-forward: every step a row
        ({"recurrent": "lstm"}, 16, 1),  # whole env sequences (purejaxrl's ppo_rnn): one sequence an env
        ({"recurrent": "lstm", "lstm_sequence_length": 4}, 4, 4),  # chunks of 4 steps
        ({"recurrent": "lstm", "lstm_batching": "rotated"}, 16, 16),  # sb3-contrib's windows of rows
    ],
)
def test_a_config_resolves_once_with_every_default_applied(changes, sequence_length, rows_per_env):
    """`resolve`: the read-only form every runner reads, its None and 0 defaults decided."""
    import dataclasses

    from kppo.training.runners.settings import resolve

    config = kppo.Config(num_envs=2, num_steps=16, num_minibatches=2, **changes)
    spec = resolve(config)
    assert (spec.sequence_length, spec.update_rows_per_env) == (sequence_length, rows_per_env)
    assert spec.jit_eval is False and spec.jit_population_eval is True  # jit_eval None: one run's not, a population's
    assert resolve(config.replace(jit_eval=True)).jit_eval is True
    assert resolve(config.replace(jit_eval=False)).jit_population_eval is False
    assert spec.rollout.num_steps == 16 and spec.update.num_minibatches == 2 and spec.seed == config.seed
    assert spec.schedule.bases["learning_rate"] == config.learning_rate
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1  # type: ignore[misc]
