"""Populations (`kppo.training.runners.population`, `kppo.train(..., seed=[...])`, `Config.sweep`): each member computes
what a single run with its seed and hyperparameters computes, members are independent, and a population resumes
exactly."""

import numpy as np
import pytest

import kppo
from kppo.training.runners.native import make_native_runner
from kppo.training.runners.settings import resolve
from kppo.training.runners import make_population_runner
from kppo.training.runners.population import member_agent, member_state

SMALL = dict(
    num_envs=4,
    num_steps=32,
    num_epochs=3,
    num_minibatches=4,
    num_hidden_units=16,
    total_timesteps=4 * 32 * 6,
    eval_freq=2,
    num_eval_envs=3,
)
GRAPH = dict(jit_rollout=False, jit_update=False, jit_eval=False)  # TF kernels on both sides: the same random numbers


def _close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


CARTPOLE = dict(learning_rate=3e-3, lr_schedule="linear")
#: the second member's values: every swept hyperparameter differs from the first member's
SWEPT = dict(
    learning_rate=1e-3, ent_coef=0.01, clip_range=0.1, gamma=0.95, gae_lambda=0.9, vf_coef=0.7, max_grad_norm=0.3
)


def _members(changes):
    base = kppo.Config(**SMALL, **GRAPH, **changes)
    return [base.replace(seed=3), base.replace(seed=5, **SWEPT)]


@pytest.fixture(scope="module")
def cartpole_population():
    """A GRAPH CartPole population of `_members(CARTPOLE)`, built once per module and traced with the function bodies
    tf.vectorized_map converts recorded (as conftest's `pfor_conversions`): its runner, its population, its first 3
    iterations and the conversions of tracing them and an evaluation round."""
    from tensorflow.python.ops.parallel_for import pfor

    converted = []
    convert = pfor._convert_function_call
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            pfor, "_convert_function_call", lambda func, *args: converted.append(func.name) or convert(func, *args)
        )
        runner, population = make_population_runner("cartpole", _members(CARTPOLE))
        result = runner.run_iterations(runner.state, 3)
        runner.evaluation_round(runner.state.rollout.obs_stats, 0, 0, None)
    return runner, population, result, converted


@pytest.mark.parametrize(
    "env, changes",
    [
        ("cartpole", CARTPOLE),
        (
            "pendulum",
            dict(
                normalize_obs=True,
                normalize_reward=True,
                target_kl=0.002,
                learning_rate=3e-3,
                adam_style="torch",
                advantage_std_ddof=1,
                clip_range_vf=0.2,
                bias_init="torch_default",
                kernel_init="torch_default",
            ),
        ),
    ],
)
def test_every_member_computes_what_a_single_run_with_its_seed_and_values_computes(env, changes, request):
    configs = _members(changes)
    if env == "cartpole":  # the module's population of these members
        _, population, result, _ = request.getfixturevalue("cartpole_population")
    else:
        runner, population = make_population_runner(env, configs)
        result = runner.run_iterations(runner.state, 3)
    for index, config in enumerate(configs):
        single = make_native_runner(env, resolve(config))
        alone = single.run_iterations(single.state, 3)
        for name, value in alone.diagnostics._asdict().items():
            _close(getattr(result.diagnostics, name)[index], value)
        for mine, theirs in zip(member_agent(population, index).variables, single.agent.variables):
            _close(mine, theirs)
        state = member_state(result.state, index)
        _close(state.rollout.obs, alone.state.rollout.obs)
        _close(state.rollout.obs_stats.mean, alone.state.rollout.obs_stats.mean)
        _close(state.rollout.return_stats.var, alone.state.rollout.return_stats.var)
    steps = result.diagnostics.minibatch_steps.numpy()
    np.testing.assert_array_equal(population.weights.steps.numpy(), steps)  # each member's own Adam step count
    if "target_kl" in changes:  # the test covers a target-KL stop in one member at least
        assert np.any(steps < 3 * 3 * 4)


def test_tracing_a_population_converts_each_loop_once(cartpole_population):
    pfor_conversions = cartpole_population[3]
    # GAE's loop: a condition and a body, converted once (not 3 times); the rollout's steps, the update's minibatches
    # and the evaluation's steps loop outside the vectorized map (`member_steps`, `member_updates`,
    # `make_member_evaluation`): not converted
    assert len(pfor_conversions) == 2 and len(set(pfor_conversions)) == 2, pfor_conversions


def test_a_members_result_does_not_depend_on_another_members_values(cartpole_population):
    _, first_population, first_result, _ = cartpole_population
    first, other = _members(CARTPOLE)
    second = make_population_runner("cartpole", [first, other.replace(learning_rate=1e-2, ent_coef=0.1)])
    results = [first_result, second[0].run_iterations(second[0].state, 3)]
    agents = [member_agent(population, 0) for population in (first_population, second[1])]
    for a, b in zip(agents[0].variables, agents[1].variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(results[0].diagnostics.total_loss[0], results[1].diagnostics.total_loss[0])
    assert results[0].diagnostics.total_loss[1] != results[1].diagnostics.total_loss[1]


@pytest.mark.slow  # ~60 s: two populations and a fresh one, to the last bit
def test_a_population_of_the_same_shapes_reuses_the_compiled_program_and_runs_as_a_fresh_one():
    base = kppo.Config(**SMALL, **GRAPH, normalize_obs=True, learning_rate=1e-3)
    first = [base.replace(seed=1), base.replace(seed=2, ent_coef=0.05)]
    second = [base.replace(seed=7, learning_rate=3e-3), base.replace(seed=8, clip_range=0.1, gamma=0.9)]
    programs: dict = {}
    kppo.train("cartpole", first, programs=programs)
    (runner,) = programs.values()
    traces = runner.iterations_fn.experimental_get_tracing_count()
    reused = kppo.train("cartpole", second, programs=programs)
    assert list(programs.values()) == [runner] and runner.iterations_fn.experimental_get_tracing_count() == traces
    fresh = kppo.train("cartpole", second)
    for name, values in fresh.metrics.items():
        if not name.startswith("time/"):  # wall-clock rates
            np.testing.assert_array_equal(reused.metrics[name], values, err_msg=name)
    for a, b in zip(reused.members, fresh.members):
        assert a.config == b.config
        for x, y in zip(a.agent.variables, b.agent.variables):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        np.testing.assert_array_equal(a.runner_state.rollout.obs_stats.mean, b.runner_state.rollout.obs_stats.mean)
    kppo.train("cartpole", [base.replace(seed=1, num_epochs=2), base.replace(seed=2, num_epochs=2)], programs=programs)
    assert len(programs) == 2  # another shape: another program


def test_train_with_several_seeds_returns_one_result_per_member_and_a_summary():
    config = kppo.Config(**SMALL).sweep(learning_rate=[1e-3, 3e-3])
    result = kppo.train("cartpole", config, seed=[0, 1])
    assert [(c.learning_rate, c.seed) for c in result.configs] == [(1e-3, 0), (1e-3, 1), (3e-3, 0), (3e-3, 1)]
    assert result.metrics["eval/mean_returns"].shape == (2, 4)
    np.testing.assert_array_equal(result.metrics["train/total_steps"], [384, 768])
    summary = result.summary["eval/mean_returns"]
    _close(summary["min"], result.metrics["eval/mean_returns"].min(axis=1))
    member = result.members[2]
    assert member.config.learning_rate == 3e-3 and int(member.runner_state.iteration) == 6
    np.testing.assert_array_equal(member.metrics["eval/mean_returns"], result.metrics["eval/mean_returns"][:, 2])
    assert member.metrics["train/learning_rate"][-1] == pytest.approx(3e-3 * (1 - 5 / 6))
    action, _ = member.policy.predict(np.zeros(4, np.float32), deterministic=True)
    assert action in (0, 1)


@pytest.mark.slow  # ~30 s (three populations traced); the CLI test resumes a finished population in the default suite
def test_a_population_resumes_bit_identically(tmp_path):
    config = kppo.Config(**SMALL, **GRAPH, iterations_per_call=1, checkpoint_every=1)
    seeds = [0, 7]
    full = kppo.train("cartpole", config, seed=seeds)
    calls = []
    stopped = kppo.train(
        "cartpole", config, seed=seeds, checkpoint_dir=tmp_path, should_stop=lambda: calls.append(1) or len(calls) == 4
    )
    assert stopped.interrupted
    resumed = kppo.train("cartpole", config, seed=seeds, checkpoint_dir=tmp_path, resume=True)
    for a, b in zip(full.members, resumed.members):
        for x, y in zip(
            a.agent.variables + a.agent.optimizer.variables, b.agent.variables + b.agent.optimizer.variables
        ):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(full.metrics["eval/mean_returns"], resumed.metrics["eval/mean_returns"])
    np.testing.assert_array_equal(full.metrics["train/gradient_steps"], resumed.metrics["train/gradient_steps"])


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: kppo.train("cartpole", kppo.Config(**SMALL), seed=[0, 1], callback=lambda *_: True),
            "callback: expected None for a population",
        ),
        (lambda: kppo.Config().sweep(num_envs=[4, 8]), "sweep: expected fields among learning_rate, .*got 'num_envs'"),
        (lambda: kppo.Config().sweep(gamma=[]), r"sweep.gamma: expected a non-empty list of values, got \[\]"),
        (lambda: kppo.Config().sweep(clip_range=[0.1, -1.0]), "clip_range: expected"),
        (lambda: kppo.train("cartpole", kppo.Config(**SMALL), seed=[]), r"seed: expected at least one seed, got \[\]"),
        (
            lambda: make_population_runner(
                "cartpole", [kppo.Config(**SMALL), kppo.Config(**SMALL).replace(num_envs=8)]
            ),
            "num_envs: population members may differ only in seed and learning_rate, .*got 4 and 8",
        ),
        (
            lambda: kppo.train(kppo.envs.make("cartpole"), kppo.Config(**SMALL, distribute="mirrored"), seed=[0, 1]),
            "distribute: a population runs on one device, expected 'none', got 'mirrored'",
        ),
        (
            lambda: make_population_runner("cartpole", [kppo.Config(**SMALL, optimizer="rmsprop")] * 2),
            "optimizer: a population steps a functional Adam with its defaults, expected 'adam', got 'rmsprop'",
        ),
        (
            lambda: make_population_runner("cartpole", [kppo.Config(**SMALL, adam_beta_1=0.8)] * 2),
            "adam_beta_1: a population steps a functional Adam with its defaults, expected 0.9, got 0.8",
        ),
        (
            lambda: make_population_runner("cartpole", [kppo.Config(**SMALL, frame_stack=4)] * 2),
            "frame_stack: expected a gymnasium env id to wrap, got the TF-native env 'cartpole'",
        ),
    ],
)
def test_bad_population_input_is_named_in_one_line(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_population_members_cross_the_grid_with_the_seeds():
    from kppo.training.results import population_members

    sweep = kppo.Config(seed=9).sweep(gamma=[0.9, 0.99], ent_coef=0.01)
    members = population_members(sweep, np.arange(2))
    assert [(m.gamma, m.ent_coef, m.seed) for m in members] == [
        (0.9, 0.01, 0),
        (0.9, 0.01, 1),
        (0.99, 0.01, 0),
        (0.99, 0.01, 1),
    ]
    assert [m.seed for m in population_members(sweep, None)] == [9, 9]  # the config's seed
    assert [m.seed for m in population_members(kppo.Config(), range(3))] == [0, 1, 2]
    assert [m.seed for m in population_members(None, 4)] == [4]


@pytest.mark.slow
def test_under_xla_members_learn_as_single_runs_do_over_16_seeds():
    """The default flags (XLA): a member's random numbers come from XLA's generator inside the vectorized program, so
    members are compared with single runs in distribution: final evaluation returns of the fixed CartPole setting,
    16 seeds each, permutation test (benchmarks/stats.py)."""
    from tests.helpers.benchmark_stats import load_stats

    stats = load_stats()
    config = kppo.Config(verbose=0, eval_freq=1)
    seeds = list(range(16))
    population = kppo.train("cartpole", config, seed=seeds).metrics["eval/mean_returns"][-1]
    single = [kppo.train("cartpole", config, seed=s).metrics["eval/mean_returns"][-1] for s in seeds]
    test = stats.permutation_test(population, single)
    print(
        f"population {np.mean(population):.1f} {np.round(population, 1).tolist()}; single {np.mean(single):.1f} "
        f"{np.round(single, 1).tolist()}; p = {test.p_value:.3f}"
    )
    assert test.p_value >= 0.05, (population.tolist(), single, test)
