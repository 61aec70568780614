"""Checkpoints of replicated runs restore in fresh processes: a 2-replica run resumed in another process, and two
MultiWorkerMirroredStrategy worker processes whose chief's checkpoint a mirrored process restores. The fresh
processes run worker.py."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import kppo

from .worker import resume_config, resume_digest

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")


def _worker(*args: str, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, str(WORKER), *args], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_a_two_replica_run_resumes_bit_identical_in_a_fresh_process(tmp_path):
    """Every replica's env state and RNG stream are checkpointed; a fresh process restores them and ends with the
    same weights, optimizer state and runner state as an uninterrupted run."""
    config = resume_config()
    full = resume_digest(kppo.train("Pendulum-v1", config, seed=0))
    calls = []
    stopped = kppo.train(
        "Pendulum-v1",
        config,
        seed=0,
        checkpoint_dir=str(tmp_path),
        should_stop=lambda: calls.append(1) or len(calls) == 4,
    )
    assert stopped.interrupted and int(stopped.runner_state.iteration) == 4
    resumed = _worker("resume", str(tmp_path))
    assert resumed["iteration"] == 6
    assert resumed["digest"] == full


def test_two_worker_processes_train_in_sync_and_the_chiefs_checkpoint_restores(tmp_path):
    """MultiWorkerMirroredStrategy: two real worker processes on 127.0.0.1 (free ports) train 4 iterations and end
    with identical weights and merged normalization moments; only the chief writes checkpoints, holding every
    replica's state, and a fresh process (2 logical CPUs, mirrored) restores it to the same weights."""
    checkpoint_dir = str(tmp_path / "ckpt")
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = {**os.environ, "TF_CONFIG": tf_config}
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), "cluster", checkpoint_dir, "multi_worker", "new"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outs[0]["digest"] == outs[1]["digest"]
    assert outs[0]["iteration"] == 4
    assert outs[0]["count"] == pytest.approx(1e-4 + 8 + 8 * 16 * 4)  # both workers' samples, counted once
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir() if p.name.startswith(".worker")) == []
    got = _worker(
        "cluster", checkpoint_dir, "mirrored", "resume", env={k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    )
    assert got["digest"] == outs[0]["digest"] and got["iteration"] == 4
