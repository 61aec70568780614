"""`kppo train | eval | export` end to end with tiny budgets, and its errors."""

import json
import subprocess
import sys

import numpy as np
import pytest

from kppo.cli import main

TINY = ["--set", "total_timesteps=1024", "--set", "num_envs=4", "--set", "num_steps=64", "--set", "eval_freq=2",
        "--set", "num_eval_envs=2", "--quiet"]


def test_train_eval_export_end_to_end(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "cartpole", "--seed", "3", "--out", str(run), *TINY]) == 0
    for name in ("config.yaml", "metrics.csv", "learning_curve.png", "policy.tflite", "policy.tflite.metadata.json",
                 "summary.json", "agent/config.yaml", "agent/metadata.json"):
        assert (run / name).exists(), name
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["total_steps"] == 1024 and summary["artifact"]["parity_max_error"] == 0
    header = (run / "metrics.csv").read_text().splitlines()
    assert "eval/mean_returns" in header[0] and len(header) == 3  # header + 2 rounds
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "3"]) == 0
    agent_line = capsys.readouterr().out
    assert main(["eval", str(run / "policy.tflite"), "--episodes", "3"]) == 0
    assert capsys.readouterr().out == agent_line  # the artifact plays exactly like the agent
    assert main(["export", str(run), "--quantize", "int8"]) == 0
    assert (run / "policy_int8.tflite").exists()
    assert main(["export", str(run), "--format", "saved_model", "--batch-size", "0"]) == 0
    assert (run / "policy" / "saved_model.pb").exists()


def test_overrides_accept_every_spelling(tmp_path):
    from kppo.cli import _load_config

    config = _load_config("pendulum", ["LR=1e-3", "n_envs=8", "squash=false", "actor_hidden_units=[32, 16]"], 5)
    assert (config.learning_rate, config.num_envs, config.squash, config.actor_hidden_units, config.seed) == (
        1e-3, 8, False, (32, 16), 5)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "nope"], "CONFIG: expected a YAML file or one of"),
        (["train", "--set", "learning_rate"], "--set: expected name=value"),
        (["train", "--set", "num_envs=0"], "num_envs: expected an integer >= 1, got 0"),
        (["train", "--set", "colour=blue"], "unknown option 'colour'"),
        (["eval", "/nonexistent"], "RUN_DIR|ARTIFACT: expected a run directory"),
        (["export", "/nonexistent"], "path: expected a kppo agent directory"),
    ],
)
def test_bad_input_is_one_line_on_stderr(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_yaml_config(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_envs: [4\n")
    assert main(["train", str(bad)]) == 2
    assert "config YAML: could not parse" in capsys.readouterr().err


def test_console_script_help_lists_every_field():
    out = subprocess.run([sys.executable, "-m", "kppo.cli", "train", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    from kppo.config import Config

    for name, doc in Config.field_docs().items():
        assert name in out.stdout, name
