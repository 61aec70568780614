"""The cache of compiled population programs (`kppo.training.runners.programs`): one owner, a bound, and eviction that
never breaks a population that is running."""

import numpy as np
import pytest

import kppo
from kppo.training.runners import population
from kppo.training.runners.population import make_native_population
from kppo.training.runners.programs import ProgramCache, keep, program_key

SMALL = dict(num_envs=2, num_steps=8, total_timesteps=64, num_minibatches=2, num_epochs=1, num_hidden_units=4)
GRAPH = dict(jit_rollout=False, jit_update=False, jit_eval=False)  # no XLA: the shortest compile


class Made:
    def __init__(self, functions):
        self.functions = functions or object()


def test_the_cache_keeps_at_most_its_bound_and_evicts_the_oldest():
    cache = ProgramCache(bound=2)
    first = cache.shared("a", Made).functions
    assert cache.shared("a", Made).functions is first  # kept: shared, not made again
    cache.shared("b", Made)
    cache.shared("c", Made)
    assert len(cache) == 2 and "a" not in cache and "b" in cache and "c" in cache
    assert cache.shared("a", Made).functions is not first  # evicted: made anew
    with pytest.raises(ValueError, match=r"^bound: expected at least 1 kept program, got 0$"):
        ProgramCache(bound=0)


def test_a_callers_programs_dict_is_bounded_too():
    kept: dict = {}
    for key in range(6):
        keep(kept, key, key, bound=4)
    assert list(kept) == [2, 3, 4, 5]
    keep(kept, 3, "again", bound=4)  # a kept key becomes the newest
    assert list(kept) == [2, 4, 5, 3]


def test_a_full_cache_evicts_without_breaking_a_running_population(monkeypatch):
    cache = ProgramCache(bound=1)
    monkeypatch.setattr(population, "PROGRAMS", cache)
    base = kppo.Config(**SMALL, **GRAPH)
    members = [base.replace(seed=0), base.replace(seed=1, learning_rate=1e-3)]
    running, _ = make_native_population("cartpole", members, programs={})
    first = running.run_iterations(running.state, 1)
    assert program_key("cartpole", members) in cache
    other = [base.replace(seed=0, num_epochs=2), base.replace(seed=1, num_epochs=2)]
    make_native_population("cartpole", other, programs={})  # another shape: the running population's entry goes
    assert len(cache) == 1 and program_key("cartpole", members) not in cache
    second = running.run_iterations(first.state, 1)
    # What the same two iterations compute without an eviction between them (the same compiled functions).
    reference = population.PopulationRunner(population.build_population("cartpole", members), running.functions)
    both = reference.run_iterations(reference.state, 2)
    np.testing.assert_array_equal(
        first.diagnostics.total_loss + second.diagnostics.total_loss, both.diagnostics.total_loss
    )
    for a, b in zip(running.population.weights.params, reference.population.weights.params):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_later_population_of_the_same_shapes_runs_the_kept_functions_and_computes_its_own_run(monkeypatch):
    cache, made = ProgramCache(), []
    monkeypatch.setattr(population, "PROGRAMS", cache)
    make = population.make_member_iterations
    monkeypatch.setattr(population, "make_member_iterations", lambda p: made.append(p) or make(p))
    sweep = kppo.Config(**SMALL).sweep(learning_rate=[3e-4, 1e-3])
    kppo.train("cartpole", sweep, seed=0)
    later = kppo.train("cartpole", sweep, seed=7)  # other seeds: the same shapes
    assert len(made) == 1 and len(cache) == 1  # the later population traced nothing
    cache.clear()
    own = kppo.train("cartpole", sweep, seed=7)  # traced anew
    assert len(made) == 2
    for kept_member, own_member in zip(later.members, own.members, strict=True):
        for a, b in zip(kept_member.agent.variables, own_member.agent.variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(kept_member.metrics["eval/mean_returns"], own_member.metrics["eval/mean_returns"])
