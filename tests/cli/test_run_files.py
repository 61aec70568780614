"""The files of a run directory besides the agent (kppo/cli/reporting.py): each is written atomically, so a failed
write keeps the previous file and names the one it could not write, and a rerun (a resume) replaces the TensorBoard
folder rather than adding a second copy of its steps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util

from kppo.cli import reporting
from kppo.core import files
from kppo.core.files import atomic_dir
from tests.helpers.faults import file_size_limit

METRICS = {
    "train/total_steps": np.array([64, 128, 192]),
    "eval/mean_returns": np.array([10.0, 20.0, 30.0]),
    "eval/std_returns": np.array([1.0, 2.0, 3.0]),
    "rollout/ep_rew_mean": np.array([9.0, 19.0, 29.0]),
}


def _scalars(directory):
    events = EventAccumulator(str(directory), size_guidance={"tensors": 0})
    events.Reload()
    return [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events.Tensors("eval/mean_returns")]


def test_a_rerun_replaces_the_tensorboard_folder_and_repeats_no_step(tmp_path):
    reporting.write_tensorboard(tmp_path / "tb", METRICS)
    reporting.write_tensorboard(tmp_path / "tb", METRICS)  # a resumed run writes the whole history again
    assert len(list((tmp_path / "tb").iterdir())) == 1
    assert _scalars(tmp_path / "tb") == [(64, 10.0), (128, 20.0), (192, 30.0)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tb"]


@pytest.mark.parametrize(
    "write, name",
    [
        (lambda d, m: reporting.write_metrics_csv(d / "metrics.csv", m), "metrics.csv"),
        (lambda d, m: reporting.plot_learning_curve(d / "learning_curve.png", m, "t"), "learning_curve.png"),
        (lambda d, m: reporting.write_tensorboard(d / "tensorboard", m), "tensorboard"),
    ],
)
def test_a_write_past_the_file_size_limit_names_the_file_and_keeps_the_previous_one(tmp_path, write, name):
    write(tmp_path, METRICS)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # past the limit in every format: 6,000 rows of noise (a tiled history would draw the same three points again,
    # a PNG about as large as the first)
    noise = np.random.default_rng(0).normal(size=(len(METRICS), 6000))
    long = {k: row * 10 + 20 for k, row in zip(METRICS, noise, strict=True)}
    long["train/total_steps"] = np.arange(1, 6001) * 64
    with file_size_limit(len(max(before.values(), key=len)) + 1), pytest.raises(OSError) as excinfo:
        write(tmp_path, long)
    message = str(excinfo.value)
    assert message == f"{tmp_path / name}: could not write it (File too large); what it held before is kept"
    assert {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_folder_whose_rename_fails_is_put_back(tmp_path, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("kept")
    real, calls = os.replace, []

    def replace(src, dst):  # the old folder moves aside, then the new one's rename fails
        calls.append((Path(src).name, Path(dst).name))
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(OSError) as excinfo, atomic_dir(tmp_path / "out") as staging:
        (staging / "new").write_text("new")
    assert (
        str(excinfo.value) == f"{tmp_path / 'out'}: could not write it (Permission denied); what it held before is kept"
    )
    assert calls[0] == ("out", ".out.old") and calls[2] == (".out.old", "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["old"]
