"""`kppo train --seeds/--sweep` (`kppo.cli.population`): the population run directory, its members as ordinary runs,
resume, and the one-line errors."""

import json

import pytest
import yaml

from kppo.cli.main import main
from kppo.cli.population import member_name, parse_seeds, parse_sweep
from kppo.config.options import Config

TINY = [
    "--set",
    "total_timesteps=1024",
    "--set",
    "num_envs=4",
    "--set",
    "num_steps=64",
    "--set",
    "eval_freq=2",
    "--set",
    "num_eval_envs=2",
    "--set",
    "num_hidden_units=16",
    "--quiet",
]


@pytest.mark.parametrize(
    "text, seeds", [("0-3", [0, 1, 2, 3]), ("5", [5]), ("0,3,5", [0, 3, 5]), ("0-2,1,9", [0, 1, 2, 9])]
)
def test_seed_lists(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["3-1", "a", "0-", "-1", "1.5", ""])
def test_bad_seed_lists_are_named(text):
    with pytest.raises(ValueError, match="--seeds: expected seeds like 0-7 or 0,3,5"):
        parse_seeds(text)


def test_sweep_values_are_yaml_scalars_and_members_are_named_by_them():
    grid = Config().sweep(**parse_sweep(["learning_rate=1e-3,3e-4", "gamma=0.9"])).grid  # "1e-3": coerced by Config
    assert grid == {"learning_rate": [1e-3, 3e-4], "gamma": [0.9]}
    with pytest.raises(ValueError, match=r"--sweep: expected NAME=V1,V2,..., got 'gamma'"):
        parse_sweep(["gamma"])
    assert member_name(Config(learning_rate=3e-4, seed=2), ["learning_rate"]) == "learning_rate=0.0003-seed2"
    assert member_name(Config(seed=2), []) == "seed2"


def test_a_population_run_writes_ordinary_member_runs_and_resumes(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "cartpole", "--seeds", "0-1", "--sweep", "ent_coef=0.0,0.01", "--out", str(run), *TINY]) == 0
    assert "4 members, final eval mean" in capsys.readouterr().out
    assert yaml.safe_load((run / "population.yaml").read_text()) == {
        "seeds": [0, 1],
        "sweep": {"ent_coef": [0.0, 0.01]},
    }
    summary = json.loads((run / "summary.json").read_text())
    assert summary["members"] == 4 and set(summary["final_eval_mean_return"]) == {
        "ent_coef=0-seed0",
        "ent_coef=0-seed1",
        "ent_coef=0.01-seed0",
        "ent_coef=0.01-seed1",
    }
    assert not list(run.rglob("zoo.yaml"))  # from a config, not an RL-Zoo entry (tests/cli/test_zoo_cli.py's)
    member = run / "members" / "ent_coef=0.01-seed1"
    assert json.loads((member / "summary.json").read_text())["seed"] == 1
    assert Config.from_yaml(member / "config.yaml").ent_coef == 0.01
    assert main(["eval", str(member), "--episodes", "2"]) == 0
    assert main(["export", str(member)]) == 0 and (member / "policy.tflite").exists()
    capsys.readouterr()
    # a finished population resumes to the same result (nothing left to train)
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    assert json.loads((run / "summary.json").read_text())["final_eval_mean_return"] == summary["final_eval_mean_return"]
    assert main(["train", "--resume", str(run), "--seeds", "0-3"]) == 2
    assert "--resume: expected no CONFIG, --set, --seed, --seeds or --sweep" in capsys.readouterr().err
