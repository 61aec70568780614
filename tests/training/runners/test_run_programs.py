"""A single run's programs kept between runs (`programs.run_programs`): a later run of the same Config but the seed
calls the first run's traced and compiled programs on its own variables, and computes bit for bit what it computes
when it traces its own."""

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.core.rebinding import Rebound
from kppo.training.runners import make_runner, programs
from kppo.training.runners.host import Start
from kppo.training.runners.programs import LOOP_ONLY, ProgramCache, run_key
from kppo.training.runners.settings import resolve

SMALL = dict(num_envs=2, num_steps=8, total_timesteps=64, num_minibatches=2, num_epochs=2, num_hidden_units=8)


@pytest.fixture
def cache(monkeypatch):
    kept = ProgramCache(bound=2)
    monkeypatch.setattr(programs, "RUN_PROGRAMS", kept)
    return kept


def _trained(env, config, iterations=2):
    """(runner, weights, the flattened runner state and diagnostics, an evaluation's returns) of `iterations`."""
    runner = make_runner(env, config)
    done = runner.run_iterations(runner.state, iterations)
    result, _ = runner.evaluation_round(runner.view(done.state).rollout.obs_stats, 0, 0, done.diagnostics)
    state = done.state
    if hasattr(state.rollout, "clock_start"):  # the host rollout's wall clock, not a computed value
        state = state._replace(rollout=state.rollout._replace(clock_start=0.0))
    values = [np.asarray(x) for x in tf.nest.flatten((state, done.diagnostics))]
    return runner, [v.numpy() for v in runner.agent.program_variables], values, np.asarray(result.returns)


def _assert_same(a, b):
    for x, y in zip(a[1:], b[1:]):
        for u, v in zip(x if isinstance(x, list) else [x], y if isinstance(y, list) else [y]):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("env, backend", [("CartPole-v1", "native"), ("Pendulum-v1", "gymnasium")])
def test_a_later_run_of_the_same_config_runs_the_first_runs_programs_and_computes_its_own_run(cache, env, backend):
    config = kppo.Config(**SMALL, env_backend=backend)
    owner = _trained(env, config.replace(seed=0))
    assert len(cache) == 1
    rebound = _trained(env, config.replace(seed=1))
    functions = [rebound[0].iterations_fn, rebound[0].evaluation_fn] if backend == "native" else [rebound[0].finish_fn]
    assert all(isinstance(f, Rebound) for f in functions)  # no trace of its own
    assert all(f.function.experimental_get_tracing_count() == 1 for f in functions)
    cache.clear()
    own = _trained(env, config.replace(seed=1))  # traced on its own variables
    _assert_same(rebound, own)
    assert not np.array_equal(owner[1][0], own[1][0])  # the seeds' runs differ: the rebound run is not the owner's


def test_a_full_cache_evicts_without_breaking_a_running_run(cache):
    config = kppo.Config(**SMALL)
    running = make_runner("cartpole", config)
    first = running.run_iterations(running.state, 1)
    make_runner("cartpole", config.replace(num_epochs=1))
    make_runner("cartpole", config.replace(num_minibatches=1))  # two more keys: the running run's entry goes
    assert len(cache) == 2
    spaces = (running.observation_space, running.action_space)
    assert not any(key[:4] == run_key("native", spaces, resolve(config), "cartpole") for key in cache._entries)
    second = running.run_iterations(first.state, 1)
    cache.clear()
    reference = make_runner("cartpole", config)
    both = reference.run_iterations(reference.state, 2)
    np.testing.assert_array_equal(
        first.diagnostics.total_loss + second.diagnostics.total_loss, both.diagnostics.total_loss
    )
    for a, b in zip(running.agent.program_variables, reference.agent.program_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_only_the_seed_and_what_the_loop_reads_are_left_out_of_the_key():
    box = gym.spaces.Box(-1.0, 1.0, (2,))
    spaces = (box, gym.spaces.Discrete(2))
    config = kppo.Config()

    def key(kind: str, changes: dict | None = None, env: str = "", space=box) -> tuple:
        return run_key(kind, (space, spaces[1]), resolve(config.replace(**(changes or {}))), env)

    assert key("host") == key("host", dict(seed=3, eval_freq=2, verbose=1))
    assert key("host") != key("host", dict(ent_coef=config.ent_coef + 0.01))
    assert key("host") != key("native", env="cartpole")
    wider = gym.spaces.Box(np.array([-1.0, -2.0], np.float32), np.array([1.0, 1.0], np.float32))
    assert key("host", space=wider) != key("host")  # bounds, not only shapes


def test_a_given_agent_not_built_from_the_config_runs_programs_of_its_own(cache):
    config = kppo.Config(**SMALL, env_backend="gymnasium")
    first = make_runner("CartPole-v1", config)
    given = make_runner("CartPole-v1", config, start=Start(agent=first.agent))  # a user's networks, say
    built = make_runner("CartPole-v1", config, start=Start(agent=first.agent, from_spec=True))
    assert not isinstance(given.finish_fn, Rebound) and isinstance(built.finish_fn, Rebound)
    cache.clear()
    with tf.device("/cpu:0"):  # under a device scope (SB3's `device`): kept for runs made on that device
        make_runner("CartPole-v1", config, start=Start(agent=first.agent, from_spec=True))
    assert [key[-1] for key in cache._entries] == ["/job:localhost/replica:0/task:0/device:CPU:0"]


@pytest.mark.parametrize("env, backend", [("CartPole-v1", "native"), ("FrozenLake-v1", "gymnasium")])
def test_a_run_of_env_backend_auto_runs_the_programs_of_the_backend_it_resolves_to(cache, env, backend):
    config = kppo.Config(**SMALL)
    _trained(env, config.replace(env_backend=backend))
    auto = _trained(env, config.replace(env_backend="auto", seed=1))
    functions = [auto[0].iterations_fn, auto[0].evaluation_fn] if backend == "native" else [auto[0].finish_fn]
    assert len(cache) == 1 and all(isinstance(f, Rebound) for f in functions)


def test_the_fields_left_out_of_the_key_are_read_only_around_the_programs():
    """`LOOP_ONLY` fields (but the seed: initial weights and keys) are read by no module that builds programs, but
    where the host runners make their envs (`verbose`: gymnasium's env checker)."""
    root = Path(kppo.__file__).parent
    builders = [*(root / "training" / "runners").glob("*.py")]
    for layer in ("rollout", "update", "agent", "envs", "core"):
        builders += (root / layer).rglob("*.py")
    reads = []
    for path in builders:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for field in set(LOOP_ONLY) - {"seed"}:
                if (
                    re.search(rf"\.{field}\b", line)
                    and "gym_vec_env(" not in line
                    and "verbose=config.verbose" not in line
                ):
                    reads.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert not reads, reads
