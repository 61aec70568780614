"""Callbacks on the timestep count, as Stable-Baselines3 2.x ships them: `EveryNTimesteps`, `LogEveryNTimesteps`,
`ProgressBarCallback` (and the rich progress bar it draws, `progress_bar`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kppo.callbacks.base import BaseCallback, ConvertCallback, EventCallback


class EveryNTimesteps(EventCallback):
    """Runs `callback` (its `parent` is this callback) whenever at least `n_steps` timesteps have passed since it
    last ran (SB3: counted from 0, so the first run is at the first step with `num_timesteps >= n_steps`).

    Timesteps are `model.num_timesteps` (all sub-envs together), so the child runs at the same points of training
    whatever the number of envs, unlike `n_calls`-based frequencies.

    Args:
        n_steps: timesteps between two runs of `callback` (<= 0: every step, as SB3).
        callback: the callback to run (a `BaseCallback`; a callable or list is converted by `make_callback`).
    """

    def __init__(self, n_steps: int, callback: BaseCallback):
        super().__init__(callback)
        self.n_steps = n_steps
        self.last_time_trigger = 0

    def _on_step(self) -> bool:
        if self.num_timesteps - self.last_time_trigger >= self.n_steps:
            self.last_time_trigger = self.num_timesteps
            return self._on_event()
        return True


class LogEveryNTimesteps(EveryNTimesteps):
    """Dumps the model's logger every `n_steps` timesteps (SB3's `model.dump_logs()`): through `model.dump_logs()`
    when the model has it; otherwise `time/total_timesteps` and, from `model.ep_info_buffer` when it holds episodes,
    `rollout/ep_rew_mean` and `rollout/ep_len_mean` are recorded on `model.logger`, then `logger.dump(step)`.

    Args:
        n_steps: timesteps between two dumps.

    Raises:
        RuntimeError: (one line, at `init_callback`) when the model has neither `dump_logs` nor a logger (as
            `kppo.train`'s model: its metrics go to `PPOResult.metrics`).
    """

    def __init__(self, n_steps: int):
        super().__init__(n_steps, ConvertCallback(self._log_data))

    def _init_callback(self) -> None:
        if not callable(getattr(self.model, "dump_logs", None)) and self.logger is None:
            raise RuntimeError(
                f"LogEveryNTimesteps: {type(self.model).__name__} has no logger to dump (model.logger is None); "
                "use it with kppo.PPO"
            )

    def _log_data(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        del locals_, globals_
        dump_logs = getattr(self.model, "dump_logs", None)
        if callable(dump_logs):
            dump_logs()
            return True
        logger = self.logger
        episodes = list(getattr(self.model, "ep_info_buffer", None) or [])
        if episodes:
            logger.record("rollout/ep_rew_mean", float(np.mean([episode["r"] for episode in episodes])))
            logger.record("rollout/ep_len_mean", float(np.mean([episode["l"] for episode in episodes])))
        logger.record("time/total_timesteps", int(self.num_timesteps))
        logger.dump(step=self.num_timesteps)
        return True


class ProgressBarCallback(BaseCallback):
    """Draws a progress bar over the timesteps of this `learn` / `train` call (rich; SB3 draws it with tqdm.rich).

    The bar's total is `locals["total_timesteps"] - model.num_timesteps` at `on_training_start`; every `on_step`
    advances it by the timesteps taken since the last one (SB3: `training_env.num_envs`, the same on the host path;
    also right where one `on_step` covers a whole compiled rollout).
    """

    def __init__(self) -> None:
        super().__init__()
        self.pbar: Any = None
        self._counted = 0

    def _on_training_start(self) -> None:
        self._counted = int(self.model.num_timesteps)
        self.pbar = progress_bar(int(self.locals["total_timesteps"]) - self._counted)

    def _on_step(self) -> bool:
        steps = int(self.model.num_timesteps)
        if self.pbar is not None:
            self.pbar.update(steps - self._counted)
        self._counted = steps
        return True

    def _on_training_end(self) -> None:
        if self.pbar is not None:
            self.pbar.close()  # kept (closed) until the next training starts, as SB3 keeps its bar


class _Bar:
    """`update(n)` and `close()` over one task of a started `rich.progress.Progress`."""

    def __init__(self, progress: Any, total: int):
        self.progress = progress
        self.task = progress.add_task("learn", total=total)

    def update(self, n: int) -> None:
        """Advances the bar by `n` steps."""
        self.progress.update(self.task, advance=n)

    def close(self) -> None:
        """Draws the bar a last time and stops it."""
        self.progress.refresh()
        self.progress.stop()


def progress_bar(total: int) -> _Bar:
    """A rich progress bar over `total` steps, started, with `update(n)` and `close()`."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("steps"), BarColumn(), TextColumn("{task.completed}/{task.total}"), TimeRemainingColumn()
    )
    progress.start()
    return _Bar(progress, total)
