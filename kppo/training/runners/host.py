"""The host runner: gymnasium environments stepped in Python, the policy acting in numpy (`kppo.rollout.gymnasium`), one
compiled call per rollout for log-probabilities, values and GAE, then the compiled update (on one device, or sharded
over a tf.distribute strategy's replicas)."""

from __future__ import annotations

import copy
import time
from typing import Any, NamedTuple
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import Agent, build_agent, initial_memory
from kppo.core.distribute import make_strategy
from kppo.gym_envs.action_masks import MaskReader
from kppo.gym_envs.vector import GymVecEnv, vector_env_of
from kppo.gym_envs.make import gym_vec_env
from kppo.gym_envs.spaces import normalized_columns
from kppo.agent.numpy_actor import make_numpy_actor
from kppo.rollout.gymnasium import HostRolloutState, collect_host_rollout, evaluation_episodes
from kppo.rollout.finish import finish_rollout
from kppo.training.runners.base import EvalMetricsFn, Iterations, Runner
from kppo.training.runners.settings import RunSpec, root_keys, update_batch
from kppo.training.runners.programs import run_key, run_programs
from kppo.training.runners.replicated import make_sharded_update
from kppo.core.types import EvalResult, Moments, RunnerState
from kppo.update.ppo import ppo_update
from kppo.update.driver import drive
from kppo.update.iteration import iteration_step
from kppo.update.schedules import ScheduleFn, config_schedules


class Start(NamedTuple):
    """What a host run may start from instead of a fresh agent (the SB3 facade after `load` or `set_env`)."""

    agent: Agent | None = None  # trained networks and optimizer to keep training
    obs_stats: Moments | None = None  # observation statistics to start from
    return_stats: Moments | None = None
    count_reset: bool = True  # count the reset observations in obs_stats (SB3: VecNormalize(training=False) does not)
    from_spec: bool = False  # `agent` is built from the config's spec (trained or not): the config's kept programs fit
    use_masking: bool = True  # read the env's action masks (False: every action allowed, sb3-contrib's learn option)


def eval_env_source(env: Any) -> Any:
    """A source for a second, independent vector env: ids and factories are reused, instances deep-copied."""
    env = vector_env_of(env) or env  # an SB3-style VecEnv: the gymnasium vector env it holds
    if isinstance(env, gym.Env):
        return copy.deepcopy(env)
    if isinstance(env, gym.vector.VectorEnv):
        spec = env.spec or getattr(env, "spec", None)
        if spec is None:
            raise ValueError(
                "env: a gymnasium VectorEnv without a spec cannot be re-created for evaluation; pass an "
                "env id or a factory instead"
            )
        return spec.id
    return env


def _agent(spec: RunSpec, vec_env: GymVecEnv, start: Start, strategy) -> Agent:
    if start.agent is not None and strategy is not None:
        raise ValueError(
            f"distribute: expected 'none' when reusing trained networks (PPO.load/set_env), got {spec.distribute!r}"
        )
    # under a strategy all env shards step on the host; the update runs on the replicas
    return start.agent or build_agent(spec.agent, vec_env.observation_space, vec_env.action_space, strategy=strategy)


def _initial_state(
    vec_env: GymVecEnv, spec: RunSpec, start: Start, masks: MaskReader | None, agent: Agent
) -> RunnerState:
    obs = vec_env.reset(seed=spec.seed)
    obs_stats = normalization.to_numpy(start.obs_stats or normalization.initial_stats([vec_env.flat_obs_dim]))
    if spec.rollout.normalize_obs and start.count_reset:
        obs_stats = normalization.update_moments_np(obs_stats, obs)
    return_stats = start.return_stats or normalization.initial_stats(())
    rollout = reset_rollout_state(vec_env, obs, obs_stats, return_stats, tf.zeros([spec.num_envs]), masks, agent)
    return RunnerState(rollout, root_keys(spec.seed)[1], tf.constant(0, tf.int32))


def reset_rollout_state(
    vec_env: GymVecEnv,
    obs: np.ndarray,
    obs_stats: Moments,
    return_stats: Moments,
    discounted_return: tf.Tensor,
    masks: MaskReader | None,
    agent: Agent,
) -> HostRolloutState:
    """The host rollout state right after `vec_env.reset()` returned `obs`: no episode under way, the reset's masks
    and raw observations, zero memory (a single run's statistics, or a population's stacked per member)."""
    return HostRolloutState(
        obs,
        discounted_return,
        obs_stats,
        return_stats,
        np.zeros(vec_env.num_envs),
        np.zeros(vec_env.num_envs, np.int32),
        vec_env.reset_raw_obs,
        time.perf_counter(),
        masks.reset(vec_env.reset_infos) if masks is not None else None,
        memory=tuple(m.numpy() for m in initial_memory(agent, vec_env.num_envs)),
    )


class HostEvaluation:
    """A gymnasium runner's evaluation envs, made at its first round (`seed`: their first reset's) and closed with the
    runner, and a round's deterministic episodes (`episodes`)."""

    def __init__(self, source: Any, num_envs: int, vectorization: str, action_space, masks: bool, use_masking=True):
        self.source, self.num_envs, self.vectorization = source, num_envs, vectorization
        self.action_space, self.masks, self.use_masking = action_space, masks, use_masking
        self.env: GymVecEnv | None = None
        self.mask_reader: MaskReader | None = None

    def episodes(self, actor: Any, obs_stats: Any, seeds: Any, seed: int | None = None) -> tuple[EvalResult, Any]:
        """One episode per env from `seeds` (an int, or one per env), acted by `actor`: (EvalResult, trajectory)."""
        if self.env is None:
            self.env = gym_vec_env(self.source, self.num_envs, vectorization=self.vectorization, seed=seed)
            if self.masks:
                self.mask_reader = MaskReader(self.env.vec_env, self.action_space, self.use_masking)
        steps = self.env.max_episode_steps or 1000
        return evaluation_episodes(self.env, actor, obs_stats, seeds, steps, self.mask_reader)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


class HostRunner(Runner):
    """Gymnasium envs stepped on the host, the actor in numpy; the compiled update on one device or sharded over a
    strategy's replicas (the state stays on the host: not per-replica).

    Args:
        env: a gymnasium env id, `gym.Env`, factory, vector env or `GymVecEnv`.
        start: trained networks and statistics to continue from (default: a new agent from the run's seed).
        schedule: `iteration -> Schedules` evaluated on the host before every iteration (SB3's schedules, which the
            facade evaluates from `progress_remaining`). Default: the config's schedules (`config_schedules`).
    """

    steps_on_host = True

    def __init__(
        self,
        env: Any,
        spec: RunSpec,
        eval_metrics_fn: EvalMetricsFn | None = None,
        start: Start | None = None,
        schedule: ScheduleFn | None = None,
    ):
        vec_env = (
            env
            if isinstance(env, GymVecEnv)
            else gym_vec_env(env, spec.num_envs, vectorization=spec.vectorization, seed=spec.seed, verbose=spec.verbose)
        )
        start = start or Start()
        strategy = make_strategy(spec.distribute, spec.devices)
        agent = _agent(spec, vec_env, start, strategy)
        self.masks = (
            MaskReader(vec_env.vec_env, vec_env.action_space, start.use_masking) if spec.rollout.action_masks else None
        )
        self.eval_source = eval_env_source(env)  # before training touches an Env instance (the reset below)
        super().__init__(
            agent,
            _initial_state(vec_env, spec, start, self.masks, agent),
            vec_env.observation_space,
            vec_env.action_space,
            vec_env,
        )
        self.spec, self.eval_metrics_fn = spec, eval_metrics_fn
        self.schedule_fn = schedule if schedule is not None else config_schedules(spec.schedule)
        self.schedules_from_config = schedule is None
        columns = normalized_columns(vec_env.observation_space, spec.normalize_obs_keys)
        self.settings = spec.rollout._replace(norm_columns=columns)
        self.last_rollout: Any = None  # the last rollout the update trained on (SB3's `rollout_buffer` reads it)
        self.finish_fn, update = self._programs(start.agent is None or start.from_spec, strategy)

        def remembering(rollout, key, schedules):
            self.last_rollout = rollout
            return update(rollout, key, schedules)

        self.update = remembering
        self.evaluation = HostEvaluation(
            self.eval_source,
            spec.num_eval_envs,
            spec.vectorization,
            self.action_space,
            self.masks is not None,
            start.use_masking,
        )

    def _programs(self, from_config: bool, strategy) -> tuple[Callable, Callable]:
        """(the compiled rollout finish, `(Rollout, key, Schedules) -> UpdateStats`: the compiled update on one
        device, or sharded over the replicas). On one device, an agent built from the config runs the programs of an
        earlier run of the same Config but the seed and spaces, when there was one (`programs.run_programs`)."""
        spec, agent, settings = self.spec, self.agent, self.settings
        upd = spec.update

        def make() -> tuple[Callable, Callable]:
            finish = tf.function(
                lambda *a: finish_rollout(agent, settings, *a), jit_compile=spec.jit_rollout, autograph=False
            )
            compiled = tf.function(
                lambda b, k, s: ppo_update(agent, upd, b, k, s), jit_compile=spec.jit_host_update, autograph=False
            )
            return finish, compiled

        if strategy is not None:
            return make()[0], make_sharded_update(agent, spec, strategy)
        key = run_key("host", (self.observation_space, self.action_space), spec) if from_config else None
        finish, compiled = run_programs(key, agent.program_variables, make)
        return finish, lambda rollout, key, schedules: compiled(update_batch(spec, rollout), key, schedules)

    def run_iterations(self, state: RunnerState, n: int, on_step=None) -> Iterations:
        def collect(rollout_state, key):
            return collect_host_rollout(
                self.env, self.agent, self.settings, self.finish_fn, rollout_state, key, on_step, self.masks
            )

        return drive(lambda st: iteration_step(self.schedule_fn, collect, self.update, st), state, n)

    def evaluation_episodes(self, obs_stats, round_index):
        settings, seed = self.settings, self.spec.seed
        actor = make_numpy_actor(
            self.agent.actor,
            self.agent.dist,
            settings.normalize_obs,
            self.agent.lstm,
            settings.norm_columns,
            settings.norm,
        )
        return self.evaluation.episodes(actor, obs_stats, seed * 1000 + round_index, seed=seed + 1)

    def close(self) -> None:
        self.env.close()
        self.evaluation.close()
