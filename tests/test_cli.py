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
    from kppo.cli import load_config

    config = load_config("pendulum", ["LR=1e-3", "n_envs=8", "squash=false", "actor_hidden_units=[32, 16]"], 5)
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


def _start_training(run, extra=()):
    import os

    cmd = [sys.executable, "-m", "kppo.cli", "train", "cartpole", "--out", str(run), "--quiet", "--no-export",
           "--set", "total_timesteps=2000000", "--set", "checkpoint_every=16", "--set", "iterations_per_call=4",
           *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_for_checkpoint(run, proc, timeout=180):
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        if list((run / "checkpoints").glob("ckpt-*.index")):
            return
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.5)
    raise AssertionError("no checkpoint appeared")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_killed_run_resumes_from_its_latest_checkpoint(sig, tmp_path):
    import signal

    from kppo.checkpoint import TrainingCheckpointer
    from kppo.config import Config
    from kppo.runners import make_runner

    run = tmp_path / "run"
    proc = _start_training(run)
    _wait_for_checkpoint(run, proc)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    if sig == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    else:
        assert proc.returncode == -signal.SIGKILL
    # the newest checkpoint loads into a fresh process's networks; a SIGKILL loses at most one interval
    config = Config.from_yaml(run / "config.yaml")
    runner = make_runner(None, config)
    restored = TrainingCheckpointer(run / "checkpoints", runner.agent, runner.state).restore_latest()
    assert restored is not None and int(restored[0].iteration) >= 16
    assert np.all(np.isfinite(runner.agent.actor.trainable_variables[0].numpy()))


def test_resume_through_the_cli(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "cartpole", "--out", str(run), "--no-export", *TINY]) == 0
    first = json.loads((run / "summary.json").read_text())
    assert main(["train", "--resume", str(run), "--quiet", "--no-export"]) == 0  # already complete: no new steps
    again = json.loads((run / "summary.json").read_text())
    assert again["total_steps"] == first["total_steps"]
    assert again["final_eval_mean_return"] == first["final_eval_mean_return"]
    assert main(["train", "cartpole", "--resume", str(run)]) == 2
    assert "--resume: expected no CONFIG" in capsys.readouterr().err
