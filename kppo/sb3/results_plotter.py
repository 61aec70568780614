"""SB3's `stable_baselines3.common.monitor.load_results` and `results_plotter.ts2xy`: the episodes `Monitor` /
`VecMonitor` wrote to `*monitor.csv` as one pandas DataFrame, and the (x, y) series SB3's plots draw from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from kppo.core.errors import ArgumentError
from kppo.vec_envs.monitor import EXT

__all__ = ["X_EPISODES", "X_TIMESTEPS", "X_WALLTIME", "LoadMonitorResultsError", "load_results", "ts2xy"]

X_TIMESTEPS = "timesteps"
X_EPISODES = "episodes"
X_WALLTIME = "walltime_hrs"


class LoadMonitorResultsError(Exception):
    """No monitor file where `load_results` looked (SB3's exception)."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as err:  # pandas is SB3's dependency, not kppo's
        raise ImportError("load_results: needs pandas (pip install pandas), as SB3's does") from err
    return pandas


def _read(path: Path, pandas: Any) -> tuple[Any, float]:
    """One monitor file: its episodes (wall times made absolute) and its `t_start`."""
    with open(path) as file:
        first = file.readline()
        if not first.startswith("#"):
            raise LoadMonitorResultsError(f"{path}: expected a monitor file's '#{{...}}' header line, got {first!r}")
        t_start = float(json.loads(first[1:])["t_start"])
        frame = pandas.read_csv(file, index_col=None)
    frame["t"] += t_start
    return frame, t_start


def load_results(path: str | Path) -> Any:
    """Every `*monitor.csv` in the folder `path` as one DataFrame (`r`, `l`, `t` and any info keys), ordered by wall
    time, `t` in seconds since the earliest file's start (SB3's `load_results`)."""
    pandas = _pandas()
    files = sorted(Path(path).glob(f"*{EXT}"))
    if not files:
        raise LoadMonitorResultsError(f"No monitor files of the form *{EXT} found in {path}")
    read = [_read(file, pandas) for file in files]
    frame = pandas.concat([f for f, _ in read])
    frame = frame.sort_values("t").reset_index()
    frame["t"] -= min(t for _, t in read)
    return frame


def ts2xy(data_frame: Any, x_axis: str) -> tuple[np.ndarray, np.ndarray]:
    """(x, episode returns): x the timesteps so far (cumulative lengths), the episode index, or wall hours."""
    returns = data_frame.r.values
    if x_axis == X_TIMESTEPS:
        return np.cumsum(data_frame.l.values), returns
    if x_axis == X_EPISODES:
        return np.arange(len(data_frame)), returns
    if x_axis == X_WALLTIME:
        return data_frame.t.values / 3600.0, returns
    raise ArgumentError(f"x_axis: expected one of {[X_TIMESTEPS, X_EPISODES, X_WALLTIME]}, got {x_axis!r}")
