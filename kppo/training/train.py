"""`train(env, config, seed) -> PPOResult` (rex/purejaxrl's `train`, in TensorFlow): the front door. It builds the
runner for the env (`kppo.training.runners`), plans the evaluation rounds (`kppo.training.plan`) and runs the one
training loop (`kppo.training.loop.run_loop`, importable from here too) with the caller's hooks
(`kppo.training.hooks`); several seeds or a `Config.sweep` train as one population.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np

from kppo.callbacks import make_callback
from kppo.config.options import Config, Sweep
from kppo.envs.base import VecEnv
from kppo.training.hooks import Hooks
from kppo.training.keras_callbacks import Backup, KerasCallbacks, backup_of, remove_backup, split_callbacks
from kppo.training.metrics import (
    print_population_row,
    print_row,
)
from kppo.training.loop import LoopResult, run_loop
from kppo.training.plan import plan_rounds
from kppo.training.resume import checkpointing
from kppo.training.results import (
    PopulationResult,
    PPOResult,
    TrainingModel,
    is_population,
    metric_columns,
    population_members,
)
from kppo.training.sizes import fits_in_memory
from kppo.training.runners import EvalMetricsFn, Runner, make_population_runner, make_runner
from kppo.training.runners.population import member_agent

__all__ = ["LoopResult", "run_loop", "train"]


def _named(config: Config, env: Any) -> Config:
    """The config with `env` as its env when `env` is a name: the run's saved config, its export's calibration and
    its metadata then name the env it trained on, not the Config's default."""
    return config.replace(env=env) if isinstance(env, str) and env != config.env else config


def train(
    env: Any = None,
    config: Config | Sweep | list[Config] | None = None,
    seed: int | list[int] | None = None,
    *,
    callback: Any = None,
    eval_metrics_fn: EvalMetricsFn | None = None,
    on_eval: Callable[[dict], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    should_stop: Callable[[], bool] | None = None,
    between_rounds: Callable[[Runner, Any, dict], Any] | None = None,
    programs: dict | None = None,
) -> PPOResult | PopulationResult:
    """Trains PPO on a TF-native or a gymnasium environment; or a population (several seeds, a `Config.sweep`) on a
    TF-native environment in one compiled program.

    Args:
        env: a built-in env name (see `kppo.envs.make`; compiled TF-native rollout) or a `kppo.envs.VecEnv`; or a
            gymnasium env id, `gym.Env`, factory or `gym.vector.VectorEnv` (host rollout; see `Config.env_backend`).
            Defaults to `config.env`.
        config: hyperparameters. Defaults to `Config()` (the fixed CartPole setting). A `Config.sweep(...)` trains
            every grid point (with every seed) as one population; a list of Configs trains those members (they
            may differ in seed and `SWEEPABLE` fields: what `kppo.tune` batches).
        seed: overrides `config.seed`; a list of seeds trains one population member per seed (and grid point).
        callback: Stable-Baselines3 callbacks (a `BaseCallback`, a list, or a function `(locals, globals) -> bool`),
            as `PPO.learn` takes them: on gymnasium envs `on_step` runs after every vector step with SB3's `locals`;
            on TF-native envs once per compiled call (`config.iterations_per_call` iterations). False stops training.
            Keras callbacks (`keras.callbacks.Callback`, alone or in the list) run with an epoch = one iteration
            (see `kppo.training.keras_callbacks`).
        eval_metrics_fn: in-graph hook `(total_steps, diagnostics, eval_trajectory) -> dict of tensors`, merged into
            each round's metrics (rex's EVAL_METRICS_JAX_CB).
        on_eval: host callback called with each round's metrics dict (rex's EVAL_METRICS_HOST_CB); defaults to
            printing one line when `config.verbose` >= 1.
        on_progress: host callback called with the number of environment steps so far after every compiled call
            (progress bars).
        checkpoint_dir: write checkpoints here: every `config.checkpoint_every` iterations (0: at round ends), at
            the end, and when `should_stop` says so. Keeps the last 3.
        resume: continue from the newest readable checkpoint in `checkpoint_dir` (TF-native envs: the resumed run
            ends bit-identical to an uninterrupted one on CPU, its metric rows too but for their wall times: a
            checkpoint inside a round holds the round's sums so far).
        should_stop: polled after every compiled call; True -> checkpoint (if a directory is set) and return early
            with `PPOResult.interrupted` set (signal handlers use this).
        between_rounds: `(runner, state, row) -> state`, called after each evaluation round (after `on_eval`,
            before the round's checkpoint); the loop goes on from the state it returns (population-based training
            copies and perturbs members here).
        programs: a dict kept between calls: a TF-native population whose members differ from an earlier one's
            only in seeds and `SWEEPABLE` values reuses its compiled programs instead of tracing and compiling again
            (the same run a fresh program makes; `kppo.tune` passes one across its batches).

    Returns:
        PPOResult; for a population, PopulationResult (one PPOResult per member).
    """
    if is_population(config, seed):
        unsupported = {"callback": callback, "eval_metrics_fn": eval_metrics_fn}
        for name, value in unsupported.items():
            if value is not None:
                raise ValueError(f"{name}: expected None for a population (several seeds or a sweep), got {value!r}")
        hooks = Hooks(on_eval=on_eval, on_progress=on_progress, should_stop=should_stop, between_rounds=between_rounds)
        members = [_named(member, env) for member in population_members(config, seed)]
        with fits_in_memory(members):
            return _train_population(env, members, hooks, checkpoint_dir, resume, programs)
    config = Config() if config is None else config
    if not isinstance(config, Config):  # a Sweep is a population (above)
        raise TypeError(f"config: expected a kppo.Config or a Config.sweep(...), got {type(config).__name__}")
    if seed is not None:
        config = config.replace(seed=seed)
    config = _named(config, env)
    with fits_in_memory([config]):  # a network or buffer too large for the device: one line naming the sizes
        runner = make_runner(env, config, eval_metrics_fn)
        if on_eval is None and config.verbose >= 1:
            on_eval = print_row
        sb3_callback, keras_callbacks = split_callbacks(callback)
        backup = _backup(runner, keras_callbacks, checkpoint_dir)
        checkpoint_every = config.checkpoint_every
        if backup is not None:
            checkpoint_dir, resume, checkpoint_every = backup.directory, backup.resume, backup.every
        _check_resume(runner, checkpoint_dir, resume)
        runner, checkpointer, rows, round_so_far = checkpointing(runner, config, checkpoint_dir, resume, "this config")
        model = TrainingModel(runner, config)
        hooks = Hooks(
            callback=None if sb3_callback is None else make_callback(sb3_callback),
            on_eval=on_eval,
            on_progress=on_progress,
            should_stop=should_stop,
            between_rounds=between_rounds,
            keras=KerasCallbacks(keras_callbacks, runner.agent, config.rollout_size) if keras_callbacks else None,
        )
        if hooks.callback is not None:
            hooks.callback.init_callback(model)
        try:
            plan = plan_rounds(config, int(runner.view(runner.state).iteration))._replace(
                gradient_steps=int(runner.agent.optimizer.iterations.numpy()), round_so_far=round_so_far
            )  # restored by a resume
            result = run_loop(runner, plan, hooks, model, rows, checkpointer, checkpoint_every)
        finally:
            runner.close()
        remove_backup(backup, result.interrupted)
        metrics = metric_columns(result.rows)
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


def _backup(runner: Runner, keras_callbacks: list, checkpoint_dir: Any) -> Backup | None:
    """The run's `BackupAndRestore` as checkpoint settings (the runner's envs closed on a one-line error)."""
    try:
        backup = backup_of(keras_callbacks, isinstance(runner.env, VecEnv))
        if backup is not None and checkpoint_dir is not None:
            raise ValueError(
                "checkpoint_dir: expected None with keras.callbacks.BackupAndRestore (it checkpoints into its "
                f"backup_dir), got {str(checkpoint_dir)!r}"
            )
    except ValueError:
        runner.close()
        raise
    return backup


def _check_resume(runner: Runner, checkpoint_dir: Any, resume: bool) -> None:
    """A one-line error (the runner's envs closed) for a resume of a run on gymnasium envs."""
    if resume and checkpoint_dir is not None and not isinstance(runner.env, VecEnv):
        runner.close()
        raise ValueError("resume: exact resume needs a TF-native env (gymnasium envs cannot save their state)")


def _train_population(
    env: Any, configs: list[Config], hooks: Hooks, checkpoint_dir, resume, programs=None
) -> PopulationResult:
    """`train` for several members: one population runner, the same loop, one PPOResult per member."""
    base = configs[0]
    runner, population = make_population_runner(base.env if env is None else env, configs, programs)
    _check_resume(runner, checkpoint_dir, resume)
    runner, checkpointer, rows, round_so_far = checkpointing(
        runner, base, checkpoint_dir, resume, "this population", population.weights
    )
    if hooks.on_eval is None and base.verbose >= 1:
        hooks = hooks._replace(on_eval=print_population_row)
    plan = plan_rounds(base, int(runner.view(runner.state).iteration))._replace(
        gradient_steps=population.weights.steps.numpy().astype(np.int64), round_so_far=round_so_far
    )  # Adam steps and the round in progress: restored by a resume
    try:
        result = run_loop(runner, plan, hooks, TrainingModel(runner, base), rows, checkpointer, base.checkpoint_every)
    finally:
        runner.close()
    metrics = metric_columns(result.rows)
    members = []
    for index, config in enumerate(configs):
        own = {name: values[:, index] if values.ndim == 2 else values for name, values in metrics.items()}
        members.append(
            PPOResult(
                config,
                runner.member_state(result.state, index),
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
