"""A group of trials trained as concurrent shards (`kppo.tuning.trials`): how many, the rounds reported as one
population's, a shard's error, and the same trial values as one population."""

import threading

import numpy as np
import optuna
import pytest

from kppo.config.options import Config
from kppo.tuning import trials
from kppo.tuning.search import tune
from tests.tuning.settings import TINY

XLA = TINY.replace(jit_rollout=True, jit_eval=True)


@pytest.mark.parametrize(
    ("env", "config", "members", "cores", "shards"),
    [
        ("cartpole", XLA, 8, 2, 2),
        ("cartpole", XLA, 8, 16, 2),  # shards of at least SHARD_MIN_MEMBERS
        ("cartpole", XLA, 16, 4, 4),
        ("cartpole", XLA, 12, 2, 2),
        ("cartpole", XLA, 12, 16, 3),
        ("cartpole", XLA, 9, 2, 1),  # equal shards only (9 members: 2 does not divide, 1 shard)
        ("cartpole", XLA, 8, 1, 1),
        ("cartpole", XLA, 4, 2, 1),
        ("cartpole", TINY, 8, 2, 1),  # not XLA-compiled: no shared program
        ("CartPole-v1", XLA.replace(env_backend="gymnasium"), 8, 2, 1),  # gymnasium's env: one host population
    ],
)
def test_shard_count(env, config, members, cores, shards):
    configs = [config.replace(seed=i) for i in range(members)]
    assert trials.shard_count(env, configs, cores) == shards


class _Trial:
    def __init__(self):
        self.reports = []

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return False


def _fake_train(rounds, fail_shard=None):
    """A `train` whose members' evaluation returns are their seeds + the round: reports in a thread each."""

    def train(env, members, on_eval, should_stop, programs):
        for round_index in range(rounds):
            if members[0].seed == fail_shard and round_index == 1:
                raise FloatingPointError("diverged")
            on_eval({"eval/mean_returns": np.array([c.seed + 10.0 * round_index for c in members])})
            if should_stop():
                return

    return train


def test_shards_report_each_round_once_with_every_member_in_order(monkeypatch):
    monkeypatch.setattr(trials, "train", _fake_train(rounds=3))
    pending = [trials.Pending(_Trial(), {}, Config(seed=i), members=[i]) for i in range(4)]
    calls = []
    reporter = trials._Reporter(None, pending, lambda *_: None)
    on_eval = reporter.on_eval
    monkeypatch.setattr(reporter, "on_eval", lambda row: calls.append(threading.current_thread().name) or on_eval(row))
    trials._train_shards("cartpole", [p.config for p in pending], reporter, 2, {})
    assert len(calls) == 3  # one report a round, whichever shard arrived last
    for i, item in enumerate(pending):
        assert item.trial.reports == [(0, i), (1, i + 10.0), (2, i + 20.0)]


def test_a_shards_error_releases_the_others_and_is_raised(monkeypatch):
    monkeypatch.setattr(trials, "train", _fake_train(rounds=3, fail_shard=2))
    pending = [trials.Pending(_Trial(), {}, Config(seed=i), members=[i]) for i in range(4)]
    reporter = trials._Reporter(None, pending, lambda *_: None)
    with pytest.raises(FloatingPointError, match="diverged"):
        trials._train_shards("cartpole", [p.config for p in pending], reporter, 2, {})
    assert [item.trial.reports for item in pending] == [[(0, 0.0)], [(0, 1.0)], [(0, 2.0)], [(0, 3.0)]]


def test_a_sharded_group_gives_every_trial_the_value_of_one_population(tmp_path, monkeypatch):
    space = {"learning_rate": {"type": "float", "low": 1e-4, "high": 3e-2, "log": True}}

    def search(name):
        result = tune(
            "cartpole", XLA, space, trials=4, batch=4, out=tmp_path / name, pruner="none", verbose=0, sampler_seed=0
        )
        return [(t.state, t.value, t.params) for t in result.study.get_trials()]

    monkeypatch.setattr(trials, "SHARD_MIN_MEMBERS", 2)
    monkeypatch.setattr(trials, "shard_count", lambda env, configs: 1)
    one = search("one")
    monkeypatch.undo()
    monkeypatch.setattr(trials, "SHARD_MIN_MEMBERS", 2)
    calls = []
    count = trials.shard_count
    monkeypatch.setattr(trials, "shard_count", lambda env, configs: calls.append(count(env, configs, 2)) or calls[-1])
    sharded = search("sharded")
    assert calls == [2]
    assert [state for state, _, _ in sharded] == [optuna.trial.TrialState.COMPLETE] * 4
    assert sharded == one
