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
from typing import Any, Callable, NamedTuple

import numpy as np

from kppo._tf import tf
from kppo.errors import first_line
from kppo.host_rollout import StepRecord
from kppo.metrics import Progress, evaluation_row, host_value, training_row
from kppo.runners import Iterations, Runner
from kppo.types import Diagnostics


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
    return [b - a for a, b in zip([0] + bounds[:-1], bounds)]


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
    print(f"[kppo debug] iterations to {iteration}: {np.sum(diag.episodes):.0f} episodes, "
          f"mean return {np.sum(diag.episode_return_sum) / episodes:.2f}, "
          f"mean length {np.sum(diag.episode_length_sum) / episodes:.1f}", flush=True)


def run_callback(callback: Any, event: str, model: Any, *args: Any) -> Any:
    """`callback.<event>(*args)`; an exception in user code becomes one line naming the callback, the event and the
    step (the original is chained), and stops training with everything written so far kept."""
    try:
        return getattr(callback, event)(*args)
    except Exception as err:  # noqa: BLE001  (any user error: named, chained, re-raised)
        raise RuntimeError(f"callback: {type(callback).__name__}.{event} raised {type(err).__name__}"
                           f"{first_line(err)} at step {model.num_timesteps:,}; training stopped "
                           "(checkpoints and files written so far are kept)") from err


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


def run_loop(runner: Runner, plan: Plan, hooks: Hooks, model: Any, rows: list[dict] | None = None,
             checkpointer: Any = None, checkpoint_every: int = 0) -> LoopResult:
    """Runs `plan` from `runner.state`; `model` is what callbacks see (`num_timesteps` is advanced here, and
    `runner_state` set after every call).

    Returns:
        LoopResult(state, metric rows, timings, interrupted, stopped).
    """
    state, rows, clock = runner.state, list(rows or []), _Clock()
    callback, view = hooks.callback, runner.view
    iteration = int(view(state).iteration)
    last_checkpoint, gradient_steps = iteration, np.asarray(plan.gradient_steps, np.int64)
    step_hook = _step_hook(hooks, model, runner.env.num_envs) if runner.steps_on_host else None
    # one iteration a call where the host sets schedules or steps the envs (one rollout between callback events)
    per_call = 1 if hooks.schedule is not None or runner.steps_on_host else plan.iterations_per_call
    # Compile the evaluation on the other core while the first training call compiles (its result is dropped).
    warmup = threading.Thread(target=runner.warmup if plan.evaluate and runner.warmup else (lambda: None), daemon=True)
    warmup.start()

    def finish(interrupted: bool, stopped: bool) -> LoopResult:
        warmup.join()  # a run must not exit while the warm-up compiles (abort at exit)
        if callback is not None:
            run_callback(callback, "on_training_end", model)
        return LoopResult(state, rows, clock.timings(), interrupted, stopped)

    if callback is not None:
        start_locals = {"total_timesteps": plan.total_timesteps, "model": model}
        run_callback(callback, "on_training_start", model, start_locals, {})

    for round_index, size in enumerate(plan.rounds):
        if size == 0:
            continue  # finished before a resume
        round_start, sums, done_in_round = time.perf_counter(), None, 0
        while done_in_round < size:
            n = min(per_call, size - done_in_round)
            if hooks.schedule is not None:
                hooks.schedule(1.0 - model.num_timesteps / max(plan.total_timesteps, 1))
            if callback is not None:
                run_callback(callback, "on_rollout_start", model)
            t0 = time.perf_counter()
            result: Iterations = runner.run_iterations(state, n, step_hook)
            clock.charge_first("train", t0)
            state = model.runner_state = result.state
            if step_hook is None:
                model.num_timesteps += result.completed * plan.rollout_size
            if result.stopped:  # a callback returned False mid-rollout: no update for that rollout (as SB3)
                return finish(False, True)
            diag = tf.nest.map_structure(host_value, result.diagnostics)
            check_finite(diag, iteration + n)
            iteration, done_in_round = iteration + n, done_in_round + n
            gradient_steps = gradient_steps + np.asarray(diag.minibatch_steps).astype(np.int64)
            sums = diag if sums is None else Diagnostics(*[a + b for a, b in zip(sums, diag)])
            rate = (float(runner.agent.optimizer.learning_rate.numpy()) if runner.learning_rate is None
                    else runner.learning_rate(state))
            progress = Progress(model.num_timesteps, iteration, host_value(gradient_steps), rate, runner.clip_range(),
                                time.perf_counter() - clock.start)
            if hooks.on_call is not None:
                hooks.on_call(diag, n, progress)
            if hooks.on_progress is not None:
                hooks.on_progress(iteration * plan.rollout_size)
            continue_training = True
            if callback is not None:
                if step_hook is None:  # compiled rollouts: one on_step per call
                    callback.update_locals({"iterations": n, "diagnostics": diag})
                    continue_training = run_callback(callback, "on_step", model)
                run_callback(callback, "on_rollout_end", model)
            if checkpointer is not None and checkpoint_every and iteration - last_checkpoint >= checkpoint_every:
                checkpointer.save(state, rows, iteration)
                last_checkpoint = iteration
            if hooks.should_stop is not None and hooks.should_stop():
                if checkpointer is not None:
                    checkpointer.save(state, rows, iteration)
                return finish(True, False)
            if plan.debug:
                _print_debug(diag, iteration)
            if not continue_training:
                return finish(False, True)
        if not plan.evaluate:
            continue
        train_wall = time.perf_counter() - round_start
        warmup.join()
        t0 = time.perf_counter()
        mean_diag = Diagnostics(*[tf.constant(x / done_in_round, tf.float32) for x in sums])
        eval_result, extra = runner.evaluate(view(state).rollout.obs_stats, round_index, model.num_timesteps,
                                             mean_diag)
        clock.charge_first("eval", t0)
        row = training_row(sums, done_in_round, plan.rollout_size, train_wall, progress)
        row.update(evaluation_row(eval_result))
        row.update({name: np.asarray(value) for name, value in extra.items()})
        row["time/elapsed_s"] = time.perf_counter() - clock.start
        rows.append(row)
        if hooks.on_eval is not None:
            hooks.on_eval(row)
        if checkpointer is not None:
            checkpointer.save(state, rows, iteration)
            last_checkpoint = iteration
    return finish(False, False)
