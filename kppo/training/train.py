"""`train(env, config, seed) -> PPOResult` (rex/purejaxrl's `train`, in TensorFlow): builds the runner for the env,
plans the evaluation rounds, and runs the one training loop (`kppo.training.loop`) with the caller's hooks."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from pathlib import Path
from typing import Any
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo.agent import checkpoint
from kppo.agent.agent import Agent, make_policy
from kppo.callbacks import make_callback
from kppo.config.options import Config, Sweep
from kppo.envs.base import VecEnv
from kppo.training.loop import Hooks, Plan, round_sizes, run_loop
from kppo.training.metrics import METRICS
from kppo.agent.policy import ObsScaling, Policy
from kppo.training.resume import checkpointing
from kppo.training.runners import EvalMetricsFn, Runner, make_runner
from kppo.training.runners.population import make_population_runner, member_agent, member_state
from kppo.core.types import RunnerState

__all__ = [
    "METRICS",
    "PPOResult",
    "PopulationResult",
    "TrainingModel",
    "population_members",
    "train",
]


@dataclasses.dataclass
class PPOResult:
    """What `train` returns (rex's PPOResult).

    Attributes:
        config: the Config the run used.
        runner_state: env state, last observations, normalization statistics, RNG key, iteration counter.
        metrics: one row per evaluation round: name -> numpy array [eval_rounds] (see `METRICS`).
        agent: actor, critic, optimizer and distribution (what a checkpoint saves).
        observation_space, action_space: of one env.
        timings: compile_s (first compiled calls), run_s (the rest), total_s (both, excluding setup).
        interrupted: True when `should_stop` ended the run early.
        stopped: True when a callback returned False.
    """

    config: Config
    runner_state: RunnerState
    metrics: dict[str, np.ndarray]
    agent: Agent
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    timings: dict[str, float]
    interrupted: bool = False
    stopped: bool = False

    @property
    def obs_scaling(self) -> ObsScaling:
        return self.policy.obs_scaling

    @functools.cached_property
    def policy(self) -> Policy:
        """The trained policy with the final statistics; SB3's `predict` makes it usable by `evaluate_policy`."""
        return make_policy(
            self.agent,
            self.runner_state.rollout.obs_stats,
            self.config.normalize_obs,
            self.observation_space,
            self.action_space,
            self.config.action_masks,
        )

    @property
    def act_scaling(self):
        return self.policy.act_scaling


@dataclasses.dataclass
class PopulationResult:
    """What `train` returns for several seeds or a `Config.sweep`: one `PPOResult` per member, in member order
    (grid points in order, seeds fastest).

    Attributes:
        members: each member's result (its config, final runner state, metrics, agent: policy and export as usual).
        metrics: one row per evaluation round: name -> array [eval_rounds, members] (shared counters: [eval_rounds];
            `time/steps_per_s` counts one member's steps).
        timings, interrupted: of the whole program.
    """

    members: list[PPOResult]
    metrics: dict[str, np.ndarray]
    timings: dict[str, float]
    interrupted: bool = False

    @property
    def configs(self) -> list[Config]:
        return [member.config for member in self.members]

    @property
    def summary(self) -> dict[str, dict[str, np.ndarray]]:
        """Per metric with a value per member: its mean, std and min over the members, per round."""
        return {
            name: {"mean": values.mean(axis=1), "std": values.std(axis=1), "min": values.min(axis=1)}
            for name, values in self.metrics.items()
            if values.ndim == 2
        }


def population_members(config: Config | Sweep | None, seed: Any) -> list[Config]:
    """The members' configs: every point of a sweep (or the config) with every seed (`seed`: an int or a list)."""
    sweep = config if isinstance(config, Sweep) else Sweep(Config() if config is None else config, {})
    seeds = [sweep.config.seed] if seed is None else [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    if not seeds:
        raise ValueError(f"seed: expected at least one seed, got {seed!r}")
    return sweep.members([int(s) for s in seeds])


def _is_population(config: Any, seed: Any) -> bool:
    return isinstance(config, Sweep) or isinstance(seed, (list, tuple, range, np.ndarray))


class TrainingModel:
    """What callbacks see as `self.model` during `kppo.train`: `num_timesteps`, `predict` (the current policy),
    `save` (an agent directory), `get_env` and `logger` (None)."""

    def __init__(self, runner: Runner, config: Config):
        self.runner, self.config = runner, config
        self.runner_state = runner.state
        self.num_timesteps = int(runner.view(runner.state).iteration) * config.rollout_size
        self.logger = None

    @property
    def policy(self) -> Policy:
        stats = self.runner.view(self.runner_state).rollout.obs_stats
        return make_policy(
            self.runner.agent,
            stats,
            self.config.normalize_obs,
            self.runner.observation_space,
            self.runner.action_space,
            self.config.action_masks,
        )

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: Any = None,
    ):
        return self.policy.predict(observation, state, episode_start, deterministic, action_masks)

    def save(self, path: str | Path) -> None:
        stats = self.runner.view(self.runner_state).rollout
        checkpoint.save(
            path,
            self.config,
            self.runner.agent,
            stats.obs_stats,
            stats.return_stats,
            self.runner.observation_space,
            self.runner.action_space,
        )

    def get_env(self) -> Any:
        """The gymnasium vector env of a gymnasium run; the `kppo.envs.VecEnv` of a TF-native one."""
        return getattr(self.runner.env, "vec_env", self.runner.env)


def _print_metrics(metrics: dict[str, Any]) -> None:
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval {metrics['eval/mean_returns']:9.2f} "
        f"+- {metrics['eval/std_returns']:7.2f}  train ep {metrics['rollout/ep_rew_mean']:9.2f}  "
        f"kl {metrics['train/mean_approxkl']:.4f}  {metrics['time/steps_per_s']:8.0f} steps/s",
        flush=True,
    )


def train(
    env: Any = None,
    config: Config | Sweep | None = None,
    seed: int | list[int] | None = None,
    *,
    callback: Any = None,
    eval_metrics_fn: EvalMetricsFn | None = None,
    on_eval: Callable[[dict], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> PPOResult | PopulationResult:
    """Trains PPO on a TF-native or a gymnasium environment; or a population (several seeds, a `Config.sweep`) on a
    TF-native environment in one compiled program.

    Args:
        env: a built-in env name (see `kppo.envs.make`; compiled TF-native rollout) or a `kppo.envs.VecEnv`; or a
            gymnasium env id, `gym.Env`, factory or `gym.vector.VectorEnv` (host rollout; see `Config.env_backend`).
            Defaults to `config.env`.
        config: hyperparameters. Defaults to `Config()` (the fixed CartPole setting). A `Config.sweep(...)` trains
            every grid point (with every seed) as one population.
        seed: overrides `config.seed`; a list of seeds trains one population member per seed (and grid point).
        callback: Stable-Baselines3 callbacks (a `BaseCallback`, a list, or a function `(locals, globals) -> bool`),
            as `PPO.learn` takes them: on gymnasium envs `on_step` runs after every vector step with SB3's `locals`;
            on TF-native envs once per compiled call (`config.iterations_per_call` iterations). False stops training.
        eval_metrics_fn: in-graph hook `(total_steps, diagnostics, eval_trajectory) -> dict of tensors`, merged into
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
        PPOResult; for a population, PopulationResult (one PPOResult per member).
    """
    if _is_population(config, seed):
        unsupported = {"callback": callback, "eval_metrics_fn": eval_metrics_fn}
        for name, value in unsupported.items():
            if value is not None:
                raise ValueError(f"{name}: expected None for a population (several seeds or a sweep), got {value!r}")
        return _train_population(
            env, population_members(config, seed), on_eval, on_progress, checkpoint_dir, resume, should_stop
        )
    config = Config() if config is None else config
    if not isinstance(config, Config):  # a Sweep is a population (above)
        raise TypeError(f"config: expected a kppo.Config or a Config.sweep(...), got {type(config).__name__}")
    if seed is not None:
        config = config.replace(seed=seed)
    runner = make_runner(env, config, eval_metrics_fn)
    if on_eval is None and config.verbose >= 1:
        on_eval = _print_metrics
    if resume and checkpoint_dir is not None and not isinstance(runner.env, VecEnv):
        raise ValueError("resume: exact resume needs a TF-native env (gymnasium envs cannot save their state)")
    runner, checkpointer, rows = checkpointing(runner, config, checkpoint_dir, resume, "this config")
    model = TrainingModel(runner, config)
    hooks = Hooks(
        callback=None if callback is None else make_callback(callback),
        on_eval=on_eval,
        on_progress=on_progress,
        should_stop=should_stop,
    )
    if hooks.callback is not None:
        hooks.callback.init_callback(model)
    try:
        plan = _plan(config, int(runner.view(runner.state).iteration))._replace(
            gradient_steps=int(runner.agent.optimizer.iterations.numpy())
        )  # restored by a resume
        result = run_loop(runner, plan, hooks, model, rows, checkpointer, config.checkpoint_every)
    finally:
        runner.close()
    metrics = _columns(result.rows)
    return PPOResult(
        config,
        runner.view(result.state),
        metrics,
        runner.agent,
        runner.observation_space,
        runner.action_space,
        result.timings,
        result.interrupted,
        result.stopped,
    )


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """Metric rows -> name: array over rounds (a population's per-member metrics: [rounds, members])."""
    return {name: np.asarray([row[name] for row in rows]) for name in rows[0]} if rows else {}


def _print_population(metrics: dict[str, Any]) -> None:
    returns = np.asarray(metrics["eval/mean_returns"])
    print(
        f"[kppo] steps {int(metrics['train/total_steps']):>9d}  eval over {returns.size} members: mean "
        f"{returns.mean():9.2f} +- {returns.std():7.2f}, min {returns.min():9.2f}  "
        f"{metrics['time/steps_per_s'] * returns.size:8.0f} steps/s (all members)",
        flush=True,
    )


def _train_population(
    env: Any, configs: list[Config], on_eval, on_progress, checkpoint_dir, resume, should_stop
) -> PopulationResult:
    """`train` for several members: one population runner, the same loop, one PPOResult per member."""
    base = configs[0]
    runner, population = make_population_runner(base.env if env is None else env, configs)
    runner, checkpointer, rows = checkpointing(
        runner, base, checkpoint_dir, resume, "this population", population.weights
    )
    if on_eval is None and base.verbose >= 1:
        on_eval = _print_population
    hooks = Hooks(on_eval=on_eval, on_progress=on_progress, should_stop=should_stop)
    plan = _plan(base, int(runner.view(runner.state).iteration))._replace(
        gradient_steps=population.weights.steps.numpy().astype(np.int64)
    )  # Adam steps: restored by a resume
    result = run_loop(runner, plan, hooks, TrainingModel(runner, base), rows, checkpointer, base.checkpoint_every)
    metrics = _columns(result.rows)
    members = []
    for index, config in enumerate(configs):
        own = {name: values[:, index] if values.ndim == 2 else values for name, values in metrics.items()}
        members.append(
            PPOResult(
                config,
                member_state(result.state, index),
                own,
                member_agent(population, index),
                runner.observation_space,
                runner.action_space,
                result.timings,
                result.interrupted,
                result.stopped,
            )
        )
    return PopulationResult(members, metrics, result.timings, result.interrupted)


def _plan(config: Config, iteration: int) -> Plan:
    """`config.eval_rounds` rounds over `config.num_iterations` (a warning when that is fewer than `eval_freq`);
    rounds finished before `iteration` (a resume) are empty and the interrupted one keeps only its remaining
    iterations."""
    if config.eval_rounds < config.eval_freq:
        warnings.warn(
            f"eval_freq: {config.eval_freq} evaluation rounds asked for, but the run has only "
            f"{config.num_iterations} iterations (total_timesteps // rollout_size): evaluating after each"
        )
    ends = np.cumsum(round_sizes(config.num_iterations, config.eval_rounds))
    starts = np.concatenate([[0], ends[:-1]])
    rounds = [int(max(end - max(start, iteration), 0)) for start, end in zip(starts, ends)]
    return Plan(
        rounds,
        True,
        config.iterations_per_call,
        config.rollout_size,
        config.num_iterations * config.rollout_size,
        config.debug,
    )
