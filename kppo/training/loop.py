"""The one training loop: every run (`kppo.train`, `kppo.PPO.learn`, the CLI; TF-native or gymnasium; one device or
replicated) goes through `run_loop`.

Rounds of calls to `Runner.run_iterations`; after each round a metric row (with an evaluation when the plan asks);
checkpoints; and the front ends' hooks: Stable-Baselines3 callbacks, host-side schedules, per-call reports (SB3's
logger), progress and stop requests. Callbacks follow SB3's contract: on the host path `on_step` runs after every
vector-env step, during the rollout, with SB3's `locals`; on the TF-native path (rollouts compiled into one call)
they run once per compiled call, and `n_calls` counts calls.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo._tf import tf
from kppo.core.errors import first_line
from kppo.rollout.gymnasium import StepRecord
from kppo.training.metrics import Progress, evaluation_row, host_value, training_row
from kppo.training.runners import Iterations, Runner
from kppo.core.types import Diagnostics


class Hooks(NamedTuple):
    """What a front end plugs into the loop (all optional)."""

    callback: Any = None  # an initialized kppo.callbacks.BaseCallback (SB3's callback contract)
    schedule: Callable[[float], None] | None = None  # progress_remaining -> sets lr/clip (then one iteration a call)
    on_env_step: Callable[[StepRecord], None] | None = None  # host path: each vector step, before callbacks
    on_call: Callable[[Diagnostics, int, Progress], None] | None = None  # (summed diagnostics, iterations, progress)
    on_eval: Callable[[dict], None] | None = None  # each round's metric row
    on_progress: Callable[[int], None] | None = None  # environment steps so far, after every call
    should_stop: Callable[[], bool] | None = None  # polled after every call: True checkpoints and returns


class Plan(NamedTuple):
    """How many iterations, in which rounds, with what around them."""

    rounds: list[int]  # iterations per round (a round already done before a resume has size 0)
    evaluate: bool  # evaluate and make a metric row after each round
    iterations_per_call: int
    rollout_size: int
    total_timesteps: int  # progress_remaining = 1 - model.num_timesteps / total_timesteps
    debug: bool = False
    gradient_steps: Any = 0  # applied before this run (a resume: the restored Adam step count; [M] for a population)


class LoopResult(NamedTuple):
    state: Any
    rows: list[dict]
    timings: dict[str, float]
    interrupted: bool  # should_stop ended the run
    stopped: bool  # a callback returned False


def round_sizes(num_iterations: int, rounds: int) -> list[int]:
    """Splits the iterations into `rounds` nearly equal rounds (all iterations run, none dropped)."""
    bounds = [round((r + 1) * num_iterations / rounds) for r in range(rounds)]
    return [b - a for a, b in zip([0, *bounds[:-1]], bounds)]


def check_finite(diag: Diagnostics, iteration: int) -> None:
    """Stops a run whose loss became NaN/inf (nothing is checkpointed after it: the last checkpoint stays good)."""
    names = ("total_loss", "value_loss", "policy_loss", "entropy")
    bad = [name for name in names if not np.all(np.isfinite(getattr(diag, name)))]
    if bad:
        raise FloatingPointError(
            f"training: non-finite {', '.join(bad)} in iterations up to {iteration} (an env returning NaN/inf "
            "observations or rewards, or diverging updates); stopped, the last checkpoint is kept"
        )


def _print_debug(diag: Diagnostics, iteration: int) -> None:
    """rex's DEBUG output: episode statistics of the iterations just run."""
    episodes = max(np.sum(diag.episodes), 1.0)  # a population's: over all members
    print(
        f"[kppo debug] iterations to {iteration}: {np.sum(diag.episodes):.0f} episodes, "
        f"mean return {np.sum(diag.episode_return_sum) / episodes:.2f}, "
        f"mean length {np.sum(diag.episode_length_sum) / episodes:.1f}",
        flush=True,
    )


def run_callback(callback: Any, event: str, model: Any, *args: Any) -> Any:
    """`callback.<event>(*args)`; an exception in user code becomes one line naming the callback, the event and the
    step (the original is chained), and stops training with everything written so far kept."""
    try:
        return getattr(callback, event)(*args)
    except Exception as err:  # any user error: named, chained, re-raised
        raise RuntimeError(
            f"callback: {type(callback).__name__}.{event} raised {type(err).__name__}"
            f"{first_line(err)} at step {model.num_timesteps:,}; training stopped "
            "(checkpoints and files written so far are kept)"
        ) from err


def _step_hook(hooks: Hooks, model: Any, num_envs: int) -> Callable[[StepRecord], bool] | None:
    """The host runner's per-step hook: counts the step, then SB3's `update_locals` + `on_step`."""
    if hooks.callback is None and hooks.on_env_step is None:
        return None

    def on_step(record: StepRecord) -> bool:
        model.num_timesteps += num_envs
        if hooks.on_env_step is not None:
            hooks.on_env_step(record)
        if hooks.callback is None:
            return True
        hooks.callback.update_locals(record.sb3_locals())
        return run_callback(hooks.callback, "on_step", model)

    return on_step


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
        self.step_hook = _step_hook(hooks, model, runner.env.num_envs) if runner.steps_on_host else None
        # one iteration a call where the host sets schedules or steps the envs (one rollout between callback events)
        self.per_call = 1 if hooks.schedule is not None or runner.steps_on_host else plan.iterations_per_call
        # Compile the evaluation on the other core while the first training call compiles (its result is dropped).
        self.warmup = threading.Thread(target=runner.warmup if plan.evaluate else (lambda: None), daemon=True)

    def start(self) -> None:
        self.warmup.start()
        if self.hooks.callback is not None:
            start_locals = {"total_timesteps": self.plan.total_timesteps, "model": self.model}
            run_callback(self.hooks.callback, "on_training_start", self.model, start_locals, {})

    def finish(self, interrupted: bool, stopped: bool) -> LoopResult:
        self.warmup.join()  # a run must not exit while the warm-up compiles (abort at exit)
        if self.hooks.callback is not None:
            run_callback(self.hooks.callback, "on_training_end", self.model)
        return LoopResult(self.state, self.rows, self.clock.timings(), interrupted, stopped)

    def call(self, n: int) -> Iterations:
        """Schedules, `on_rollout_start`, then n iterations in one runner call."""
        hooks, model = self.hooks, self.model
        if hooks.schedule is not None:
            hooks.schedule(1.0 - model.num_timesteps / max(self.plan.total_timesteps, 1))
        if hooks.callback is not None:
            run_callback(hooks.callback, "on_rollout_start", model)
        t0 = time.perf_counter()
        result: Iterations = self.runner.run_iterations(self.state, n, self.step_hook)
        self.clock.charge_first("train", t0)
        self.state = model.runner_state = result.state
        if self.step_hook is None:
            model.num_timesteps += result.completed * self.plan.rollout_size
        return result

    def count(self, result: Iterations, n: int) -> tuple[Diagnostics, Progress]:
        """The call's diagnostics on the host (checked finite) and the progress after it."""
        diag = tf.nest.map_structure(host_value, result.diagnostics)
        check_finite(diag, self.iteration + n)
        self.iteration += n
        self.gradient_steps = self.gradient_steps + np.asarray(diag.minibatch_steps).astype(np.int64)
        runner = self.runner
        progress = Progress(
            self.model.num_timesteps,
            self.iteration,
            host_value(self.gradient_steps),
            runner.learning_rate(self.state),
            runner.clip_range(),
            time.perf_counter() - self.clock.start,
        )
        return diag, progress

    def after_call(self, diag: Diagnostics, n: int, progress: Progress) -> LoopResult | None:
        """Reports, callbacks, checkpoint, stop requests; the run's result when it ends here."""
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
        if (
            self.checkpointer is not None
            and self.checkpoint_every
            and self.iteration - self.last_checkpoint >= self.checkpoint_every
        ):
            self.save()
        if hooks.should_stop is not None and hooks.should_stop():
            if self.checkpointer is not None:
                self.save()
            return self.finish(True, False)
        if self.plan.debug:
            _print_debug(diag, self.iteration)
        return None if continue_training else self.finish(False, True)

    def save(self) -> None:
        self.checkpointer.save(self.state, self.rows, self.iteration)
        self.last_checkpoint = self.iteration

    def run_round(self, round_index: int, size: int) -> LoopResult | None:
        """`size` iterations in calls of at most `per_call`, then the round's evaluation; the result if the run ends."""
        round_start, done = time.perf_counter(), 0
        sums: Diagnostics | None = None
        progress: Progress | None = None
        while done < size:
            n = min(self.per_call, size - done)
            result = self.call(n)
            if result.stopped:  # a callback returned False mid-rollout: no update for that rollout (as SB3)
                return self.finish(False, True)
            diag, progress = self.count(result, n)
            done += n
            sums = diag if sums is None else Diagnostics(*[a + b for a, b in zip(sums, diag)])
            ended = self.after_call(diag, n, progress)
            if ended is not None:
                return ended
        if self.plan.evaluate:
            assert sums is not None and progress is not None  # size > 0: the round ran
            self.evaluate_round(round_index, sums, done, time.perf_counter() - round_start, progress)
        return None

    def evaluate_round(
        self, round_index: int, sums: Diagnostics, done: int, train_wall: float, progress: Progress
    ) -> None:
        """One metric row: the round's training means and a deterministic evaluation; then a checkpoint."""
        self.warmup.join()
        t0 = time.perf_counter()
        mean_diag = Diagnostics(*[tf.constant(x / done, tf.float32) for x in sums])
        obs_stats = self.runner.view(self.state).rollout.obs_stats
        eval_result, extra = self.runner.evaluate(obs_stats, round_index, self.model.num_timesteps, mean_diag)
        self.clock.charge_first("eval", t0)
        row = training_row(sums, done, self.plan.rollout_size, train_wall, progress)
        row.update(evaluation_row(eval_result))
        row.update({name: np.asarray(value) for name, value in extra.items()})
        row["time/elapsed_s"] = time.perf_counter() - self.clock.start
        self.rows.append(row)
        if self.hooks.on_eval is not None:
            self.hooks.on_eval(row)
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
