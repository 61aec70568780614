"""Keras callbacks on the PPO loop, with Keras' hook semantics and an epoch = one rollout-update iteration.

`learn(callback=...)` and `kppo.train(callback=...)` take `keras.callbacks.Callback` objects beside (or mixed with)
Stable-Baselines3 callbacks. The loop calls, as `model.fit` does:

    on_train_begin(logs)                       once, before the first iteration
    on_epoch_begin(epoch)                      before each iteration's rollout (epoch: iterations done so far)
    on_train_batch_begin(0) / _end(0, logs)    once per iteration: its update, run as one compiled call
    on_epoch_end(epoch, logs)                  after the update
    on_train_end(logs)                         once, when training ends

`logs` are the iteration's training metrics under kppo's names (`kppo.training.metrics.METRICS`:
`train/total_loss`, `train/policy_loss`, `rollout/ep_rew_mean`, ...) plus Keras' `loss` (the total loss), so
`EarlyStopping(monitor="rollout/ep_rew_mean", mode="max")` and `TerminateOnNaN()` work unchanged. Setting
`self.model.stop_training = True` ends the run after the current iteration. What a callback sees as `self.model`
is `KerasModelView`: `stop_training`, the agent's Keras `optimizer`, its `layers`, `trainable_variables`,
`get_weights` / `set_weights` (so `EarlyStopping(restore_best_weights=True)` restores the best iteration's policy).

`BackupAndRestore(backup_dir)` becomes kppo's exact resume: a run checkpoints into `backup_dir` every epoch (or
every `save_freq` iterations) and, started again with a checkpoint there, continues from it bit for bit on
TF-native envs; the folder is removed at the end when `delete_checkpoint`. Gymnasium envs cannot save their state,
so there it is refused, as `ModelCheckpoint` is everywhere (it saves a Keras model: use
`kppo.callbacks.CheckpointCallback`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

import keras
import numpy as np

from kppo._tf import tf
from kppo.core.errors import first_line
from kppo.core.types import Diagnostics
from kppo.training.metrics import Progress, training_row

__all__ = ["Backup", "KerasCallbacks", "KerasModelView", "backup_of", "remove_backup", "split_callbacks"]


def split_callbacks(callback: Any) -> tuple[Any, list[keras.callbacks.Callback]]:
    """(the SB3 part, or None; the Keras callbacks) of what `callback=` takes: None, one callback, or a list mixing
    SB3 callbacks, functions and Keras callbacks."""
    if isinstance(callback, keras.callbacks.Callback):
        return None, [callback]
    if not isinstance(callback, (list, tuple)):
        return callback, []
    keras_part = [item for item in callback if isinstance(item, keras.callbacks.Callback)]
    if not keras_part:
        return callback, []
    rest = [item for item in callback if not isinstance(item, keras.callbacks.Callback)]
    return (rest or None), keras_part


class Backup(NamedTuple):
    """A `BackupAndRestore` as kppo's checkpointing: where, whether to resume, how often, whether to remove it."""

    directory: Path
    resume: bool
    every: int  # iterations between checkpoints
    delete: bool


def backup_of(callbacks: list[keras.callbacks.Callback], tf_native: bool) -> Backup | None:
    """The run's `BackupAndRestore` (at most one) as a `Backup`; one-line errors for what cannot run here."""
    for callback in callbacks:
        if isinstance(callback, keras.callbacks.ModelCheckpoint):
            raise ValueError(
                "callback: keras.callbacks.ModelCheckpoint saves a Keras model, not a PPO run; use "
                "kppo.callbacks.CheckpointCallback (or BackupAndRestore to resume a run)"
            )
    backups = [c for c in callbacks if isinstance(c, keras.callbacks.BackupAndRestore)]
    if not backups:
        return None
    if len(backups) > 1:
        raise ValueError(f"callback: expected at most one keras.callbacks.BackupAndRestore, got {len(backups)}")
    if not tf_native:
        raise ValueError(
            "callback: keras.callbacks.BackupAndRestore resumes a run exactly, which needs a TF-native env "
            "(gymnasium envs cannot save their state); use kppo.callbacks.CheckpointCallback and PPO.load"
        )
    backup = backups[0]
    every = 1 if backup.save_freq == "epoch" else int(backup.save_freq)
    if every < 1:
        raise ValueError(
            f"BackupAndRestore.save_freq: expected 'epoch' or a number of iterations >= 1, got {backup.save_freq!r}"
        )
    directory = Path(backup.backup_dir)
    resume = tf.train.latest_checkpoint(str(directory)) is not None
    return Backup(directory, resume, every, bool(backup.delete_checkpoint))


def remove_backup(backup: Backup | None, interrupted: bool) -> None:
    """Keras' `delete_checkpoint`: the backup goes when the run ended by itself (an interrupted one keeps it)."""
    if backup is not None and backup.delete and not interrupted:
        shutil.rmtree(backup.directory, ignore_errors=True)


class KerasModelView:
    """What a Keras callback sees as `self.model` during a PPO run (see the module docstring)."""

    def __init__(self, agent: Any):
        self._agent = agent
        self.stop_training = False
        self.built = True
        self.train_function = None  # TensorBoard(write_graph=True) writes no graph: the update is the runner's

    @property
    def optimizer(self) -> keras.optimizers.Optimizer:
        return self._agent.optimizer

    @property
    def layers(self) -> list:
        networks = [self._agent.actor, self._agent.critic] + ([self._agent.lstm] if self._agent.lstm else [])
        return [layer for net in networks for layer in getattr(net, "layers", [net])]

    @property
    def trainable_variables(self) -> list:
        return list(self._agent.variables)

    @property
    def metrics(self) -> list:
        return []  # Keras' monitor callbacks look here for a metric's direction: pass mode="min"/"max"

    def get_weights(self) -> list[np.ndarray]:
        return [np.array(v.numpy()) for v in self._agent.variables]

    def set_weights(self, weights: list[np.ndarray]) -> None:
        variables = self._agent.variables
        if len(weights) != len(variables):
            raise ValueError(f"set_weights: expected {len(variables)} arrays (the agent's), got {len(weights)}")
        for variable, value in zip(variables, weights):
            variable.assign(value)


class KerasCallbacks:
    """The run's Keras callbacks (BackupAndRestore excluded: `backup_of` turned it into checkpointing), called at the
    loop's points with Keras' hook names."""

    def __init__(self, callbacks: list[keras.callbacks.Callback], agent: Any, rollout_size: int):
        self.view = KerasModelView(agent)
        self.callbacks = [c for c in callbacks if not isinstance(c, keras.callbacks.BackupAndRestore)]
        self.rollout_size = rollout_size
        self.logs: dict[str, float] = {}
        for callback in self.callbacks:
            callback.set_model(self.view)

    def _each(self, event: str, *args: Any) -> None:
        for callback in self.callbacks:
            try:
                getattr(callback, event)(*args)
            except Exception as err:  # a user's callback: named, chained, re-raised
                raise RuntimeError(
                    f"callback: {type(callback).__name__}.{event} raised {type(err).__name__}{first_line(err)}; "
                    "training stopped (checkpoints and files written so far are kept)"
                ) from err

    def train_begin(self) -> None:
        self._each("on_train_begin", {})

    def epoch_begin(self, epoch: int) -> None:
        self._each("on_epoch_begin", epoch, {})
        self._each("on_train_batch_begin", 0, {})

    def epoch_end(self, epoch: int, diag: Diagnostics, wall_s: float, progress: Progress) -> bool:
        """The iteration's batch and epoch ends; True when a callback asked to stop."""
        row = training_row(diag, 1, self.rollout_size, wall_s, progress)
        self.logs = {"loss": float(row["train/total_loss"]), **{name: float(v) for name, v in row.items()}}
        self._each("on_train_batch_end", 0, dict(self.logs))
        self._each("on_epoch_end", epoch, dict(self.logs))
        return bool(self.view.stop_training)

    def train_end(self) -> None:
        self._each("on_train_end", dict(self.logs))
