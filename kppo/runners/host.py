"""The host runner: gymnasium environments stepped in Python, the policy acting in numpy (`kppo.host_rollout`), one
compiled call per rollout for log-probabilities, values and GAE, then the compiled update (on one device, or sharded
over a tf.distribute strategy's replicas)."""

from __future__ import annotations

import copy
import time
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from kppo import normalization
from kppo._tf import tf
from kppo.agent import Agent, initial_memory, make_agent
from kppo.config import Config
from kppo.distribute import make_strategy
from kppo.envs.action_masks import MaskReader
from kppo.envs.gymnasium import GymVecEnv, make_vec_env
from kppo.host_policy import host_actor
from kppo.host_rollout import HostRolloutState, RolloutStopped, collect_host_rollout, evaluate_host, finish_rollout
from kppo.runners.base import (EvalMetricsFn, Iterations, Runner, ScheduleVariables, add_diagnostics, iteration_step,
                               jit_update, make_learning_rate_fn, rollout_settings, root_keys, update_batch,
                               update_settings)
from kppo.runners.replicated import make_sharded_update
from kppo.types import MeanStd, RunnerState
from kppo.update import ppo_update


class Start(NamedTuple):
    """What a host run may start from instead of a fresh agent (the SB3 facade after `load` or `set_env`)."""

    agent: Agent | None = None  # trained networks and optimizer to keep training
    obs_stats: MeanStd | None = None  # observation statistics to start from
    return_stats: MeanStd | None = None
    count_reset: bool = True  # count the reset observations in obs_stats (SB3: VecNormalize(training=False) does not)


def eval_env_source(env: Any) -> Any:
    """A source for a second, independent vector env: ids and factories are reused, instances deep-copied."""
    if isinstance(env, gym.Env):
        return copy.deepcopy(env)
    if isinstance(env, gym.vector.VectorEnv):
        spec = env.spec or getattr(env, "spec", None)
        if spec is None:
            raise ValueError("env: a gymnasium VectorEnv without a spec cannot be re-created for evaluation; pass an "
                             "env id or a factory instead")
        return spec.id
    return env


def _agent(config: Config, vec_env: GymVecEnv, start: Start, strategy) -> Agent:
    if strategy is None:
        return start.agent or make_agent(config, vec_env.flat_obs_dim, vec_env.action_space)
    if start.agent is not None:
        raise ValueError("distribute: expected 'none' when reusing trained networks (PPO.load/set_env), "
                         f"got {config.distribute!r}")
    with strategy.scope():  # all env shards step on the host; the update runs on the replicas
        return make_agent(config, vec_env.flat_obs_dim, vec_env.action_space)


def _initial_state(vec_env: GymVecEnv, config: Config, start: Start, masks: MaskReader | None,
                   agent: Agent) -> RunnerState:
    obs = vec_env.reset(seed=config.seed)
    obs_stats = normalization.to_host(start.obs_stats or normalization.initial_stats([vec_env.flat_obs_dim]))
    if config.normalize_obs and start.count_reset:
        obs_stats = normalization.update_moments_host(obs_stats, obs)
    rollout = HostRolloutState(
        obs, tf.zeros([config.num_envs]), obs_stats, start.return_stats or normalization.initial_stats(()),
        np.zeros(config.num_envs), np.zeros(config.num_envs, np.int32), vec_env.reset_raw_obs, time.perf_counter(),
        masks.reset(vec_env.reset_infos) if masks is not None else None,
        memory=tuple(m.numpy() for m in initial_memory(agent, config.num_envs)),
    )
    return RunnerState(rollout, root_keys(config.seed)[1], tf.constant(0, tf.int32))


def make_host_runner(env: Any, config: Config, eval_metrics_fn: EvalMetricsFn | None = None, start: Start = Start(),
                     schedule: ScheduleVariables | None = None) -> Runner:
    """The Runner for a gymnasium env id, `gym.Env`, factory, vector env or `GymVecEnv`.

    Args:
        start: trained networks and statistics to continue from (default: a new agent from `config.seed`).
        schedule: clip-range variables the host sets before every iteration (SB3 schedules); the learning rate is
            then also set from the host, on the optimizer.
    """
    vec_env = env if isinstance(env, GymVecEnv) else make_vec_env(
        env, config.num_envs, vectorization=config.vectorization, seed=config.seed, verbose=config.verbose)
    strategy = make_strategy(config.distribute, config.devices)
    agent = _agent(config, vec_env, start, strategy)
    masks = MaskReader(vec_env.vec_env, vec_env.action_space) if config.action_masks else None
    settings, upd = rollout_settings(config), update_settings(config, schedule)
    finish_fn = tf.function(lambda *a: finish_rollout(agent, settings, *a), jit_compile=config.jit_rollout,
                            autograph=False)
    if strategy is None:
        compiled_update = tf.function(lambda b, k: ppo_update(agent, upd, b, k), jit_compile=jit_update(config, True),
                                      autograph=False)
        update = lambda rollout, key: compiled_update(update_batch(config, rollout), key)  # noqa: E731
    else:
        update = make_sharded_update(agent, config, strategy)
    learning_rate_fn = make_learning_rate_fn(config, agent, host_scheduled=schedule is not None)
    eval_source = eval_env_source(env)  # before training touches an Env instance
    eval_parts: dict[str, Any] = {}  # the evaluation env and policy, made on the first evaluation

    def run_iterations(state: RunnerState, n: int, on_step=None) -> Iterations:
        total, completed = None, 0

        def collect(rollout_state, key):
            return collect_host_rollout(vec_env, agent, settings, finish_fn, rollout_state, key, on_step, masks)

        for _ in range(n):
            try:
                state, diag = iteration_step(learning_rate_fn, collect, update, state)
            except RolloutStopped as stop:
                return Iterations(state._replace(rollout=stop.state), total, completed, stopped=True)
            total, completed = add_diagnostics(total, diag), completed + 1
        return Iterations(state, total, completed)

    def evaluate_round(obs_stats, round_index, total_steps, diag):
        if not eval_parts:
            eval_parts["env"] = make_vec_env(eval_source, config.num_eval_envs,
                                             vectorization=config.vectorization, seed=config.seed + 1)
            eval_parts["masks"] = MaskReader(eval_parts["env"].vec_env, vec_env.action_space) if masks else None
        eval_env = eval_parts["env"]
        actor = host_actor(agent.actor, agent.dist, config.normalize_obs, agent.memory)
        result, trajectory = evaluate_host(eval_env, actor, obs_stats, config.seed * 1000 + round_index,
                                           eval_env.max_episode_steps or 1000, eval_parts["masks"])
        extra = eval_metrics_fn(tf.constant(total_steps, tf.int64), diag, trajectory) if eval_metrics_fn else {}
        return result, extra

    def close():
        vec_env.close()
        if eval_parts:
            eval_parts["env"].close()

    def clip_range() -> float:
        return float(schedule.clip_range.numpy()) if schedule is not None else config.clip_range

    return Runner(agent, _initial_state(vec_env, config, start, masks, agent), run_iterations, evaluate_round,
                  vec_env.observation_space, vec_env.action_space, vec_env, close, clip_range,
                  steps_on_host=True)  # the state stays on the host: not per-replica
