"""A sequential search (`--batch 1`) on a TF-native env compiles once: each trial trains as a population of one, and
the next trial of the same shapes runs its compiled program with its own weights and values."""

import optuna

from kppo.training.runners import population
from kppo.training.runners.programs import ProgramCache
from kppo.tuning.search import tune
from kppo.tuning.trials import reuses_programs
from tests.tuning.settings import TINY

SPACE = {"learning_rate": {"type": "float", "low": 1e-5, "high": 3e-2, "log": True}}


def test_a_sequential_search_traces_and_compiles_its_program_once(tmp_path, monkeypatch):
    cache = ProgramCache()
    monkeypatch.setattr(population, "PROGRAMS", cache)
    result = tune("CartPole-v1", TINY, SPACE, trials=3, batch=1, out=tmp_path, sampler_seed=0, pruner="none")
    trials = result.study.get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert len({t.params["learning_rate"] for t in trials}) == 3
    ((iterations_fn, evaluation_fn),) = [cache._entries[key] for key in cache._entries]
    assert iterations_fn.experimental_get_tracing_count() == 1  # three trials, one trace
    assert evaluation_fn.experimental_get_tracing_count() == 1


def test_only_what_can_train_as_a_population_of_one_does():
    assert reuses_programs("CartPole-v1", [TINY], {})
    assert not reuses_programs("CartPole-v1", [TINY], None)  # no programs kept: a plain single run
    assert not reuses_programs("CartPole-v1", [TINY.replace(optimizer="sgd")], {})  # a functional Adam only
    assert not reuses_programs("CartPole-v1", [TINY.replace(env_backend="gymnasium")], {})  # gymnasium: no reuse
