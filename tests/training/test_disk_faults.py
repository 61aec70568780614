"""Writes that fail (issue 39): a file-size limit (RLIMIT_FSIZE: Python ignores SIGXFSZ, so a write past it fails
with EFBIG) or a full disk while checkpointing, saving or exporting. The run reports it in one line, what was
written before stays intact, and a rerun resumes."""

from __future__ import annotations

import contextlib
import subprocess
import sys

import numpy as np
import pytest

import kppo
from kppo.agent import checkpoint
from kppo.cli.main import main
from tests.helpers.faults import file_size_limit, limited

TINY = dict(num_envs=4, num_steps=16, total_timesteps=4 * 16 * 4, eval_freq=2, num_eval_envs=2, num_hidden_units=64)
LIMIT = 20_000  # bytes: below a checkpoint of 64-unit networks and their Adam moments, above config.yaml


def _weights(agent) -> list[np.ndarray]:
    return [v.numpy() for v in agent.actor.variables + agent.critic.variables]


CONFIG = kppo.Config(**TINY, iterations_per_call=1)


@pytest.fixture(scope="module")
def trained():
    """An uninterrupted run of CONFIG (4 iterations): the run a resume must repeat, and an agent to save and export."""
    return kppo.train("CartPole-v1", CONFIG)


def test_a_checkpoint_past_the_file_size_limit_is_one_line_keeps_the_previous_and_a_rerun_resumes(tmp_path, trained):
    config, full = CONFIG, trained
    rounds = []
    limit = contextlib.ExitStack()

    def on_eval(row):  # after the first round's row: its checkpoint (iteration 2) still fits, the next one does not
        rounds.append(row)
        if len(rounds) == 2:
            limit.enter_context(file_size_limit(LIMIT))

    with limit, pytest.raises(OSError) as excinfo:
        kppo.train("CartPole-v1", config, checkpoint_dir=tmp_path, on_eval=lambda row: on_eval(row))
    message = str(excinfo.value)
    assert message == (
        f"checkpoint_dir: could not write checkpoint 4 into {str(tmp_path)!r} (File too large); "
        "the checkpoints before it are kept"
    )
    assert not list(tmp_path.glob("*_temp*"))  # the partial write is removed
    resumed = kppo.train("CartPole-v1", config, checkpoint_dir=tmp_path, resume=True)
    for a, b in zip(_weights(full.agent), _weights(resumed.agent)):
        np.testing.assert_array_equal(a, b)
    for name, values in full.metrics.items():
        if not name.startswith("time/"):
            np.testing.assert_array_equal(resumed.metrics[name], values, err_msg=name)


def test_saving_an_agent_past_the_limit_is_one_line_and_leaves_the_previous_save(tmp_path, trained):
    stats = trained.runner_state.rollout
    args = (trained.config.to_yaml(), trained.agent, stats.obs_stats, stats.return_stats)
    spaces = (trained.observation_space, trained.action_space)
    checkpoint.save(tmp_path / "agent", *args, *spaces)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "agent").rglob("*") if p.is_file()}
    with file_size_limit(2_000), pytest.raises(OSError) as excinfo:
        checkpoint.save(tmp_path / "agent", *args, *spaces)
    assert "\n" not in str(excinfo.value) and "agent" in str(excinfo.value)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "agent").rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent"]  # no staging folder left


def test_exporting_past_the_limit_is_one_line_and_leaves_the_previous_artifact(tmp_path, trained):
    path = tmp_path / "policy.tflite"
    kppo.export(trained, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with file_size_limit(2_000), pytest.raises((OSError, ValueError)) as excinfo:
        kppo.export(trained, path)
    assert "\n" not in str(excinfo.value) and "policy.tflite" in str(excinfo.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.slow  # a fresh process and two runs of 256-unit networks; the in-process test above stays in the suite
def test_the_cli_reports_a_failed_checkpoint_in_one_line_and_a_rerun_trains(tmp_path):
    run = tmp_path / "run"
    # 256 units: a checkpoint (~1.6 MB) is past the limit, the learning curve's PNG is not
    argv = ["train", "cartpole", "--out", str(run), "--quiet", "--no-export", "--set", "num_hidden_units=256"]
    argv += ["--set", "total_timesteps=1024", "--set", "num_envs=4", "--set", "num_steps=64", "--set", "eval_freq=2"]
    cmd = [sys.executable, "-m", "kppo.cli.main", *argv]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=limited(200_000))
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.startswith("kppo train")]
    assert lines == [line for line in out.stderr.splitlines() if line.strip()], out.stderr[-2000:]
    assert lines[0].startswith("kppo train: error: checkpoint_dir: could not write checkpoint 2 into ")
    assert lines[0].endswith("(File too large); the checkpoints before it are kept")
    assert main(argv) == 0  # the same run, without the limit
