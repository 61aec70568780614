"""The TF-native runner on one device: rollout + GAE + update compiled into one call that runs n iterations
(`kppo.envs` environments stepped inside the graph), and a compiled deterministic evaluation round."""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo import envs as envs_lib
from kppo._tf import tf
from kppo.core import counter_rng
from kppo.agent.agent import Agent, build_agent
from kppo.envs.base import VecEnv
from kppo.rollout.native import collect_rollout, current_mask, evaluation_episodes, initial_rollout_state
from kppo.training.runners.base import EvalMetricsFn, Iterations, Runner
from kppo.training.runners.programs import run_key, run_programs
from kppo.training.runners.settings import RunSpec, maybe_compile, root_keys, update_batch
from kppo.core.types import RunnerState
from kppo.update.ppo import ppo_update
from kppo.update.driver import drive
from kppo.update.iteration import iteration_step
from kppo.update.diagnostics import zero_diagnostics
from kppo.update.schedules import config_schedules


def make_native_envs(env: str | VecEnv, spec: RunSpec) -> tuple[VecEnv, VecEnv]:
    """(training env, evaluation env). A name builds both (evaluation without fixed_init/offset_step); a VecEnv
    is used for both, wrapped with episode statistics if it lacks them."""
    if isinstance(env, str):
        train_env = envs_lib.make(env, fixed_init=spec.fixed_init, offset_step=spec.offset_step)
        return train_env, envs_lib.make(env)
    if not isinstance(env, envs_lib.EpisodeStatistics):
        env = envs_lib.EpisodeStatistics(env)
    return env, env


def native_observation_dim(space: gym.spaces.Space) -> int:
    """The flat observation length of a TF-native env: a Box of any shape, read as rows (`flat_rows`) by an MLP
    (SB3's MlpPolicy on an image flattens it too) or through a features extractor (`Config.features_extractor`,
    e.g. MinAtar's [10, 10, C] grids through a CNN)."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation_space: expected a Box for a TF-native env, got {space}")
    return int(np.prod(space.shape))


class NativeParts(NamedTuple):
    """What a TF-native runner builds before the first compiled call."""

    train_env: VecEnv
    eval_env: VecEnv
    agent: Agent
    state: RunnerState
    key_eval: tf.Tensor


def build_native(env: str | VecEnv, spec: RunSpec) -> NativeParts:
    """Builds envs, distribution, networks, optimizer and the initial runner state from the run's seed."""
    train_env, eval_env = make_native_envs(env, spec)
    native_observation_dim(train_env.observation_space)  # a one-line error unless a Box
    agent = build_agent(spec.agent, train_env.observation_space, train_env.action_space)
    key_reset, key_train, key_eval = root_keys(spec.seed)
    normalize_obs, action_masks = spec.rollout.normalize_obs, spec.rollout.action_masks
    state = RunnerState(
        initial_rollout_state(train_env, agent, key_reset, spec.num_envs, normalize_obs),
        key_train,
        tf.constant(0, tf.int32),
    )
    current_mask(train_env, agent, state.rollout.env_state, spec.num_envs, action_masks)  # one-line errors now
    return NativeParts(train_env, eval_env, agent, state, key_eval)


def make_iterations_fn(env: VecEnv, agent: Agent, spec: RunSpec) -> Callable:
    """Compiled `(runner_state, n) -> (runner_state, summed Diagnostics)` running n iterations (n is a tensor, so
    a shorter last call does not retrace)."""
    settings, upd = spec.rollout, spec.update
    collect = maybe_compile(lambda s, k: collect_rollout(env, agent, settings, s, k), spec.jit_rollout)
    update = maybe_compile(lambda b, k, s: ppo_update(agent, upd, b, k, s), spec.jit_native_update)
    schedule_fn = config_schedules(spec.schedule)

    def iteration(state: RunnerState):
        return iteration_step(schedule_fn, collect, lambda r, k, s: update(update_batch(spec, r), k, s), state)

    def run_iterations(state: RunnerState, num_iterations: tf.Tensor):
        done = drive(iteration, state, num_iterations, zero_diagnostics())  # a zero accumulator: one traced iteration
        return done.state, done.diagnostics

    return tf.function(run_iterations, autograph=False)


def make_evaluation_fn(env: VecEnv, agent: Agent, spec: RunSpec) -> Callable:
    """Compiled `(obs_stats, key) -> (EvalResult, EvalTrajectory)`: one round's deterministic episodes, under XLA
    when `Config.jit_eval` (None: not for one run; docs/benchmarks/speed.md, "jit flags")."""
    rollout = spec.rollout

    def run_eval(stats, key):
        return evaluation_episodes(
            env, agent, stats, key, spec.num_eval_envs, rollout.normalize_obs, rollout.action_masks, rollout.norm
        )

    return tf.function(maybe_compile(run_eval, spec.jit_eval), autograph=False)


class NativeRunner(Runner):
    """TF-native envs: n iterations in one compiled call (`iterations_fn`), compiled evaluation rounds."""

    def __init__(
        self,
        parts: NativeParts,
        spec: RunSpec,
        iterations_fn: Callable,
        eval_metrics_fn: EvalMetricsFn | None,
        evaluation_fn: Callable | None = None,
    ):
        super().__init__(
            parts.agent, parts.state, parts.train_env.observation_space, parts.train_env.action_space, parts.train_env
        )
        self.parts, self.spec = parts, spec
        self.schedule_fn = config_schedules(spec.schedule)
        self.iterations_fn = iterations_fn  # (state, n) -> (state, summed Diagnostics)
        self.evaluation_fn = evaluation_fn or make_evaluation_fn(parts.eval_env, parts.agent, spec)
        if eval_metrics_fn is not None:  # an in-graph hook: compiled once, as the rounds are
            self.eval_metrics_fn = tf.function(eval_metrics_fn, autograph=False)

    def run_iterations(self, state, n, on_step=None) -> Iterations:
        del on_step  # compiled: the loop calls the step callbacks once per call
        state, diag = self.iterations_fn(state, tf.constant(n))
        return Iterations(state, diag, n)

    def evaluation_episodes(self, obs_stats, round_index):  # on the first replica's statistics
        return self.evaluation_fn(obs_stats, counter_rng.fold_in(self.parts.key_eval, round_index))

    def warmup(self) -> None:
        self.evaluation_round(self.view(self.parts.state).rollout.obs_stats, 0, 0, zero_diagnostics())

    def trace(self) -> None:
        trace = getattr(self.iterations_fn, "get_concrete_function", None)  # a replicated run loops on the host
        if trace is not None:
            trace(self.state, tf.constant(1))
        evaluation: Any = self.evaluation_fn  # a tf.function
        key = counter_rng.fold_in(self.parts.key_eval, 0)
        evaluation.get_concrete_function(self.view(self.parts.state).rollout.obs_stats, key)


def make_native_runner(env: str | VecEnv, spec: RunSpec, eval_metrics_fn: EvalMetricsFn | None = None) -> Runner:
    """The runner of a TF-native run; a later run of the same env name and Config but the seed runs this one's
    compiled programs on its own variables (`programs.run_programs`)."""
    parts = build_native(env, spec)
    spaces = (parts.train_env.observation_space, parts.train_env.action_space)
    iterations_fn, evaluation_fn = run_programs(
        run_key("native", spaces, spec, env) if isinstance(env, str) else None,  # an env object may change
        parts.agent.program_variables,
        lambda: (
            make_iterations_fn(parts.train_env, parts.agent, spec),
            make_evaluation_fn(parts.eval_env, parts.agent, spec),
        ),
    )
    return NativeRunner(parts, spec, iterations_fn, eval_metrics_fn, evaluation_fn)
