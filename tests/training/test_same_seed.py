"""Same seed, same run, across processes (issue 39): two fresh processes train the same cells of the capability
matrix (native and gymnasium envs x single runs and populations x MLP, LSTM, CNN and masked agents) and their final
weights are equal bit for bit. The default suite runs the MLP cells; `-m slow` runs all sixteen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.capabilities import cell_id, cells

ROOT = Path(__file__).resolve().parents[2]
ALL = [cell_id(c) for c in cells("single") + cells("population")]
FAST = ["native-single-mlp", "gymnasium-single-mlp"]


def _train_in_two_processes(tmp_path: Path, names: list[str]) -> tuple[Path, Path]:
    outs = [tmp_path / "a", tmp_path / "b"]
    env = {**os.environ, "PYTHONHASHSEED": "random"}  # nothing may depend on the hash seed either
    processes = []
    for out in outs:
        out.mkdir()
        command = [sys.executable, "-m", "tests.helpers.seed_weights", str(out), *names]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True))
    for process in processes:
        _, err = process.communicate(timeout=1800)
        assert process.returncode == 0, err[-3000:]
    return outs[0], outs[1]


def _check_equal(a: Path, b: Path, names: list[str]) -> None:
    for name in names:
        first, second = np.load(a / f"{name}.npz"), np.load(b / f"{name}.npz")
        assert sorted(first.files) == sorted(second.files), name
        differ = {key: float(np.max(np.abs(first[key] - second[key]))) for key in first.files}
        assert not any(differ.values()), f"{name}: { ({k: v for k, v in differ.items() if v}) }"


def test_two_processes_with_the_same_seed_train_the_same_mlp_weights(tmp_path):
    _check_equal(*_train_in_two_processes(tmp_path, FAST), FAST)


@pytest.mark.slow
def test_two_processes_with_the_same_seed_train_the_same_weights_in_every_cell(tmp_path):
    _check_equal(*_train_in_two_processes(tmp_path, ALL), ALL)
