"""`kppo export --quantize int8` calibrates on observations the policy visits: its run's own env by default,
`--calibrate-env ID` (an SB3 zip names none), `--calibrate-data FILE.npz` (recorded observations); an SB3 zip with
neither is refused in one line naming both flags, never calibrated on its normalization statistics."""

import json
import re

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.agent.agent import build_agent
from kppo.agent.checkpoint import save
from kppo.cli.main import main
from kppo.core.types import Moments
from kppo.exporter.runner import TFLiteRunner
from tests.helpers.sb3_reference import SAVED

ZIP, PKL = SAVED / "pendulum_vecnorm.zip", SAVED / "pendulum_vecnorm.pkl"
RECORDED = np.load(SAVED / "pendulum_vecnorm.npz")  # 1,000 raw observations and SB3's deterministic actions


def _export(*args: str) -> int:
    return main(["export", str(ZIP), "--vecnormalize", str(PKL), "--quantize", "int8", *args])


def _max_error(path) -> float:
    """The int8 artifact's largest action error against SB3's own actions, as a fraction of the range [-2, 2]."""
    got = TFLiteRunner(path)(RECORDED["obs"]).reshape(-1)
    return float(np.abs(got - RECORDED["actions"].reshape(-1)).max() / 4.0)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_an_sb3_zip_without_an_env_or_data_is_refused_naming_both_flags(tmp_path, capsys):
    out = tmp_path / "p.tflite"
    assert _export("--out", str(out)) == 2
    err = _one_line(capsys)
    assert "--calibrate-env ID" in err and "--calibrate-data FILE.npz" in err and not out.exists()


def test_calibrate_env_runs_the_policys_own_episodes_there(tmp_path, capsys):
    out = tmp_path / "p.tflite"
    assert _export("--calibrate-env", "Pendulum-v1", "--out", str(out)) == 0
    assert "calibrated on 2,000 policy rollouts in Pendulum-v1" in capsys.readouterr().out
    metadata = json.loads(out.with_name("p.tflite.metadata.json").read_text())
    assert metadata["calibration"] == {"source": "policy rollouts in Pendulum-v1", "observations": 2000}
    assert _max_error(out) <= 0.02  # the target for continuous policies: 2% of the action range


def test_calibrate_data_reads_the_obs_array_of_an_npz(tmp_path, capsys):
    data = tmp_path / "log.npz"
    np.savez(data, obs=RECORDED["obs"][:300], rewards=np.zeros(300))  # other arrays are left alone
    out = tmp_path / "p.tflite"
    assert _export("--calibrate-data", str(data), "--out", str(out)) == 0
    captured = capsys.readouterr()
    assert "calibrated on 300 recorded observations from log.npz" in captured.out
    assert "--calibrate-data: 300 observations" in captured.err  # fewer than the 1,000 calibrated on by default
    metadata = json.loads(out.with_name("p.tflite.metadata.json").read_text())
    assert metadata["calibration"] == {"source": "representative_obs", "observations": 300}
    assert _max_error(out) <= 0.02


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (
            {"obs": np.zeros((5, 4), np.float32)},
            r"log\.npz: obs: expected observations \[N, 3\] of numbers \(N >= 1\), got float32 \[5, 4\]",
        ),
        (
            {"a": np.zeros((5, 3)), "b": np.zeros(5)},
            r"log\.npz: expected the array\(s\) \['obs'\], got arrays \['a', 'b'\]",
        ),
        ({"obs": np.full((5, 3), np.nan, np.float32)}, r"log\.npz: obs: expected finite float32 values"),
        (
            {"obs": np.array([[None, 1, 2]], object)},
            r"log\.npz: expected a \.npz file of observation arrays, got: .*allow_pickle",
        ),
    ],
    ids=["shape", "names", "nan", "pickled"],
)
def test_bad_calibration_data_is_one_line_naming_the_file(arrays, message, tmp_path, capsys):
    data = tmp_path / "log.npz"
    np.savez(data, **arrays)
    assert _export("--calibrate-data", str(data), "--out", str(tmp_path / "p.tflite")) == 2
    assert re.search(message, _one_line(capsys))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--calibrate-env", "CartPole-v1"], "calibration_env: expected a gymnasium env with the policy's spaces"),
        (["--calibrate-env", "Pendulum-v1", "--calibrate-data", "x.npz"], "expected one of them, got both"),
        (["--calibrate-data", "missing.npz"], "missing.npz: expected a .npz file of observation arrays"),
    ],
)
def test_calibration_flags_refuse_what_cannot_calibrate(args, message, tmp_path, capsys):
    assert _export(*args, "--out", str(tmp_path / "p.tflite")) == 2
    assert message in _one_line(capsys)


def test_calibration_data_is_for_int8_only(tmp_path, capsys):
    """(`--calibrate-env` names the closed-loop report's env for every precision: tests/cli/test_export_report.py.)"""
    data = tmp_path / "log.npz"
    np.savez(data, obs=RECORDED["obs"])
    assert main(["export", str(ZIP), "--calibrate-data", str(data), "--out", str(tmp_path / "p.tflite")]) == 2
    assert "--calibrate-data: only for --quantize int8 or --budget, got --quantize none" in _one_line(capsys)


def test_a_kppo_run_calibrates_on_its_own_env_by_default(tmp_path, capsys):
    """A run directory (an untrained agent saved as `kppo train` saves it: conversion needs no training) whose
    config names Pendulum-v1: int8 runs its policy there, no flag needed."""
    config = kppo.Config(env="Pendulum-v1", squash=True, normalize_obs=True, num_hidden_units=16, seed=0)
    env = gym.make("Pendulum-v1")
    agent = build_agent(agent_spec(config), env.observation_space, env.action_space)
    stats = Moments(np.float32([0.0, 0.0, 0.0]), np.float32([0.5, 0.5, 4.0]), np.float32(100.0))
    save(
        tmp_path / "run" / "agent",
        config.to_yaml(),
        agent,
        stats,
        Moments(0.0, 1.0, 1.0),
        env.observation_space,
        env.action_space,
    )
    assert main(["export", str(tmp_path / "run"), "--quantize", "int8"]) == 0
    assert "calibrated on 2,000 policy rollouts in Pendulum-v1" in capsys.readouterr().out
    assert (tmp_path / "run" / "policy_int8.tflite").exists()
