"""The metric vocabulary: kppo's names, their meanings and their Stable-Baselines3 logger keys (`METRICS`), and the
rows built from a round's summed diagnostics and evaluation."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kppo.core.types import Diagnostics, EvalResult


class Metric(NamedTuple):
    """One metric: what it means and the key SB3's logger writes it under (None: SB3 has no such key)."""

    meaning: str
    sb3: str | None = None
    sb3_sign: float = 1.0  # SB3's entropy_loss is minus the entropy


#: Metric names (one value per evaluation round in `PPOResult.metrics`), meanings and SB3 logger keys.
METRICS = {
    "train/total_steps": Metric("environment steps so far", "time/total_timesteps"),
    "train/iterations": Metric("training iterations (rollout + update) so far", "time/iterations"),
    "train/mean_approxkl": Metric("approx KL(old || new), mean over the round's minibatches", "train/approx_kl"),
    "train/total_loss": Metric("PPO loss", "train/loss"),
    "train/policy_loss": Metric("clipped surrogate loss", "train/policy_gradient_loss"),
    "train/value_loss": Metric("value mean squared error", "train/value_loss"),
    "train/entropy": Metric("policy entropy", "train/entropy_loss", -1.0),
    "train/clip_fraction": Metric("fraction of ratios outside [1 - clip, 1 + clip]", "train/clip_fraction"),
    "train/clip_range": Metric("clip range of the round's last iteration", "train/clip_range"),
    "train/explained_variance": Metric(
        "1 - Var(returns - values) / Var(returns) of the rollouts", "train/explained_variance"
    ),
    "train/learning_rate": Metric("learning rate of the round's last iteration", "train/learning_rate"),
    "train/grad_norm": Metric("global gradient norm before clipping"),
    "train/minibatch_steps": Metric("gradient steps per iteration (fewer after a target-KL stop)"),
    "train/gradient_steps": Metric("gradient steps applied so far", "train/n_updates"),
    "rollout/ep_rew_mean": Metric(
        "mean raw return of training episodes finished in the round (NaN if none)", "rollout/ep_rew_mean"
    ),
    "rollout/ep_len_mean": Metric("their mean length", "rollout/ep_len_mean"),
    "eval/mean_returns": Metric(
        "deterministic evaluation: mean first-episode return over num_eval_envs envs", "eval/mean_reward"
    ),
    "eval/std_returns": Metric("its standard deviation"),
    "eval/mean_lengths": Metric("mean episode length", "eval/mean_ep_length"),
    "eval/std_lengths": Metric("its standard deviation"),
    "eval/total_episodes": Metric("evaluation episodes that ended within the time limit"),
    "time/steps_per_s": Metric("environment steps per second in the round (training calls only)", "time/fps"),
    "time/elapsed_s": Metric("wall time since the first compiled call", "time/time_elapsed"),
}
"""Metric names (one value per evaluation round in `PPOResult.metrics`), their meanings and SB3 logger keys."""


class Progress(NamedTuple):
    """Where a run stands when a row is made."""

    total_steps: int
    iterations: int
    gradient_steps: int
    learning_rate: float
    clip_range: float
    elapsed_s: float


def training_row(sums: Diagnostics, iterations: int, rollout_size: int, wall_s: float, progress: Progress) -> dict:
    """The train/, rollout/ and time/ metrics of `iterations` iterations whose diagnostics sum to `sums` (floats, or
    numpy arrays [M] for a population: the metrics are then arrays too)."""
    mean = Diagnostics(*[x / iterations for x in sums])
    episodes = sums.episodes
    return {
        "train/total_steps": progress.total_steps,
        "train/iterations": progress.iterations,
        "train/mean_approxkl": mean.approx_kl,
        "train/total_loss": mean.total_loss,
        "train/policy_loss": mean.policy_loss,
        "train/value_loss": mean.value_loss,
        "train/entropy": mean.entropy,
        "train/clip_fraction": mean.clip_fraction,
        "train/clip_range": progress.clip_range,
        "train/explained_variance": mean.explained_variance,
        "train/learning_rate": progress.learning_rate,
        "train/grad_norm": mean.grad_norm,
        "train/minibatch_steps": mean.minibatch_steps,
        "train/gradient_steps": progress.gradient_steps,
        "rollout/ep_rew_mean": _per_episode(sums.episode_return_sum, episodes),
        "rollout/ep_len_mean": _per_episode(sums.episode_length_sum, episodes),
        "time/steps_per_s": iterations * rollout_size / max(wall_s, 1e-9),
        "time/elapsed_s": progress.elapsed_s,
    }


def _per_episode(total, episodes):
    """total / episodes, NaN where no episode ended (floats or arrays)."""
    if np.ndim(episodes) == 0:
        return total / episodes if episodes else float("nan")
    return np.where(episodes > 0, total / np.maximum(episodes, 1.0), np.nan)


def numpy_value(x: Any) -> Any:
    """A tensor or array as a Python number when 0-d, else as a numpy array (one value per population member)."""
    x = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    return x.item() if x.ndim == 0 else x


def evaluation_row(result: EvalResult) -> dict:
    """The eval/ metrics of one evaluation round (over the last axis: eval envs; a population's are [M, envs])."""
    returns, lengths = result.returns.numpy(), result.lengths.numpy().astype(np.float64)
    return {
        "eval/mean_returns": numpy_value(returns.mean(axis=-1)),
        "eval/std_returns": numpy_value(returns.std(axis=-1)),
        "eval/mean_lengths": numpy_value(lengths.mean(axis=-1)),
        "eval/std_lengths": numpy_value(lengths.std(axis=-1)),
        "eval/total_episodes": numpy_value(result.finished.numpy().sum(axis=-1)),
    }


def sb3_record(row: dict[str, Any]) -> dict[str, Any]:
    """A row under SB3's logger keys (metrics without one are left out); counters and times as ints, as SB3."""
    record = {}
    for name, value in row.items():
        metric = METRICS.get(name)
        if metric is None or metric.sb3 is None:
            continue
        value = value * metric.sb3_sign if metric.sb3_sign != 1.0 else value
        record[metric.sb3] = int(value) if metric.sb3.startswith("time/") or metric.sb3 == "train/n_updates" else value
    return record


def check_finite(diag: Diagnostics, iteration: int) -> None:
    """Stops a run whose loss became NaN/inf (nothing is checkpointed after it: the last checkpoint stays good)."""
    names = ("total_loss", "value_loss", "policy_loss", "entropy")
    bad = [name for name in names if not np.all(np.isfinite(getattr(diag, name)))]
    if bad:
        raise FloatingPointError(
            f"training: non-finite {', '.join(bad)} in iterations up to {iteration} (an env returning NaN/inf "
            "observations or rewards, or diverging updates); stopped, the last checkpoint is kept"
        )


def print_debug(diag: Diagnostics, iteration: int) -> None:
    """rex's DEBUG output: episode statistics of the iterations just run."""
    episodes = max(np.sum(diag.episodes), 1.0)  # a population's: over all members
    print(
        f"[kppo debug] iterations to {iteration}: {np.sum(diag.episodes):.0f} episodes, "
        f"mean return {np.sum(diag.episode_return_sum) / episodes:.2f}, "
        f"mean length {np.sum(diag.episode_length_sum) / episodes:.1f}",
        flush=True,
    )


def print_row(metrics: dict[str, Any]) -> None:
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval {metrics['eval/mean_returns']:9.2f} "
        f"+- {metrics['eval/std_returns']:7.2f}  train ep {metrics['rollout/ep_rew_mean']:9.2f}  "
        f"kl {metrics['train/mean_approxkl']:.4f}  {metrics['time/steps_per_s']:8.0f} steps/s",
        flush=True,
    )


def print_population_row(metrics: dict[str, Any]) -> None:
    returns = np.asarray(metrics["eval/mean_returns"])
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval over {returns.size} members: mean "
        f"{returns.mean():9.2f} +- {returns.std():7.2f}, min {returns.min():9.2f}  "
        f"{metrics['time/steps_per_s'] * returns.size:8.0f} steps/s (all members)",
        flush=True,
    )
