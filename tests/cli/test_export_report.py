"""`kppo export` writes a closed-loop quality report beside every artifact (the float policy's and the artifact's
return over the same seeded episodes, agreement, size, TFLite Micro arena, latency), keeps a degraded artifact
under a `.rejected` name unless `--accept-degraded`, and `--budget` writes the best-return precision that fits or
refuses naming the closest candidate.

The policy is a CartPole controller set by hand (an agent saved as `kppo train` saves it): its actions are the sign
of 0.1 x + 0.5 x_dot + theta + 0.5 theta_dot, which balances the pole for all 500 steps of every episode, so a float
return of 500 is known and a broken artifact shows."""

import json

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.agent.agent import build_agent
from kppo.agent.checkpoint import save
from kppo.cli.main import main
from kppo.core.types import Moments
from tests.helpers.sb3_reference import SAVED

W = np.float32([0.1, 0.5, 1.0, 0.5])  # action 1 when W . obs > 0


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    """A run directory whose agent balances CartPole-v1 (500 in every episode)."""
    config = kppo.Config(env="CartPole-v1", num_hidden_units=16, seed=0)
    env = gym.make("CartPole-v1")
    agent = build_agent(agent_spec(config), env.observation_space, env.action_space)
    actor = agent.actor
    first, second = actor.hidden
    k1 = np.zeros(first.kernel.shape, np.float32)
    k1[:, 0] = 0.1 * W  # tanh stays near linear: h = 0.1 W . obs
    k2 = np.zeros(second.kernel.shape, np.float32)
    k2[0, 0] = 10.0
    head = np.zeros(actor.head.kernel.shape, np.float32)
    head[0] = [-1.0, 1.0]  # logits (-h, h): argmax is the sign of W . obs
    for layer, kernel in ((first, k1), (second, k2), (actor.head, head)):
        layer.kernel.assign(kernel)
        layer.bias.assign(np.zeros(layer.bias.shape, np.float32))
    run = tmp_path_factory.mktemp("controller") / "run"
    stats = Moments(np.zeros(4, np.float32), np.ones(4, np.float32), np.float32(1.0))
    save(run / "agent", config.to_yaml(), agent, stats, Moments(0.0, 1.0, 1.0), env.observation_space, env.action_space)
    return run


def _report(path):
    return json.loads(path.with_name(path.name + ".report.json").read_text())


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_report_holds_both_returns_the_agreement_and_the_device_figures(controller, tmp_path, capsys):
    out = tmp_path / "p.tflite"
    assert main(["export", str(controller), "--out", str(out)]) == 0
    report = _report(out)
    loop = report["closed_loop"]
    assert loop["env"] == "CartPole-v1" and loop["episodes"] == 20 and loop["seeds"] == [1000, 1019]
    assert loop["float"]["returns"] == [500.0] * 20 and loop["artifact"]["returns"] == [500.0] * 20
    assert loop["agreement"] == {"equal": 1.0, "steps": 20 * 500} and loop["degraded"] is False
    assert report["size_bytes"] == out.stat().st_size
    assert 500 < report["arena_bytes"] < 20_000 and report["tflite_micro"]["equal_vs_litert"] == 1.0
    assert report["tflite_micro"]["closed_loop"]["artifact"]["returns"] == [500.0] * 20
    assert 0 < report["latency"]["median_invoke_us"] < 10_000
    assert "report p.tflite.report.json: return 500.0 +- 0.0 (LiteRT) vs float 500.0" in capsys.readouterr().out


def test_a_degraded_artifact_is_kept_as_rejected_unless_accepted(controller, tmp_path, capsys):
    """int8 calibrated on observations 1,000 times larger than the ones it meets: every real input rounds to the
    same int8 value, the cart is pushed one way, and the pole falls within a few dozen steps."""
    rows = np.random.default_rng(0).normal(size=(1000, 4)).astype(np.float32) * 1000.0
    np.savez(tmp_path / "far.npz", obs=rows)
    out = tmp_path / "p.tflite"
    argv = ["export", str(controller), "--quantize", "int8", "--calibrate-data", str(tmp_path / "far.npz")]
    assert main([*argv, "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "closed-loop return" in err and "kept as p.tflite.rejected" in err and "--accept-degraded" in err
    assert not out.exists()
    rejected = tmp_path / "p.tflite.rejected"
    assert rejected.is_file() and (tmp_path / "p.tflite.rejected.metadata.json").is_file()
    report = _report(rejected)
    assert report["closed_loop"]["degraded"] and report["closed_loop"]["artifact"]["mean"] < 100
    assert main([*argv, "--out", str(out), "--accept-degraded"]) == 0
    assert out.is_file() and _report(out)["closed_loop"]["degraded"] is True


@pytest.mark.slow
def test_int8_calibrated_in_the_env_passes_the_check(controller, tmp_path):
    """The return decides, not the agreement: this bang-bang controller hovers on its decision boundary, where
    int8's rounding flips about a third of its actions and the pole stays up all the same."""
    out = tmp_path / "p.tflite"
    assert main(["export", str(controller), "--quantize", "int8", "--out", str(out)]) == 0
    loop = _report(out)["closed_loop"]
    assert loop["artifact"]["mean"] >= loop["threshold"] and not loop["degraded"]
    assert loop["agreement"]["steps"] == 20 * 500 and loop["agreement"]["equal"] < 1.0


def test_without_an_env_the_report_says_no_closed_loop_check_ran(tmp_path, capsys):
    out = tmp_path / "p.onnx"
    zip_ = SAVED / "pendulum_vecnorm.zip"
    args = ["export", str(zip_), "--vecnormalize", str(SAVED / "pendulum_vecnorm.pkl"), "--format", "onnx"]
    assert main([*args, "--out", str(out)]) == 0
    report = _report(out)
    assert report["closed_loop"] is None and report["closed_loop_note"].startswith("no closed-loop check ran")
    assert report["arena_bytes"] is None and report["arena_meaning"].startswith("n/a")
    assert "no closed-loop check ran" in capsys.readouterr().out
    assert main([*args, "--out", str(out), "--calibrate-env", "Pendulum-v1", "--episodes", "2"]) == 0
    assert _report(out)["closed_loop"]["artifact"]["episodes"] == 2  # --calibrate-env names the report's env


def test_a_budget_writes_the_best_return_candidate_that_fits(controller, tmp_path, capsys):
    out = tmp_path / "p.tflite"
    assert (
        main(["export", str(controller), "--budget", "flash=8KiB,ram=16KiB", "--episodes", "2", "--out", str(out)]) == 0
    )
    budget = _report(out)["budget"]
    rows = {row["quantization"]: row for row in budget["candidates"]}
    assert set(rows) == {"float32", "float16", "dynamic", "int8"}
    chosen = next(row for row in budget["candidates"] if row["chosen"])
    fitting = [row for row in budget["candidates"] if row["fits"]]
    assert chosen["fits"] and chosen["size_bytes"] <= 8 * 1024 and chosen["arena_bytes"] <= 16 * 1024
    assert chosen["return"] == max(row["return"] for row in fitting)
    assert out.stat().st_size == chosen["size_bytes"]
    assert json.loads(out.with_name("p.tflite.metadata.json").read_text())["quantization"] == chosen["quantization"]
    assert "<- written" in capsys.readouterr().out


@pytest.mark.slow  # its choice alone, on reports: tests/exporter/test_budget.py
def test_an_impossible_budget_is_refused_with_the_closest_candidates_numbers(controller, tmp_path, capsys):
    out = tmp_path / "p.tflite"
    assert main(["export", str(controller), "--budget", "flash=1KiB", "--episodes", "2", "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "--budget: expected an artifact within flash 1,024 B, got none of 4 candidates; the closest" in err
    assert "flash over 1,024 B" in err and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".kppo_budget_")]  # the candidates are gone


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget", "flash=64KiB,rom=1"], "--budget: expected KEY=VALUE pairs of flash, ram, latency"),
        (["--budget", "flash=64 parsecs"], "flash: expected a size in B, KB, KiB, MB or MiB, got '64 parsecs'"),
        (["--budget", "latency=5kg"], "latency: expected a time in us, ms or s"),
        (["--budget", "ram=1,ram=2"], "ram given twice"),
        (["--budget", "flash=0"], "flash: expected a positive amount"),
        (["--budget", "flash=1KiB", "--quantize", "int8"], "expected no --quantize and --format tflite"),
        (["--episodes", "1"], "--episodes: expected an integer >= 2"),
        (["--calibrate-data", "x.npz"], "--calibrate-data: only for --quantize int8 or --budget"),
    ],
)
def test_bad_report_and_budget_flags_are_one_line(controller, argv, message, tmp_path, capsys):
    assert main(["export", str(controller), *argv, "--out", str(tmp_path / "p.tflite")]) == 2
    assert message in _one_line(capsys)
    assert not list(tmp_path.iterdir())
