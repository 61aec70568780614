"""`kppo.tune` end to end on TF-native CartPole: trials batched as populations, the study's folder, its best config
run by `kppo train`, and the one-line refusals before anything trains."""

import csv

import optuna
import pytest
import yaml

from kppo.cli.main import main
from kppo.config.options import Config
from kppo.tuning.search import make_pruner, make_sampler, tune
from tests.tuning.settings import TINY

SPACE = {"learning_rate": {"type": "float", "low": 1e-5, "high": 3e-2, "log": True}}


def test_a_batched_search_beats_its_worst_trial_and_writes_a_best_config_kppo_train_runs(tmp_path, capsys):
    result = tune(
        "CartPole-v1",
        TINY,
        SPACE,
        trials=4,
        batch=2,
        out=tmp_path / "s",
        startup_trials=4,
        pruner="none",
        sampler_seed=0,
    )
    trials = result.study.get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4
    assert [t.user_attrs["batch"] for t in trials] == [2, 2, 2, 2]  # two populations of two trials
    values = [t.value for t in trials]
    assert result.best_value == max(values) > min(values)
    assert result.best_config == TINY.replace(learning_rate=result.best_params["learning_rate"])
    rows = list(csv.DictReader((tmp_path / "s" / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 4 and rows[0]["seeds"] == "[0]"
    assert {float(r["value"]) for r in rows} == set(values)
    for plot in ("optimization_history.png", "param_importances.png"):
        assert (tmp_path / "s" / plot).read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert "[kppo tune] trial 3: value" in out and f"best value {result.best_value:.2f}" in out
    best = tmp_path / "s" / "best.yaml"
    assert Config.from_yaml(best) == result.best_config
    assert main(["train", str(best), "--out", str(tmp_path / "run"), "--no-export", "--quiet"]) == 0
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["learning_rate"] == pytest.approx(
        result.best_params["learning_rate"]
    )


def test_an_invalid_sampled_config_fails_its_trial_and_the_search_goes_on(tmp_path):
    # each value alone fits the 512-step budget (32 x 16, 4 x 128); together a rollout is 4096 steps
    space = {
        "num_envs": {"type": "categorical", "choices": [32]},
        "num_steps": {"type": "categorical", "choices": [128]},
    }
    result = tune("CartPole-v1", TINY, space, trials=2, out=tmp_path, verbose=0)
    trials = result.study.get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.FAIL] * 2
    assert "total_timesteps: expected at least one rollout" in trials[0].user_attrs["error"]
    assert result.best_value is None and (tmp_path / "trials.csv").is_file() and not (tmp_path / "best.yaml").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"storage": "postgresql+psycopg2://nobody@127.0.0.1:1/none"}, r"--storage: could not open 'postgresql"),
        ({"storage": "nowhere/at/all.log"}, r"--storage: expected a journal file in an existing folder"),
        ({"storage": "study.db"}, r"--storage: expected a database URL"),
        ({"sampler": "bayes"}, r"--sampler: expected one of tpe, random, cmaes, qmc"),
        ({"pruner": "ThresholdPruner"}, r"--pruner ThresholdPruner: takes arguments kppo does not pass"),
        ({"batch": 0}, r"--batch / --seeds-per-trial: expected >= 1"),
        ({"trials": -1}, r"trials: expected an integer >= 0 \(0 makes the study only\), got -1"),
        ({"timeout": float("nan")}, r"timeout: expected None or a positive number of seconds, got nan"),
        ({"sampler_seed": -1}, r"sampler_seed: expected None or an integer >= 0, got -1"),
        ({"resume": True}, r"--resume: no study 'CartPole-v1-\w+' in sqlite:///.*study.db to resume"),
        ({"space": {"seed": {"type": "int", "low": 0, "high": 3}}}, r"seed cannot vary in a search"),
    ],
)
def test_bad_input_is_refused_in_one_line_before_anything_trains(tmp_path, kwargs, message):
    kwargs = {"space": SPACE, "trials": 1, **kwargs}
    with pytest.raises(ValueError, match=message) as error:
        tune("CartPole-v1", TINY, out=tmp_path, **kwargs)
    assert "\n" not in str(error.value)


def test_a_population_of_an_optimizer_populations_cannot_step_is_refused_with_the_way_out(tmp_path):
    with pytest.raises(ValueError, match=r"--batch 2 --seeds-per-trial 1: .*optimizer.*; use --batch 1"):
        tune("CartPole-v1", TINY.replace(optimizer="rmsprop"), SPACE, trials=1, batch=2, out=tmp_path)


def test_a_study_of_another_search_is_refused_by_name(tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    tune("CartPole-v1", TINY, SPACE, trials=0, storage=storage, study="s", out=tmp_path / "a", verbose=0)
    with pytest.raises(
        ValueError, match=r"--study s: the study in .* is of another search \(config num_envs: 4, not 8"
    ):
        tune("CartPole-v1", TINY.replace(num_envs=8), SPACE, trials=0, storage=storage, study="s", out=tmp_path / "b")


def test_samplers_and_pruners_by_short_or_class_name():
    assert isinstance(make_sampler("tpe", 0, 10), optuna.samplers.TPESampler)
    assert isinstance(make_sampler("RandomSampler", 0, 10), optuna.samplers.RandomSampler)
    median = make_pruner("median", 5, 3)
    assert isinstance(median, optuna.pruners.MedianPruner) and median._n_warmup_steps == 3
    assert isinstance(make_pruner("none", 5, 3), optuna.pruners.NopPruner)


def test_fields_added_later_leave_a_studys_identity_and_name_as_before_at_their_defaults():
    """A study saved before Config had clip_obs / clip_reward / norm_epsilon: the same search finds and joins it."""
    import hashlib
    import json

    from kppo.tuning.space import parse_space
    from kppo.tuning.storage import LATER_FIELDS, study_identity, study_name

    base = Config(verbose=0)
    space = parse_space({"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3}}, base)
    before = {k: v for k, v in base.to_dict().items() if k not in LATER_FIELDS}  # what an earlier kppo saved
    assert study_identity(base, space, "cartpole")["config"] == before
    old = json.dumps({"env": "cartpole", "config": before, "space": space.to_dict()}, sort_keys=True, default=str)
    assert study_name(base, space, "cartpole") == f"cartpole-{hashlib.sha256(old.encode()).hexdigest()[:10]}"
    clipped = base.replace(clip_obs=5.0)
    assert study_identity(clipped, space, "cartpole")["config"]["clip_obs"] == 5.0
    assert study_name(clipped, space, "cartpole") != study_name(base, space, "cartpole")
