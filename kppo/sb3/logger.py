"""A Stable-Baselines3-style logger: `record(key, value)` then `dump(step)` to stdout and/or TensorBoard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kppo._tf import tf
from kppo.core.errors import ArgumentError


class HParam:
    """SB3's `HParam`: hyperparameters and the metrics TensorBoard's HPARAMS tab shows beside them, recorded as
    `logger.record("hparams", HParam(hparams, metrics), exclude=("stdout", "log", "json", "csv"))`."""

    def __init__(self, hparam_dict: dict[str, Any], metric_dict: dict[str, float]):
        if not metric_dict:
            raise ArgumentError(
                "metric_dict: expected at least one metric (TensorBoard shows hparams only beside one), got {}"
            )
        self.hparam_dict, self.metric_dict = dict(hparam_dict), dict(metric_dict)


class Logger:
    """Collects values between dumps; prints SB3's table when `verbose >= 1` and writes TensorBoard events when
    `tensorboard_dir` is set. `record(key, value, exclude)` as SB3's: `exclude` names outputs ("stdout", "log",
    "tensorboard", ...) the value skips; an `HParam` goes to TensorBoard's hparams only."""

    def __init__(self, verbose: int = 0, tensorboard_dir: str | Path | None = None):
        self.verbose = verbose
        self.values: dict[str, Any] = {}
        self.excluded: dict[str, tuple[str, ...]] = {}
        self.tensorboard_dir = None if tensorboard_dir is None else str(tensorboard_dir)
        self._writer = None if tensorboard_dir is None else tf.summary.create_file_writer(self.tensorboard_dir)

    def record(self, key: str, value: Any, exclude: str | tuple[str, ...] | None = None) -> None:
        self.values[key] = value
        self.excluded[key] = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())

    def _to(self, output: str) -> dict[str, Any]:
        return {k: v for k, v in self.values.items() if output not in self.excluded.get(k, ())}

    def dump(self, step: int) -> None:
        if self._writer is not None:
            with self._writer.as_default():
                for key, value in self._to("tensorboard").items():
                    if isinstance(value, HParam):
                        _write_hparams(value, step)
                    elif isinstance(value, (int, float)):
                        tf.summary.scalar(key, value, step=step)
            self._writer.flush()
        shown = {k: v for k, v in self._to("stdout").items() if not isinstance(v, HParam)}
        if self.verbose >= 1 and shown:
            print(format_table(shown), flush=True)
        self.values, self.excluded = {}, {}

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def _write_hparams(value: HParam, step: int) -> None:
    """TensorBoard's hparams summary (values other than bool / int / float / str as their repr) and its metrics."""
    from tensorboard.plugins.hparams import api as hparams_api

    plain = {k: v if isinstance(v, (bool, int, float, str)) else repr(v) for k, v in value.hparam_dict.items()}
    hparams_api.hparams(plain)
    for name, metric in value.metric_dict.items():
        tf.summary.scalar(name, float(metric), step=step)


def format_table(values: dict[str, Any]) -> str:
    """SB3's console table: sections by key prefix ("rollout/", "time/", "train/")."""
    rows: list[tuple[str, str]] = []
    section = None
    for key in sorted(values, key=lambda k: (k.split("/")[0], k)):
        prefix, _, name = key.partition("/")
        if prefix != section:
            rows.append((f"{prefix}/", ""))
            section = prefix
        value = values[key]
        text = f"{value:<8.3g}" if isinstance(value, float) else str(value)
        rows.append((f"    {name}", text))
    key_width = max(len(k) for k, _ in rows)
    value_width = max(len(v) for _, v in rows)
    line = "-" * (key_width + value_width + 7)
    body = [f"| {k:<{key_width}} | {v:<{value_width}} |" for k, v in rows]
    return "\n".join([line, *body, line])


def next_run_dir(root: str | Path, name: str, reset_num_timesteps: bool = True) -> Path:
    """root/name_N with N one more than the largest existing (SB3's tensorboard run naming); with
    `reset_num_timesteps=False` the largest existing itself (SB3's `configure_logger`: a continued `learn` logs on
    in its run, `PPO_1`, not a new `PPO_2`; name_0 when there is none, as SB3's)."""
    root = Path(root)
    taken = [int(p.name.rsplit("_", 1)[1]) for p in root.glob(f"{name}_*") if p.name.rsplit("_", 1)[1].isdigit()]
    latest = max(taken, default=0)
    return root / f"{name}_{latest if not reset_num_timesteps else latest + 1}"
