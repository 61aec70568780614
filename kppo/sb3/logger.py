"""A Stable-Baselines3-style logger: `record(key, value)` then `dump(step)` to stdout and/or TensorBoard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kppo._tf import tf


class Logger:
    """Collects scalars between dumps; prints SB3's table when `verbose >= 1` and writes TensorBoard events when
    `tensorboard_dir` is set."""

    def __init__(self, verbose: int = 0, tensorboard_dir: str | Path | None = None):
        self.verbose = verbose
        self.values: dict[str, Any] = {}
        self.tensorboard_dir = None if tensorboard_dir is None else str(tensorboard_dir)
        self._writer = None if tensorboard_dir is None else tf.summary.create_file_writer(self.tensorboard_dir)

    def record(self, key: str, value: Any) -> None:
        self.values[key] = value

    def dump(self, step: int) -> None:
        if self._writer is not None:
            with self._writer.as_default():
                for key, value in self.values.items():
                    if isinstance(value, (int, float)):
                        tf.summary.scalar(key, value, step=step)
            self._writer.flush()
        if self.verbose >= 1 and self.values:
            print(format_table(self.values), flush=True)
        self.values = {}

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


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


def next_run_dir(root: str | Path, name: str) -> Path:
    """root/name_N with N one more than the largest existing (SB3's tensorboard run naming)."""
    root = Path(root)
    taken = [int(p.name.rsplit("_", 1)[1]) for p in root.glob(f"{name}_*") if p.name.rsplit("_", 1)[1].isdigit()]
    return root / f"{name}_{max(taken, default=0) + 1}"
