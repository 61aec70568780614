"""`train(env, config, seed) -> PPOResult`: wires env, networks, rollout and update into compiled iterations and
runs them from a Python loop that evaluates, reports and times (rex/purejaxrl's `train`, in TensorFlow)."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.checkpoint import TrainingCheckpointer
from kppo.config import Config
from kppo.envs.base import VecEnv
from kppo.policy import ObsScaling, Policy
from kppo.runners import EvalMetricsFn, learning_rate, make_runner
from kppo.types import Diagnostics, RunnerState
from kppo.update import Learner


@dataclasses.dataclass
class PPOResult:
    """What `train` returns (rex's PPOResult).

    Attributes:
        config: the Config the run used.
        runner_state: env state, last observations, normalization statistics, RNG key, iteration counter.
        metrics: one row per evaluation round: name -> numpy array [eval_freq] (see `METRICS`).
        learner: actor, critic, optimizer and distribution (what a checkpoint saves).
        observation_space, action_space: of one env.
        timings: compile_s (first compiled calls), run_s (the rest), total_s (both, excluding setup).
        interrupted: True when `should_stop` ended the run early.
    """

    config: Config
    runner_state: RunnerState
    metrics: dict[str, np.ndarray]
    learner: Learner
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    timings: dict[str, float]
    interrupted: bool = False

    @property
    def obs_scaling(self) -> ObsScaling:
        stats = self.runner_state.rollout.obs_stats
        return ObsScaling(stats.mean.numpy(), stats.var.numpy(), self.config.normalize_obs)

    @functools.cached_property
    def policy(self) -> Policy:
        return Policy(
            self.learner.actor, self.learner.dist, self.obs_scaling, self.observation_space, self.action_space
        )

    @property
    def act_scaling(self):
        return self.policy.act_scaling


#: Metric names (one value per evaluation round) and meanings.
METRICS = {
    "train/total_steps": "environment steps so far",
    "train/iterations": "training iterations (rollout + update) so far",
    "train/mean_approxkl": "approx KL(old || new), mean over the round's minibatches",
    "train/total_loss": "PPO loss",
    "train/policy_loss": "clipped surrogate loss",
    "train/value_loss": "value mean squared error",
    "train/entropy": "policy entropy",
    "train/clip_fraction": "fraction of ratios outside [1 - clip, 1 + clip]",
    "train/explained_variance": "1 - Var(returns - values) / Var(returns) of the rollouts",
    "train/learning_rate": "learning rate of the round's last iteration",
    "train/grad_norm": "global gradient norm before clipping",
    "train/minibatch_steps": "gradient steps per iteration (fewer after a target-KL stop)",
    "rollout/ep_rew_mean": "mean raw return of training episodes finished in the round (NaN if none)",
    "rollout/ep_len_mean": "their mean length",
    "eval/mean_returns": "deterministic evaluation: mean first-episode return over num_eval_envs envs",
    "eval/std_returns": "its standard deviation",
    "eval/mean_lengths": "mean episode length",
    "eval/std_lengths": "its standard deviation",
    "eval/total_episodes": "evaluation episodes that ended within the time limit",
    "time/steps_per_s": "environment steps per second in the round (training calls only)",
    "time/elapsed_s": "wall time since the first compiled call",
}


def _round_sizes(num_iterations: int, rounds: int) -> list[int]:
    """Splits the iterations into `rounds` nearly equal rounds (all iterations run, none dropped)."""
    bounds = [round((r + 1) * num_iterations / rounds) for r in range(rounds)]
    return [b - a for a, b in zip([0] + bounds[:-1], bounds)]


def _print_metrics(metrics: dict[str, Any]) -> None:
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval {metrics['eval/mean_returns']:9.2f} "
        f"+- {metrics['eval/std_returns']:7.2f}  train ep {metrics['rollout/ep_rew_mean']:9.2f}  "
        f"kl {metrics['train/mean_approxkl']:.4f}  {metrics['time/steps_per_s']:8.0f} steps/s",
        flush=True,
    )


def train(
    env: Any = None,
    config: Config | None = None,
    seed: int | None = None,
    *,
    eval_metrics_fn: EvalMetricsFn | None = None,
    on_eval: Callable[[dict], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> PPOResult:
    """Trains PPO on a TF-native or a gymnasium environment.

    Args:
        env: a built-in env name (see `kppo.envs.make`; compiled TF-native rollout) or a `kppo.envs.VecEnv`; or a
            gymnasium env id, `gym.Env`, factory or `gym.vector.VectorEnv` (host rollout; see `Config.env_backend`).
            Defaults to `config.env`.
        config: hyperparameters. Defaults to `Config()` (the fixed CartPole setting).
        seed: overrides `config.seed`.
        eval_metrics_fn: in-graph hook `(total_steps, diagnostics, eval_transitions) -> dict of tensors`, merged into
            each round's metrics (rex's EVAL_METRICS_JAX_CB).
        on_eval: host callback called with each round's metrics dict (rex's EVAL_METRICS_HOST_CB); defaults to
            printing one line when `config.verbose` >= 1.
        on_progress: host callback called with the number of environment steps so far after every compiled call
            (progress bars).
        checkpoint_dir: write checkpoints here: every `config.checkpoint_every` iterations (0: at round ends), at
            the end, and when `should_stop` says so. Keeps the last 3.
        resume: continue from the newest readable checkpoint in `checkpoint_dir` (TF-native envs: the resumed run
            ends bit-identical to an uninterrupted one on CPU). The metric row of an interrupted round averages only
            the iterations after the resume.
        should_stop: polled after every compiled call; True -> checkpoint (if a directory is set) and return early
            with `PPOResult.interrupted` set (signal handlers use this).

    Returns:
        PPOResult.
    """
    config = Config() if config is None else config
    if seed is not None:
        config = config.replace(seed=seed)
    runner = make_runner(env, config, eval_metrics_fn)
    if on_eval is None and config.verbose >= 1:
        on_eval = _print_metrics
    checkpointer, rows = None, []
    if checkpoint_dir is not None:
        checkpointer = TrainingCheckpointer(checkpoint_dir, runner.learner, runner.state, strategy=runner.strategy)
    if resume:
        if checkpointer is None:
            raise ValueError("resume: expected a checkpoint_dir to resume from, got None")
        if not isinstance(runner.env, VecEnv):
            raise ValueError("resume: exact resume needs a TF-native env (gymnasium envs cannot save their state)")
        restored = checkpointer.restore_latest()
        if restored is None:
            raise ValueError(f"resume: expected a checkpoint in {str(checkpoint_dir)!r}, found none")
        runner = runner._replace(state=restored[0])
        rows = restored[1]
    try:
        state, rows, timings, interrupted = _run(runner, config, on_eval, on_progress, rows, checkpointer, should_stop)
    finally:
        runner.close()
    metrics = {name: np.asarray([row[name] for row in rows]) for name in rows[0]} if rows else {}
    state = runner.view(state)
    return PPOResult(config, state, metrics, runner.learner, runner.observation_space, runner.action_space, timings,
                     interrupted)


def _run(runner, config: Config, on_eval, on_progress=None, rows=None, checkpointer=None, should_stop=None):
    """The host loop: rounds of compiled training calls, one evaluation per round, checkpoints.

    Returns (state, metric rows, timings, interrupted)."""
    state = runner.state
    rows = list(rows or [])
    compile_s, first_call, first_eval = 0.0, True, True
    start = time.perf_counter()
    iteration = int(runner.view(state).iteration)
    last_checkpoint = iteration
    # Compile the evaluation on the other core while the first training call compiles (its result is dropped).
    warmup = threading.Thread(target=runner.warmup or (lambda: None), daemon=True)
    warmup.start()
    ends = np.cumsum(_round_sizes(config.num_iterations, config.eval_freq))
    for round_index, end in enumerate(ends):
        if end <= iteration:
            continue  # finished before a resume
        round_start, sums, round_iterations = time.perf_counter(), None, int(end) - iteration
        while iteration < end:
            n = min(config.iterations_per_call, int(end) - iteration)
            t0 = time.perf_counter()
            state, diag = runner.train_step(state, n)
            diag = tf.nest.map_structure(lambda x: float(x.numpy()), diag)
            _check_finite(diag, iteration + n)
            if first_call:
                compile_s += time.perf_counter() - t0
                first_call = False
            sums = diag if sums is None else Diagnostics(*[a + b for a, b in zip(sums, diag)])
            iteration += n
            if on_progress is not None:
                on_progress(iteration * config.rollout_size)
            if checkpointer is not None and config.checkpoint_every and iteration - last_checkpoint >= config.checkpoint_every:
                checkpointer.save(state, rows, iteration)
                last_checkpoint = iteration
            if should_stop is not None and should_stop():
                if checkpointer is not None:
                    checkpointer.save(state, rows, iteration)
                warmup.join()
                return state, rows, _timings(compile_s, start), True
            if config.debug:
                _print_debug(diag, iteration)
        train_wall = time.perf_counter() - round_start
        warmup.join()
        total_steps = iteration * config.rollout_size
        t0 = time.perf_counter()
        mean_diag = Diagnostics(*[tf.constant(x / round_iterations, tf.float32) for x in sums])
        result, extra = runner.eval_step(runner.view(state).rollout.obs_stats, round_index, total_steps, mean_diag)
        if first_eval:  # the first evaluation of this process includes its compilation
            compile_s += time.perf_counter() - t0
            first_eval = False
        row = _round_metrics(config, sums, round_iterations, total_steps, result, train_wall)
        row.update({name: np.asarray(value) for name, value in extra.items()})
        row["time/elapsed_s"] = time.perf_counter() - start
        rows.append(row)
        if on_eval is not None:
            on_eval(row)
        if checkpointer is not None:
            checkpointer.save(state, rows, iteration)
            last_checkpoint = iteration
    warmup.join()  # a resumed run with nothing left to do must not exit while the warm-up compiles (abort at exit)
    return state, rows, _timings(compile_s, start), False


def _timings(compile_s: float, start: float) -> dict[str, float]:
    total_s = time.perf_counter() - start
    return {"compile_s": compile_s, "run_s": total_s - compile_s, "total_s": total_s}


def _print_debug(diag: Diagnostics, iteration: int) -> None:
    """rex's DEBUG output: episode statistics of the iterations just run."""
    episodes = max(diag.episodes, 1.0)
    print(f"[kppo debug] iterations to {iteration}: {diag.episodes:.0f} episodes, "
          f"mean return {diag.episode_return_sum / episodes:.2f}, "
          f"mean length {diag.episode_length_sum / episodes:.1f}", flush=True)


def _check_finite(diag: Diagnostics, iteration: int) -> None:
    """Stops a run whose loss became NaN/inf (nothing is checkpointed after it: the last checkpoint stays good)."""
    bad = [name for name in ("total_loss", "value_loss", "policy_loss", "entropy") if not np.isfinite(getattr(diag, name))]
    if bad:
        raise FloatingPointError(
            f"training: non-finite {', '.join(bad)} in iterations up to {iteration} (an env returning NaN/inf "
            "observations or rewards, or diverging updates); stopped, the last checkpoint is kept"
        )


def _round_metrics(config, sums: Diagnostics, iterations: int, total_steps: int, result, train_wall: float) -> dict:
    mean = Diagnostics(*[x / iterations for x in sums])
    episodes = sums.episodes
    returns, lengths = result.returns.numpy(), result.lengths.numpy().astype(np.float64)
    steps_in_round = iterations * config.rollout_size
    return {
        "train/total_steps": total_steps,
        "train/iterations": total_steps // config.rollout_size,
        "train/mean_approxkl": mean.approx_kl,
        "train/total_loss": mean.total_loss,
        "train/policy_loss": mean.policy_loss,
        "train/value_loss": mean.value_loss,
        "train/entropy": mean.entropy,
        "train/clip_fraction": mean.clip_fraction,
        "train/explained_variance": mean.explained_variance,
        "train/learning_rate": float(learning_rate(config, total_steps // config.rollout_size - 1)),
        "train/grad_norm": mean.grad_norm,
        "train/minibatch_steps": mean.minibatch_steps,
        "rollout/ep_rew_mean": sums.episode_return_sum / episodes if episodes else float("nan"),
        "rollout/ep_len_mean": sums.episode_length_sum / episodes if episodes else float("nan"),
        "eval/mean_returns": float(returns.mean()),
        "eval/std_returns": float(returns.std()),
        "eval/mean_lengths": float(lengths.mean()),
        "eval/std_lengths": float(lengths.std()),
        "eval/total_episodes": int(result.finished.numpy().sum()),
        "time/steps_per_s": steps_in_round / train_wall,
    }

