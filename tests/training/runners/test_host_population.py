"""Populations on gymnasium envs (`kppo.training.runners.host_population`): one vector env of every member's envs,
one batched numpy call acting for all members, one compiled update; each member computes what its single host run
with the same seed and values computes."""

import numpy as np
import pytest

import kppo
from kppo.cli.main import main
from kppo.training.runners import make_population_runner, make_runner
from kppo.training.runners.population import member_agent
from tests.helpers.image_envs import BrightHalfEnv
from tests.helpers.masked_envs import MaskedChoiceEnv

SMALL = dict(
    env_backend="gymnasium",
    num_envs=4,
    num_steps=32,
    num_epochs=2,
    num_minibatches=4,
    num_hidden_units=16,
    num_eval_envs=3,
    jit_rollout=False,  # graph kernels on both sides: the same ops (XLA fuses the vectorized program differently)
    jit_update=False,
    jit_eval=False,
)
SWEPT = dict(
    learning_rate=1e-3, ent_coef=0.01, clip_range=0.1, gamma=0.95, gae_lambda=0.9, vf_coef=0.7, max_grad_norm=0.3
)


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _compare_with_single_runs(env, configs, iterations, exact_obs):
    runner, population = make_population_runner(env, configs)
    result = runner.run_iterations(runner.state, iterations)
    evaluation, _ = runner.evaluation_round(result.state.rollout.obs_stats, 0, 0, None)
    for index, config in enumerate(configs):
        single = make_runner(env, config)
        alone = single.run_iterations(single.state, iterations)
        for name, value in alone.diagnostics._asdict().items():
            _close(getattr(result.diagnostics, name)[index], value)
        for mine, theirs in zip(member_agent(population, index).variables, single.agent.variables):
            _close(mine, theirs)
        state = runner.member_state(result.state, index)
        compare = np.testing.assert_array_equal if exact_obs else _close
        compare(state.rollout.obs, alone.state.rollout.obs)
        _close(state.rollout.obs_stats.mean, alone.state.rollout.obs_stats.mean)
        _close(state.rollout.return_stats.var, alone.state.rollout.return_stats.var)
        own, _ = single.evaluation_round(alone.state.rollout.obs_stats, 0, 0, None)
        _close(evaluation.returns[index], own.returns)
        single.close()
    runner.close()
    return result


@pytest.mark.parametrize(
    "env, changes, exact_obs",
    [
        # discrete actions: the same draws, so the envs see the same actions and observations bit for bit
        ("CartPole-v1", dict(learning_rate=3e-3, lr_schedule="linear"), True),
        # continuous actions: the functional Adam rounds differently from Keras' (float32), so after the first update
        # actions, and the observations after them, agree to float32 rounding
        (
            "Pendulum-v1",
            dict(
                normalize_obs=True,
                normalize_reward=True,
                use_sde=True,
                sde_sample_freq=4,
                target_kl=1e-4,
                adam_style="torch",
                clip_range_vf=0.2,
            ),
            False,
        ),
    ],
)
def test_every_member_computes_what_its_single_gymnasium_run_computes(env, changes, exact_obs):
    base = kppo.Config(**SMALL, **changes)
    result = _compare_with_single_runs(env, [base.replace(seed=3), base.replace(seed=5, **SWEPT)], 3, exact_obs)
    if "target_kl" in changes:  # a target-KL stop in one member at least
        assert np.any(result.diagnostics.minibatch_steps.numpy() < 3 * 2 * 4)


@pytest.mark.parametrize(
    "env, changes",
    [
        pytest.param("CartPole-v1", dict(recurrent="lstm", lstm_hidden_size=8), marks=pytest.mark.slow),  # ~56 s
        pytest.param(
            "CartPole-v1", dict(recurrent="lstm", lstm_hidden_size=8, n_lstm_layers=2), marks=pytest.mark.slow
        ),
        (BrightHalfEnv, dict(features_extractor="small_cnn")),
        (MaskedChoiceEnv, dict(action_masks=True)),
    ],
    ids=["lstm", "lstm-two-layers", "cnn", "masked"],
)
def test_recurrent_convolutional_and_masked_members_equal_their_single_runs(env, changes):
    base = kppo.Config(**{**SMALL, "num_minibatches": 2}, **changes)
    _compare_with_single_runs(env, [base.replace(seed=3), base.replace(seed=5, learning_rate=1e-3)], 1, True)


def test_train_with_seeds_on_a_gymnasium_env_returns_one_result_per_member():
    config = kppo.Config(**SMALL, total_timesteps=4 * 32 * 4, eval_freq=2).sweep(gamma=[0.9, 0.99])
    result = kppo.train("CartPole-v1", config, seed=[0, 1])
    assert [(c.gamma, c.seed) for c in result.configs] == [(0.9, 0), (0.9, 1), (0.99, 0), (0.99, 1)]
    assert result.metrics["eval/mean_returns"].shape == (2, 4)
    member = result.members[3]
    assert int(member.runner_state.iteration) == 4 and member.runner_state.rollout.obs.shape == (4, 4)
    action, _ = member.policy.predict(np.zeros(4, np.float32), deterministic=True)
    assert action in (0, 1)


@pytest.mark.slow  # suite budget: tests/cli/test_population.py checks the CLI's member runs (a TF-native population)
def test_a_gymnasium_population_trained_from_the_cli_writes_member_runs(tmp_path, capsys):
    run = tmp_path / "run"
    tiny = [
        "env_backend=gymnasium",
        "total_timesteps=512",
        "num_envs=4",
        "num_steps=64",
        "eval_freq=1",
        "num_eval_envs=2",
    ]
    sets = [arg for pair in (("--set", s) for s in [*tiny, "num_hidden_units=16"]) for arg in pair]
    assert main(["train", "pendulum", "--seeds", "0-1", "--out", str(run), *sets, "--quiet"]) == 0
    assert "2 members, final eval mean" in capsys.readouterr().out
    member = run / "members" / "seed1"
    assert main(["export", str(member)]) == 0 and (member / "policy.tflite").exists()


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda tmp: kppo.train("CartPole-v1", kppo.Config(**SMALL), seed=[0, 1], checkpoint_dir=tmp, resume=True),
            "resume: exact resume needs a TF-native env",
        ),
        (
            lambda tmp: make_population_runner(
                kppo.make_vec_env("CartPole-v1", n_envs=3).vector_env, [kppo.Config(**SMALL)] * 2
            ),
            "num_envs: expected 3, the vector env's number of sub-envs, got 8",
        ),
        (
            lambda tmp: make_population_runner(
                "CartPole-v1", [kppo.Config(**SMALL), kppo.Config(**{**SMALL, "num_steps": 64})]
            ),
            "num_steps: population members may differ only in seed",
        ),
    ],
)
def test_bad_gymnasium_population_input_is_named_in_one_line(tmp_path, call, message):
    with pytest.raises(ValueError, match=message):
        call(tmp_path)
