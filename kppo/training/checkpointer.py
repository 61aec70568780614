"""Checkpoints of a run: everything it needs to continue exactly (networks, optimizer, runner state, metric rows),
written atomically by `tf.train.CheckpointManager` (`TrainingCheckpointer`); a saved agent directory is
`kppo.agent.checkpoint`."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from google.protobuf import text_format

from kppo._tf import tf
from kppo.core.distribute import from_replica_values, is_chief, replica_values, worker_id
from kppo.core.errors import reason, system_reason


class _NestVariables(tf.Module):
    """A nest of tensors (the runner state) mirrored in variables, so tf.train.Checkpoint can save it; None leaves
    (e.g. the action mask of an unmasked host run) stay None."""

    def __init__(self, template: Any):
        super().__init__(name="runner_state")
        self._structure = template
        self.leaves = [
            None if leaf is None else tf.Variable(leaf, trainable=False) for leaf in tf.nest.flatten(template)
        ]

    def assign(self, state: Any) -> None:
        for variable, leaf in zip(self.leaves, tf.nest.flatten(state)):
            if variable is not None:
                variable.assign(leaf)

    def read(self) -> Any:
        return tf.nest.pack_sequence_as(self._structure, [v if v is None else tf.identity(v) for v in self.leaves])


class RoundSoFar(NamedTuple):
    """The part of a round done before a checkpoint inside it: its diagnostics' sums (Python floats, or numpy arrays
    [M] for a population), iterations and training wall time. A resume adds the rest of the round to them, so the
    round's metric row is the one an uninterrupted run makes."""

    sums: tuple
    iterations: int
    wall_s: float


class Restored(NamedTuple):
    """What a checkpoint gives a resumed run: the runner state, the metric rows so far and the round in progress."""

    state: Any
    rows: list[dict]
    round_so_far: RoundSoFar | None


class TrainingCheckpointer:
    """Writes and restores everything a run needs to continue exactly: networks, optimizer (Adam moments and step),
    the runner state (env state, observations, statistics, RNG key, iteration), the metric rows so far and the sums of
    the round in progress (`RoundSoFar`).

    `tf.train.CheckpointManager` writes the data files first and then replaces the `checkpoint` index atomically, so
    a crash while writing leaves the previous checkpoint usable; `restore_latest` falls back to an older checkpoint
    (with a warning) when the newest one cannot be read.
    """

    def __init__(
        self,
        directory: str | Path,
        agent: Any,
        state_template: Any,
        max_to_keep: int = 3,
        strategy: Any = None,
        weights: Any = None,
    ):
        self.strategy = strategy  # tf.distribute: every replica's runner state is saved (`replica_values`)
        if strategy is not None:  # traced: eager collectives crash multi-worker runs (SIGSEGV, measured)
            self._gather = tf.function(lambda state: replica_values(strategy, state), autograph=False)
        self.state = _NestVariables(self._plain_state(state_template))
        self.rows = tf.Variable("[]", dtype=tf.string, trainable=False)
        networks = (
            dict(actor=agent.actor, critic=agent.critic, optimizer=agent.optimizer)
            if weights is None
            else dict(population=weights)
        )  # a population's stacked weights and Adam state
        if weights is None and getattr(agent, "lstm", None) is not None:
            networks["memory"] = agent.lstm  # a recurrent agent's LSTM cells
        self.checkpoint = tf.train.Checkpoint(**networks, runner_state=self.state, metric_rows=self.rows)
        self.manager = _manager(self.checkpoint, Path(directory), max_to_keep)
        # Multi-worker: every worker saves (gathering the cluster's state is collective), only the chief into
        # `directory`; the others write to a scratch directory removed after each save. All restore the chief's.
        self.scratch = None if is_chief(strategy) else Path(directory) / f".worker-{worker_id(strategy)}"
        self.writer = (
            self.manager
            if self.scratch is None
            else tf.train.CheckpointManager(self.checkpoint, str(self.scratch), max_to_keep=1)
        )

    def _plain_state(self, state: Any) -> Any:
        return state if self.strategy is None else self._gather(state)

    def save(self, state: Any, rows: list[dict], iteration: int, round_so_far: RoundSoFar | None = None) -> str:
        self.state.assign(self._plain_state(state))
        self.rows.assign(json.dumps(_rows_record(rows, round_so_far)))
        try:
            path = self.writer.save(checkpoint_number=iteration)
        except tf.errors.OpError as err:  # a full disk, a file-size limit, a folder removed under the run
            self._remove_partial(iteration)
            raise OSError(
                f"checkpoint_dir: could not write checkpoint {iteration} into {str(self.manager.directory)!r} "
                f"({system_reason(err)}); the checkpoints before it are kept"
            ) from None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self._remove_partial("*")  # a process killed inside a save left its `ckpt-N_temp/`: nothing else writes here
        return path

    def _remove_partial(self, iteration: int | str) -> None:
        """What a failed or killed save left (TensorFlow writes `ckpt-N_temp/` first, then renames its files)."""
        for partial in Path(self.writer.directory).glob(f"ckpt-{iteration}_temp*"):
            shutil.rmtree(partial, ignore_errors=True)

    def restore_latest(self) -> Restored | None:
        """The state, metric rows and round in progress of the newest readable checkpoint, or None if there is
        none."""
        for path in reversed(self.manager.checkpoints):
            try:
                self.checkpoint.read(path).assert_existing_objects_matched()
            except (tf.errors.OpError, ValueError, AssertionError, IndexError) as err:
                warnings.warn(f"checkpoint {path!r} could not be read ({reason(err)}); trying the previous one")
                continue
            state = self.state.read()
            if self.strategy is not None:
                state = from_replica_values(self.strategy, state)
            return Restored(state, *_read_rows_record(json.loads(self.rows.numpy().decode())))
        return None


def _manager(checkpoint: Any, directory: Path, max_to_keep: int) -> Any:
    """The folder's CheckpointManager; a `checkpoint` state file it cannot parse is a one-line ValueError naming it."""
    try:
        return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=max_to_keep)
    except (UnicodeDecodeError, ValueError, text_format.ParseError, tf.errors.OpError) as err:
        raise ValueError(
            f"checkpoints: expected {str(directory / 'checkpoint')!r} to be TensorFlow's checkpoint list, got a file "
            f"it cannot read ({reason(err)})"
        ) from None


def _plain(value: Any) -> Any:
    value = np.asarray(value)
    return value.item() if value.ndim == 0 else value.tolist()


def _typed(value: Any) -> list:
    """A sum as [dtype, values]: read back with its dtype, the rest of the round adds to it as it would have."""
    value = np.asarray(value)
    return [value.dtype.str, value.tolist()]


def _untyped(record: list) -> Any:
    value = np.asarray(record[1], dtype=np.dtype(record[0]))
    return value.item() if value.ndim == 0 else value


def _rows_record(rows: list[dict], round_so_far: RoundSoFar | None) -> dict:
    record: dict[str, Any] = {"rows": [{k: _plain(v) for k, v in row.items()} for row in rows]}
    if round_so_far is not None:
        sums, iterations, wall_s = round_so_far
        record["round"] = {"sums": [_typed(x) for x in sums], "iterations": iterations, "wall_s": wall_s}
    return record


def _read_rows_record(record: Any) -> tuple[list[dict], RoundSoFar | None]:
    """(rows, round in progress); a checkpoint written before kppo saved the round in progress holds a plain list."""
    if isinstance(record, list):
        return record, None
    part = record.get("round")
    if part is None:
        return record["rows"], None
    sums = tuple(_untyped(x) for x in part["sums"])
    return record["rows"], RoundSoFar(sums, int(part["iterations"]), float(part["wall_s"]))
