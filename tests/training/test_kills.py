"""SIGKILL at random moments of a `kppo train` run, then `--resume`, again and again (issue 39): the run that finishes
equals an uninterrupted one in its final weights, metrics.csv, TensorBoard scalars and summary.json (all but their
wall-time columns): no row lost or repeated. Checkpoints are saved every iteration, so many kills land inside a save
(counted by the partial `ckpt-N_temp` folders they leave); the previous checkpoint must then load.

`slow`: each kill costs a fresh process. KPPO_KILLS sets how many (50 by default); the counts are printed."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

KILLS = int(os.environ.get("KPPO_KILLS", "50"))
SETTINGS = [
    "total_timesteps=20480",  # 80 iterations of 4 x 64 steps, 8 rounds
    "num_envs=4",
    "num_steps=64",
    "eval_freq=8",
    "num_eval_envs=2",
    "iterations_per_call=1",
    "checkpoint_every=1",
    "num_hidden_units=64",
]


def _command(run: Path, resume: bool) -> list[str]:
    base = [sys.executable, "-m", "kppo.cli.main", "train"]
    if resume:
        return [*base, "--resume", str(run), "--quiet", "--no-export"]
    sets = [arg for setting in SETTINGS for arg in ("--set", setting)]
    return [*base, "cartpole", "--out", str(run), "--quiet", "--no-export", *sets]


def _start(run: Path, resume: bool) -> subprocess.Popen:
    return subprocess.Popen(_command(run, resume), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _has_checkpoint(run: Path) -> bool:
    return (run / "checkpoints" / "checkpoint").is_file()


def _csv(path: Path) -> dict[str, list[float]]:
    rows = list(csv.DictReader(path.open()))
    return {name: [float(r[name]) for r in rows] for name in rows[0] if not name.startswith("time/")}


def _scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    return {
        tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
        for tag in events.Tags()["tensors"]
        if not tag.startswith("time/")
    }


def _summary(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    return {k: v for k, v in summary.items() if not k.startswith("wall_") and k != "steps_per_s"}


def _weights(run: Path) -> dict[str, np.ndarray]:
    from kppo._tf import tf

    reader = tf.train.load_checkpoint(str(run / "agent" / "weights" / "ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _same(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys(), what
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=f"{what}: {key}")


def _kill_until_done(run: Path, lifetime: float, rng: random.Random) -> dict[str, int]:
    """Starts (or resumes) the run and SIGKILLs it at a random moment, KILLS times; then lets it finish."""
    counts = {"kills": 0, "in_a_save": 0, "before_a_checkpoint": 0, "restarts": 0}
    while True:
        resume = _has_checkpoint(run)
        process = _start(run, resume)
        counts["restarts"] += 1
        if counts["kills"] == KILLS:
            _, err = process.communicate(timeout=900)
            assert process.returncode == 0, err[-3000:]
            return counts
        time.sleep(rng.uniform(0.2, lifetime))
        if process.poll() is not None:  # finished before the kill: start the run over, killing again
            _, err = process.communicate()
            assert process.returncode == 0, err[-3000:]
            shutil.rmtree(run)
            continue
        process.kill()
        _, err = process.communicate()
        assert process.returncode == -9, err[-3000:]
        counts["kills"] += 1
        counts["in_a_save"] += bool(list((run / "checkpoints").glob("*_temp*")))
        counts["before_a_checkpoint"] += not _has_checkpoint(run)


@pytest.mark.slow
def test_a_run_killed_at_random_moments_and_resumed_ends_as_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "reference"
    t0 = time.perf_counter()
    done = subprocess.run(_command(reference, False), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lifetime = time.perf_counter() - t0
    run = tmp_path / "killed"
    counts = _kill_until_done(run, lifetime, random.Random(0))
    print(f"\nSIGKILLs: {counts} (a process lives {lifetime:.1f} s uninterrupted)")
    _same(_weights(reference), _weights(run), "weights")
    _same(_csv(reference / "metrics.csv"), _csv(run / "metrics.csv"), "metrics.csv")
    _same(_scalars(reference), _scalars(run), "tensorboard")
    assert _summary(reference) == _summary(run)
    assert counts["kills"] == KILLS
