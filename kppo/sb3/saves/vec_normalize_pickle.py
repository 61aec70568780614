"""Stable-Baselines3's `vec_normalize.pkl` (`VecNormalize.save`: the wrapper pickled, without its env) read as data
through `kppo.sb3.saves.safe_pickle`: its settings and its `obs_rms` / `ret_rms` statistics as numpy arrays.

The file holds a `stable_baselines3.common.vec_env.vec_normalize.VecNormalize` object whose state is a dict of plain
values, `RunningMeanStd` objects (mean, var, count), numpy arrays and scalars (`numpy._core.multiarray._reconstruct`,
`numpy.dtype`, `scalar`) and the env's gymnasium spaces with their seeded RNGs. Those names are read as records and
data; nothing is imported. Any other name is refused in one line (`PickleRefused`), as is a state without the
statistics (a reward-only wrapper, `norm_obs=False`, has no `obs_rms`, as SB3 builds none: read as None).
Dict observations (one `RunningMeanStd` per key) are refused: kppo's flat statistics for them are not built from
this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kppo.core.errors import NotSupportedError
from kppo.sb3.saves.safe_pickle import Builder, Instance, describe, read_pickle
from kppo.sb3.saves.sb3_save import SPACE_NAMES

VEC_NORMALIZE = ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize")
RUNNING_MEAN_STD = ("stable_baselines3.common.running_mean_std", "RunningMeanStd")
NAMES: dict[tuple[str, str], Builder | None] = {**SPACE_NAMES, VEC_NORMALIZE: None, RUNNING_MEAN_STD: None}
#: The settings read from the wrapper's state, with SB3's defaults for files without them.
SETTINGS = {
    "training": True,
    "norm_obs": True,
    "norm_reward": True,
    "clip_obs": 10.0,
    "clip_reward": 10.0,
    "gamma": 0.99,
    "epsilon": 1e-8,
    "norm_obs_keys": None,
}


class Statistics(NamedTuple):
    """SB3's `RunningMeanStd` as numpy."""

    mean: np.ndarray
    var: np.ndarray
    count: float  # type: ignore[assignment]  # SB3's attribute name, shadowing tuple.count on purpose


def is_pickle(path: str | Path) -> bool:
    """True when the file starts like a pickle of protocol 2 or later (PROTO opcode)."""
    try:
        with open(path, "rb") as file:
            return file.read(1) == b"\x80"
    except OSError:
        return False


def _statistics(record: Any, source: str, name: str) -> Statistics:
    if isinstance(record, dict):
        raise NotSupportedError(
            f"{source}: {name} holds one RunningMeanStd per Dict key; kppo reads SB3's VecNormalize of Box observations"
        )
    if not (
        isinstance(record, Instance)
        and (record.cls.module, record.cls.name) == RUNNING_MEAN_STD
        and isinstance(record.state, dict)
    ):
        raise ValueError(f"{source}: {name}: expected SB3's RunningMeanStd, got {describe(record)}")
    state = record.state
    mean, var, count = state.get("mean"), state.get("var"), state.get("count")
    numeric = (np.ndarray, np.generic, float)  # a statistic of one value is a numpy scalar after SB3's update
    if not (isinstance(mean, numeric) and isinstance(var, numeric) and np.shape(mean) == np.shape(var)):
        raise ValueError(f"{source}: {name}: expected mean and var arrays of one shape, got {describe(mean)}")
    if not isinstance(count, numeric) or np.shape(count) != ():
        raise ValueError(f"{source}: {name}: expected a count, got {describe(count)}")
    return Statistics(np.asarray(mean, np.float64), np.asarray(var, np.float64), float(np.asarray(count)))


def read_vec_normalize(path: str | Path) -> tuple[dict[str, Any], Statistics | None, Statistics]:
    """(settings, obs_rms, ret_rms) of SB3's `vec_normalize.pkl` at `path` (see the module docstring); obs_rms is
    None for a reward-only wrapper (`norm_obs=False`), which SB3 saves without one."""
    source = repr(str(path))
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise ValueError(f"load_path: could not read {source} ({type(err).__name__})") from None
    obj = read_pickle(data, source, NAMES)
    if not (isinstance(obj, Instance) and (obj.cls.module, obj.cls.name) == VEC_NORMALIZE):
        raise ValueError(f"{source}: expected SB3's pickled VecNormalize, got {describe(obj)}")
    state = obj.state
    reward_only = isinstance(state, dict) and state.get("norm_obs") is False and "obs_rms" not in state
    if not isinstance(state, dict) or ("obs_rms" not in state and not reward_only) or "ret_rms" not in state:
        raise ValueError(f"{source}: expected SB3's VecNormalize state with obs_rms and ret_rms, got {describe(state)}")
    settings: dict[str, Any] = {key: state.get(key, default) for key, default in SETTINGS.items()}
    for key in ("clip_obs", "clip_reward", "gamma", "epsilon"):
        settings[key] = float(settings[key])
    for key in ("training", "norm_obs", "norm_reward"):
        settings[key] = bool(settings[key])
    obs_rms = None if reward_only else _statistics(state["obs_rms"], source, "obs_rms")
    return settings, obs_rms, _statistics(state["ret_rms"], source, "ret_rms")
