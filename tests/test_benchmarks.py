"""The benchmark scripts still run against the current API (tiny budgets; what they measure is not checked here)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench(script: str, *args: str, timeout: int = 300) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _rows(table: str, first_cell: str) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("|")]
    return [row for row in rows if row[0] == first_cell]


def test_cartpole_benchmark_runs_kppo():
    (row,) = _rows(_bench("cartpole.py", "--frameworks", "kppo", "--timesteps", "4096"), "kppo")
    assert row[2] == "4,096"  # env_steps


def test_gym_benchmark_runs_kppo():
    (row,) = _rows(_bench("gym_ppo.py", "--frameworks", "kppo", "--tasks", "cartpole", "--timesteps-scale", "0.01"),
                   "kppo")
    assert int(row[2].replace(",", "")) > 0


def test_jit_flags_benchmark_measures_all_four_combinations():
    table = _bench("jit_flags.py", "--iterations", "1", "--repeats", "1")
    assert len(_rows(table, "True")) == 2 and len(_rows(table, "False")) == 2


def test_env_scaling_benchmark_runs():
    (row,) = _rows(_bench("env_scaling.py", "--envs", "64", "--steps", "4", "--iterations", "1"), "64")
    assert row[1] == "CPU"


@pytest.mark.distributed
def test_replicas_benchmark_runs_one_and_two_replicas():
    table = _bench("replicas.py", "--timesteps", "4096")
    assert _rows(table, "1") and _rows(table, "2")


def test_learning_benchmark_reports_every_seed(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text("env: CartPole-v1\nnum_envs: 4\nnum_steps: 16\ntotal_timesteps: 256\neval_freq: 1\n"
                      "num_eval_envs: 2\nnum_hidden_units: 8\n")
    table = _bench("learning.py", str(config), "--seeds", "0", "1", "--threshold", "10")
    assert _rows(table, "0") and _rows(table, "1")


def test_digests_runs_and_names_unknown_runs():
    line = _bench("digests.py", "ppo").strip().splitlines()[-1]
    assert '"run": "ppo"' in line and '"digest": "' in line
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "digests.py"), "nope"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "digests: expected runs among" in bad.stderr
