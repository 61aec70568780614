"""What `kppo train` runs share (one agent or a population): the run directory check, the progress bar, and the
signal handlers that turn SIGINT/SIGTERM into a checkpoint and a clean stop."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def printable(text: str) -> str:
    """`text` (a name the user gave, another library's message) with each character that is not printable escaped as
    in a repr: a line break of any kind (`\\x1e` and `\\u2028` included) would split kppo's one-line error."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def writable_dir(path: Path, option: str) -> Path:
    """Creates `path` (and parents); a one-line error naming `option` when it is a file or cannot be created."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option}: expected a directory, got {str(path)!r} (an existing file)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".kppo-write-test-{time.time_ns()}"
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise ValueError(
            f"{option}: expected a directory kppo can create and write, got {str(path)!r} ({err.strerror})"
        ) from None
    return path


class TrainingProgress:
    """A live bar: steps, steps/s, last evaluation return, ETA (rich); silent when quiet."""

    def __init__(self, total: int, quiet: bool):
        self.quiet, self.total, self.last_eval = quiet, total, float("nan")
        if quiet:
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("[bold]kppo"),
            BarColumn(),
            TextColumn("{task.completed:,}/{task.total:,} steps"),
            TextColumn("{task.fields[rate]:>9,.0f} steps/s"),
            TextColumn("eval {task.fields[eval]}"),
            TimeRemainingColumn(),
        )
        self.task = self.bar.add_task("train", total=total, rate=0.0, eval="-")
        self.start = time.perf_counter()
        self.bar.start()

    def steps(self, done: int) -> None:
        if not self.quiet:
            rate = done / max(time.perf_counter() - self.start, 1e-9)
            self.bar.update(self.task, completed=done, rate=rate)

    def evaluated(self, metrics: dict) -> None:
        if not self.quiet:
            returns = np.asarray(metrics["eval/mean_returns"])  # a population: one per member
            text = f"{returns.mean():.1f}" + (f" (min {returns.min():.1f} of {returns.size})" if returns.ndim else "")
            self.bar.update(self.task, eval=text)

    def close(self) -> None:
        if not self.quiet:
            self.bar.stop()


def stop_on_signals() -> dict:
    """SIGINT/SIGTERM set a flag that training polls after every compiled call (then it checkpoints and stops)."""
    import signal

    received: dict[str, int] = {}

    def handler(signum, frame):
        del frame
        received["signal"] = signum

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    return received
