"""SIGKILL at random moments of a `kppo train` run, then `--resume`, again and again (issue 39): the run that finishes
equals an uninterrupted one in its final weights, metrics.csv, TensorBoard scalars and summary.json (all but their
wall-time columns): no row lost or repeated. Checkpoints are saved every iteration; the kills that land inside a save
are counted (by the partial `ckpt-N_temp` folders they leave).

A save of a small run takes milliseconds, so few random kills land inside one: the second test kills a process that
does nothing but save checkpoints of large networks (each save ~25 MB), so that nearly every kill lands inside a
save; the newest complete checkpoint must then restore bit for bit, through kppo's own restore.

`slow`: each kill costs a fresh process. KPPO_KILLS sets how many (50 by default, for each test); the counts are
printed."""

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
ROOT = Path(__file__).resolve().parents[2]
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


SAVER = """
import itertools, sys
from tests.training.test_kills import save_config, saved_values
from kppo.training.checkpointer import TrainingCheckpointer
from kppo.training.runners import make_runner

runner = make_runner(None, save_config())
checkpointer = TrainingCheckpointer(sys.argv[1], runner.agent, runner.state)
start = int(sys.argv[2])
for variable in runner.agent.variables:
    variable.assign(saved_values(variable, start))
for i in itertools.count(start):
    for variable in runner.agent.variables:  # one element a save: nearly all the time is spent saving
        variable[(0,) * variable.shape.rank].assign(float(i))
    print(f"saving {i}", flush=True)
    checkpointer.save(runner.state, [{"i": i}], i)
    print(f"saved {i}", flush=True)
"""


def save_config():
    import kppo

    return kppo.Config(num_envs=2, num_steps=8, num_minibatches=1, num_hidden_units=1024, jit_rollout=False)


def saved_values(variable, i: int):
    """What save number `i` writes into `variable`: i in its first element, (its index mod 1024) / 1024 elsewhere
    (exact in float32)."""
    from kppo._tf import tf

    size = int(variable.shape.num_elements())
    flat = tf.concat([[float(i)], tf.range(1, size, dtype=tf.float32) % 1024 / 1024.0], axis=0)
    return tf.reshape(flat, variable.shape)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _kill_inside_a_save(directory: Path, start: int, log: Path, rng: random.Random) -> str:
    """Starts a saver from save number `start`, waits for its first complete save, then SIGKILLs it a random moment
    later; the last line it printed ("saving N": inside a save, or "saved N")."""
    with log.open("w") as out, log.with_suffix(".err").open("w") as err:
        command = [sys.executable, "-c", SAVER, str(directory), str(start)]
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT)
    deadline = time.monotonic() + 300
    while not any(line.startswith("saved") for line in _lines(log)):
        assert process.poll() is None and time.monotonic() < deadline, log.with_suffix(".err").read_text()[-3000:]
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 1.0))
    process.kill()
    process.wait()
    return _lines(log)[-1]


@pytest.mark.slow
def test_a_kill_inside_a_checkpoint_save_leaves_the_previous_one_restoring_bit_for_bit(tmp_path):
    from kppo.training.checkpointer import TrainingCheckpointer
    from kppo.training.runners import make_runner

    runner = make_runner(None, save_config())
    directory, rng, start = tmp_path / "checkpoints", random.Random(1), 1
    counts = {"kills": 0, "in_a_save": 0, "partial_left": 0, "restored_the_one_in_progress": 0}
    for _ in range(KILLS):
        last = _kill_inside_a_save(directory, start, tmp_path / "saver.log", rng)
        counts["kills"] += 1
        counts["in_a_save"] += last.startswith("saving")
        partial = list(directory.glob("*_temp*"))
        assert len(partial) <= 1, partial  # the killed save's; an earlier one's is removed by the next save
        counts["partial_left"] += bool(partial)
        restored = TrainingCheckpointer(directory, runner.agent, runner.state).restore_latest()
        assert restored is not None
        (row,) = restored.rows
        finished = int(last.split()[1]) - last.startswith("saving")  # the newest save known to be complete
        assert row["i"] in (finished, finished + 1), (last, row)  # + 1: killed after the rename, before "saved"
        counts["restored_the_one_in_progress"] += row["i"] == finished + 1
        for variable in runner.agent.variables:
            np.testing.assert_array_equal(variable.numpy(), saved_values(variable, row["i"]).numpy())
        start = row["i"] + 1
    print(f"\nSIGKILLs inside saves: {counts}")
    assert counts["kills"] == KILLS and counts["in_a_save"] >= KILLS // 2
