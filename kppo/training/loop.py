"""The one training loop (`run_loop`): every run (`kppo.train`, `kppo.PPO.learn`, the CLI; TF-native or gymnasium;
one device, replicated or a population) goes through it.

The loop: rounds of calls to `Runner.run_iterations`; after each round a metric row (with an evaluation when the plan
asks); checkpoints; and the front ends' hooks (`kppo.training.hooks`): Stable-Baselines3 callbacks, host-side
schedules, per-call reports (SB3's logger), progress and stop requests. Callbacks follow SB3's contract: on the host
path `on_step` runs after every vector-env step, during the rollout, with SB3's `locals`; on the TF-native path
(rollouts compiled into one call) they run once per compiled call, and `n_calls` counts calls.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo._tf import quiet_native_logs, tf
from kppo.core.types import Diagnostics
from kppo.training.checkpointer import RoundSoFar
from kppo.training.hooks import Hooks, run_callback, step_hook
from kppo.training.metrics import Progress, check_finite, evaluation_row, numpy_value, print_debug, training_row
from kppo.training.plan import Plan
from kppo.training.runners import Iterations, Runner
from kppo.update.diagnostics import add_diagnostics

__all__ = ["LoopResult", "run_loop"]


def _quietly(warmup: Callable[[], None] | None) -> Callable[[], None]:
    """The warm-up thread's target: `warmup` with TensorFlow's compile-cache notices dropped (`quiet_native_logs`)."""

    def run() -> None:
        if warmup is not None:
            with quiet_native_logs():
                warmup()

    return run


class LoopResult(NamedTuple):
    """What `run_loop` returns."""

    state: Any
    rows: list[dict]
    timings: dict[str, float]
    interrupted: bool  # should_stop ended the run
    stopped: bool  # a callback returned False


class _Clock:
    """Compile time (first training call, first evaluation) vs the rest."""

    def __init__(self):
        self.start = time.perf_counter()
        self.compile_s = 0.0
        self.first = {"train": True, "eval": True}

    def charge_first(self, kind: str, t0: float) -> None:
        if self.first[kind]:
            self.compile_s += time.perf_counter() - t0
            self.first[kind] = False

    def timings(self) -> dict[str, float]:
        total_s = time.perf_counter() - self.start
        return {"compile_s": self.compile_s, "run_s": total_s - self.compile_s, "total_s": total_s}


class _Run:
    """One `run_loop`: the state it carries from call to call, and its phases (`call`, `after_call`,
    `evaluate_round`)."""

    def __init__(
        self,
        runner: Runner,
        plan: Plan,
        hooks: Hooks,
        model: Any,
        rows: list[dict] | None,
        checkpointer: Any,
        checkpoint_every: int,
    ):
        self.runner, self.plan, self.hooks, self.model = runner, plan, hooks, model
        self.checkpointer, self.checkpoint_every = checkpointer, checkpoint_every
        self.state, self.rows, self.clock = runner.state, list(rows or []), _Clock()
        self.iteration = int(runner.view(self.state).iteration)
        self.last_checkpoint, self.gradient_steps = self.iteration, np.asarray(plan.gradient_steps, np.int64)
        self.step_hook = step_hook(hooks, model, runner.env.num_envs) if runner.steps_on_host else None
        # one iteration a call where the host sets schedules or steps the envs (one rollout between callback events)
        # or where Keras callbacks run (an epoch is one iteration)
        one_a_call = hooks.schedule is not None or hooks.keras is not None or runner.steps_on_host
        self.per_call = 1 if one_a_call else plan.iterations_per_call
        self.call_s = 0.0  # wall time of the last call
        self.keras_stop = False  # a Keras callback set model.stop_training
        self.stop_after_row = False  # should_stop said so at a round's last call
        self.round_so_far: RoundSoFar | None = plan.round_so_far  # the round in progress, as a checkpoint saves it
        # Compile the evaluation on the other core while the first training call compiles (its result is dropped).
        self.warmup = threading.Thread(target=_quietly(runner.warmup if plan.with_evaluation else None), daemon=True)

    def start(self) -> None:
        if self.plan.with_evaluation:  # traced before the warm-up thread starts (`Runner.trace`), charged as compiling
            t0 = time.perf_counter()
            self.runner.trace()
            self.clock.compile_s += time.perf_counter() - t0
        self.warmup.start()
        if self.hooks.callback is not None:
            start_locals = {"total_timesteps": self.plan.total_timesteps, "model": self.model}
            run_callback(self.hooks.callback, "on_training_start", self.model, start_locals, {})
        if self.hooks.keras is not None:
            self.hooks.keras.train_begin()

    def finish(self, interrupted: bool, stopped: bool) -> LoopResult:
        self.warmup.join()  # a run must not exit while the warm-up compiles (abort at exit)
        if self.hooks.callback is not None:
            run_callback(self.hooks.callback, "on_training_end", self.model)
        if self.hooks.keras is not None:
            self.hooks.keras.train_end()
        return LoopResult(self.state, self.rows, self.clock.timings(), interrupted, stopped)

    def call(self, n: int) -> Iterations:
        """Schedules, `on_rollout_start`, then n iterations in one runner call."""
        hooks, model = self.hooks, self.model
        if hooks.schedule is not None:
            hooks.schedule(1.0 - model.num_timesteps / max(self.plan.total_timesteps, 1))
        if hooks.callback is not None:
            run_callback(hooks.callback, "on_rollout_start", model)
        if hooks.keras is not None:
            hooks.keras.epoch_begin(self.iteration)
        t0 = time.perf_counter()
        with quiet_native_logs() if self.clock.first["train"] else contextlib.nullcontext():  # compiles, loads
            result: Iterations = self.runner.run_iterations(self.state, n, self.step_hook)
        self.call_s = time.perf_counter() - t0
        self.clock.charge_first("train", t0)
        self.state = model.runner_state = result.state
        if self.step_hook is None:
            model.num_timesteps += result.completed * self.plan.rollout_size
        return result

    def count(self, result: Iterations, n: int) -> tuple[Diagnostics, Progress]:
        """The call's diagnostics on the host and the progress after it; Keras' epoch end, then the finite check
        (unless a Keras callback, `TerminateOnNaN` say, stopped the run)."""
        diag = tf.nest.map_structure(numpy_value, result.diagnostics)
        self.iteration += n
        self.gradient_steps = self.gradient_steps + np.asarray(diag.minibatch_steps).astype(np.int64)
        runner = self.runner
        progress = Progress(
            self.model.num_timesteps,
            self.iteration,
            numpy_value(self.gradient_steps),
            runner.learning_rate(self.state),
            runner.clip_range(self.state),
            time.perf_counter() - self.clock.start,
        )
        if self.hooks.keras is not None:
            self.keras_stop = self.hooks.keras.epoch_end(self.iteration - n, diag, self.call_s, progress)
        if not self.keras_stop:
            check_finite(diag, self.iteration)
        return diag, progress

    def after_call(self, diag: Diagnostics, n: int, progress: Progress, row_next: bool = False) -> LoopResult | None:
        """Reports, callbacks, checkpoint, stop requests; the run's result when it ends here. `row_next`: this call
        ends a round whose metric row comes next, so neither a periodic checkpoint nor a stop request saves here (a
        checkpoint at the round's end without its row would lose the row on a resume): the round's evaluation saves,
        and a stop is acted on after it (`stop_after_row`)."""
        hooks, model, callback = self.hooks, self.model, self.hooks.callback
        if hooks.on_call is not None:
            hooks.on_call(diag, n, progress)
        if hooks.on_progress is not None:
            hooks.on_progress(self.iteration * self.plan.rollout_size)
        continue_training = True
        if callback is not None:
            if self.step_hook is None:  # compiled rollouts: one on_step per call
                callback.update_locals({"iterations": n, "diagnostics": diag})
                continue_training = run_callback(callback, "on_step", model)
            run_callback(callback, "on_rollout_end", model)
        if self.keras_stop:  # no checkpoint of a stopped epoch (its loss may be NaN)
            return self.finish(False, True)
        if (
            self.checkpointer is not None
            and self.checkpoint_every
            and self.iteration - self.last_checkpoint >= self.checkpoint_every
            and not row_next
        ):
            self.save()
        if hooks.should_stop is not None and hooks.should_stop():
            if row_next:
                self.stop_after_row = True
                return None if continue_training else self.finish(False, True)
            if self.checkpointer is not None:
                self.save()
            return self.finish(True, False)
        if self.plan.debug:
            print_debug(diag, self.iteration)
        return None if continue_training else self.finish(False, True)

    def save(self) -> None:
        self.checkpointer.save(self.state, self.rows, self.iteration, self.round_so_far)
        self.last_checkpoint = self.iteration

    def run_round(self, round_index: int, size: int) -> LoopResult | None:
        """`size` iterations in calls of at most `per_call`, then the round's evaluation; the result if the run ends.
        A round a resume starts inside goes on from the sums its checkpoint saved (`round_so_far`)."""
        round_start, done = time.perf_counter(), 0
        before = self.round_so_far or RoundSoFar((), 0, 0.0)
        sums: Diagnostics | None = Diagnostics(*before.sums) if before.sums else None
        progress: Progress | None = None
        while done < size:
            n = min(self.per_call, size - done)
            result = self.call(n)
            if result.stopped:  # a callback returned False mid-rollout: no update for that rollout (as SB3)
                return self.finish(False, True)
            diag, progress = self.count(result, n)
            done += n
            sums = add_diagnostics(sums, diag)
            wall = before.wall_s + time.perf_counter() - round_start
            self.round_so_far = RoundSoFar(tuple(sums), before.iterations + done, wall) if done < size else None
            ended = self.after_call(diag, n, progress, row_next=done == size and self.plan.with_evaluation)
            if ended is not None:
                return ended
        if self.plan.with_evaluation:
            assert sums is not None and progress is not None  # size > 0: the round ran
            wall = before.wall_s + time.perf_counter() - round_start
            self.evaluate_round(round_index, sums, before.iterations + done, wall, progress)
            if self.stop_after_row:  # asked at the round's last call: the row and its checkpoint came first
                return self.finish(True, False)
        return None

    def evaluate_round(
        self, round_index: int, sums: Diagnostics, done: int, train_wall: float, progress: Progress
    ) -> None:
        """One metric row: the round's training means and a deterministic evaluation; then a checkpoint."""
        self.warmup.join()
        t0 = time.perf_counter()
        mean_diag = Diagnostics(*[tf.constant(x / done, tf.float32) for x in sums])
        obs_stats = self.runner.view(self.state).rollout.obs_stats
        eval_result, extra = self.runner.evaluation_round(obs_stats, round_index, self.model.num_timesteps, mean_diag)
        self.clock.charge_first("eval", t0)
        row = training_row(sums, done, self.plan.rollout_size, train_wall, progress)
        row.update(evaluation_row(eval_result))
        row.update({name: np.asarray(value) for name, value in extra.items()})
        row["time/elapsed_s"] = time.perf_counter() - self.clock.start
        self.rows.append(row)
        if self.hooks.on_eval is not None:
            self.hooks.on_eval(row)
        if self.hooks.between_rounds is not None:
            self.state = self.model.runner_state = self.hooks.between_rounds(self.runner, self.state, row)
        if self.checkpointer is not None:
            self.save()


def run_loop(
    runner: Runner,
    plan: Plan,
    hooks: Hooks,
    model: Any,
    rows: list[dict] | None = None,
    checkpointer: Any = None,
    checkpoint_every: int = 0,
) -> LoopResult:
    """Runs `plan` from `runner.state`; `model` is what callbacks see (`num_timesteps` is advanced here, and
    `runner_state` set after every call). Phases: start (warm-up, `on_training_start`), rounds of calls (each call:
    schedules, rollouts and updates, reports, callbacks, checkpoint, stop requests), an evaluation after each round,
    finish (`on_training_end`).

    Returns:
        LoopResult(state, metric rows, timings, interrupted, stopped).
    """
    run = _Run(runner, plan, hooks, model, rows, checkpointer, checkpoint_every)
    run.start()
    for round_index, size in enumerate(plan.rounds):
        if size == 0:
            continue  # finished before a resume
        ended = run.run_round(round_index, size)
        if ended is not None:
            return ended
    return run.finish(False, False)
