"""Keras callbacks in `kppo.train` and `PPO.learn`: Keras' hook order, one epoch per iteration, `stop_training`,
`restore_best_weights`, TerminateOnNaN, TensorBoard's event files and BackupAndRestore as exact resume."""

from __future__ import annotations

import csv
import types

import keras
import numpy as np
import pytest

import kppo
from kppo._tf import tf

TINY = dict(num_envs=4, num_steps=16, num_epochs=2, num_minibatches=2, num_hidden_units=8, eval_freq=2, num_eval_envs=2)
ROLLOUT = 4 * 16


def tiny(iterations: int, **changes) -> kppo.Config:
    settings = {**TINY, **changes}
    return kppo.Config(**settings, total_timesteps=settings["num_envs"] * settings["num_steps"] * iterations)


class Recorder(keras.callbacks.Callback):
    """Every hook call, in order: (hook, epoch or batch)."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int | None]] = []
        self.epoch_logs: list[dict] = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", None))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("batch_begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch))
        self.epoch_logs.append(dict(logs))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", None))


@pytest.fixture(scope="module")
def three_in_one_call(tmp_path_factory):
    """3 iterations in one compiled call, trained once per module with a Recorder and Keras' TensorBoard (writing to
    its own folder): the result, the recorder and the TensorBoard folder."""
    recorder, log_dir = Recorder(), tmp_path_factory.mktemp("tensorboard")
    callbacks = [recorder, keras.callbacks.TensorBoard(log_dir=str(log_dir))]
    result = kppo.train("cartpole", tiny(3, iterations_per_call=3), callback=callbacks)
    return types.SimpleNamespace(result=result, recorder=recorder, log_dir=log_dir)


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """`PPO.learn` on gymnasium CartPole, 3 iterations of 32 steps, trained once per module with an SB3 callback, a
    Recorder and Keras' CSVLogger in one list: the callbacks and the CSV's path."""

    class Count(kppo.callbacks.BaseCallback):
        def _on_step(self) -> bool:
            return True

    count, recorder, path = Count(), Recorder(), tmp_path_factory.mktemp("csv") / "log.csv"
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.learn(32 * 3, callback=[count, recorder, keras.callbacks.CSVLogger(str(path))])
    return types.SimpleNamespace(count=count, recorder=recorder, csv=path)


def test_keras_hooks_run_in_fits_order_with_one_epoch_per_iteration(three_in_one_call):
    """Even with several iterations a compiled call, an epoch is one iteration; its logs are the iteration's."""
    result, recorder = three_in_one_call.result, three_in_one_call.recorder
    epoch = [("epoch_begin", 0), ("batch_begin", 0), ("batch_end", 0), ("epoch_end", 0)]
    expected = [("train_begin", None)]
    for e in range(3):
        expected += [(name, e if name.startswith("epoch") else 0) for name, _ in epoch]
    assert recorder.calls == [*expected, ("train_end", None)]
    logs = recorder.epoch_logs
    assert [row["train/iterations"] for row in logs] == [1.0, 2.0, 3.0]
    assert [row["train/total_steps"] for row in logs] == [ROLLOUT * 1.0, ROLLOUT * 2.0, ROLLOUT * 3.0]
    assert all(row["loss"] == row["train/total_loss"] for row in logs)
    # the round's metric row averages its iterations: the mean of the epochs' losses
    np.testing.assert_allclose(result.metrics["train/total_loss"][0], np.mean([r["loss"] for r in logs[:2]]), rtol=1e-5)


def test_early_stopping_stops_and_restores_the_best_iterations_weights():
    """`mode="max"` on a loss with a huge min_delta never improves after epoch 0: patience 1 stops after epoch 1,
    and `restore_best_weights` puts back the weights of epoch 0's end."""
    seen = []
    snapshot = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append(snapshot.model.get_weights())
    )
    stopper = keras.callbacks.EarlyStopping(
        monitor="loss", mode="max", min_delta=1e9, patience=1, restore_best_weights=True
    )
    result = kppo.train("cartpole", tiny(6), callback=[snapshot, stopper])
    assert result.stopped and int(result.runner_state.iteration) == 2 and stopper.stopped_epoch == 1
    for best, now in zip(seen[0], [v.numpy() for v in result.agent.variables]):
        np.testing.assert_array_equal(best, now)
    assert not all(np.array_equal(a, b) for a, b in zip(seen[0], seen[1]))  # epoch 1 did change them


def test_csv_logger_writes_a_row_per_iteration_of_ppo_learn(learned):
    """`PPO.learn` on a gymnasium env: the CSV has epochs 0..n-1 and kppo's metric names as columns."""
    with open(learned.csv) as f:
        rows = list(csv.DictReader(f))
    assert [row["epoch"] for row in rows] == ["0", "1", "2"]
    assert [float(row["train/total_steps"]) for row in rows] == [32.0, 64.0, 96.0]
    assert all(float(row["loss"]) == float(row["train/total_loss"]) for row in rows)


def test_sb3_and_keras_callbacks_run_together_in_one_list(learned):
    assert learned.count.n_calls == 3 * 32 and [c for c in learned.recorder.calls if c[0] == "epoch_end"] == [
        ("epoch_end", 0),
        ("epoch_end", 1),
        ("epoch_end", 2),
    ]


def test_terminate_on_nan_stops_cleanly_where_kppo_alone_raises():
    """A learning rate of 1e30 makes the weights overflow in the first update: kppo alone raises; with Keras'
    TerminateOnNaN the run stops after that iteration, as `fit` does."""
    config = tiny(4, learning_rate=1e30, max_grad_norm=1e30)
    with pytest.raises(FloatingPointError, match="non-finite"):
        kppo.train("cartpole", config)
    result = kppo.train("cartpole", config, callback=keras.callbacks.TerminateOnNaN())
    assert result.stopped and int(result.runner_state.iteration) == 1


def test_tensorboard_writes_one_epoch_scalar_per_iteration(three_in_one_call):
    """Also when the 3 iterations run in one compiled call."""
    steps = {}
    for path in (three_in_one_call.log_dir / "train").glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                steps.setdefault(value.tag, []).append(event.step)
    assert steps["epoch_loss"] == [0, 1, 2]
    assert steps["epoch_rollout/ep_rew_mean"] == [0, 1, 2]
    assert steps["epoch_learning_rate"] == [0, 1, 2]  # Keras reads it from the agent's optimizer


def test_backup_and_restore_resumes_an_interrupted_run_exactly(tmp_path):
    """Stopped after 3 of 6 iterations, the same program started again continues from the backup and ends with
    the weights of an uninterrupted run; the backup is removed when the run ends (`delete_checkpoint`)."""
    config = tiny(6, iterations_per_call=1)
    whole = kppo.train("cartpole", config)
    backup_dir = tmp_path / "backup"
    calls = []
    first = kppo.train(
        "cartpole",
        config,
        callback=keras.callbacks.BackupAndRestore(str(backup_dir)),
        should_stop=lambda: calls.append(1) or len(calls) == 3,
    )
    assert first.interrupted and backup_dir.is_dir()
    recorder = Recorder()
    second = kppo.train("cartpole", config, callback=[keras.callbacks.BackupAndRestore(str(backup_dir)), recorder])
    assert [c[1] for c in recorder.calls if c[0] == "epoch_begin"] == [3, 4, 5]
    for a, b in zip(
        whole.agent.variables + whole.agent.optimizer.variables,
        second.agent.variables + second.agent.optimizer.variables,
    ):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not backup_dir.exists()


def test_callbacks_that_cannot_run_are_refused_in_one_line(tmp_path):
    backup = keras.callbacks.BackupAndRestore(str(tmp_path))
    model = kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, seed=0)
    with pytest.raises(ValueError, match="BackupAndRestore resumes a run exactly, which needs a TF-native env"):
        model.learn(16, callback=backup)
    with pytest.raises(ValueError, match="ModelCheckpoint saves a Keras model"):
        model.learn(16, callback=keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras")))
    with pytest.raises(ValueError, match=r"checkpoint_dir: expected None with keras\.callbacks\.BackupAndRestore"):
        kppo.train("cartpole", tiny(1), callback=backup, checkpoint_dir=tmp_path / "other")
    with pytest.raises(ValueError, match="callback: expected None for a population"):
        kppo.train("cartpole", tiny(1), seed=[0, 1], callback=Recorder())


def test_an_error_in_a_keras_callback_is_one_line_naming_it():
    broken = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: 1 / 0)
    with pytest.raises(
        RuntimeError,
        match=r"^callback: LambdaCallback.on_epoch_end raised ZeroDivisionError: division by zero; training stopped",
    ) as info:
        kppo.train("cartpole", tiny(6), callback=broken)
    assert "\n" not in str(info.value)
