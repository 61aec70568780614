"""Populations on gymnasium envs: every member's envs are one gymnasium vector env (member m's `num_envs` envs are the
m-th block, each seeded as that member's single run seeds its own), all members act in one batched numpy call per
step (`kppo.rollout.gymnasium.Acting`), and all members finish their rollouts and update in one compiled program:
the iteration the TF-native population runs (`member_loops.population_iteration`), whose collect is `finish_rollout`
of what the host collected for that member.

A member computes what its single host run computes (`kppo.training.runners.host`): the same envs and seeds, the same
numpy draws from the same keys, the same finish and update on its own weights, statistics and hyperparameters; only
its weights are held as tensors on a member axis and updated by the functional Adam, as in a TF-native population.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo._tf import tf
from kppo.agent.agent import Agent, build_agent
from kppo.agent.numpy_actor import ActorWeights, MemberActors, NumpyActor, snapshot, stack_weights
from kppo.config.options import Config
from kppo.core import normalization
from kppo.core.types import EvalResult, Moments, RunnerState
from kppo.gym_envs.action_masks import MaskReader
from kppo.gym_envs.make import gym_vec_env
from kppo.gym_envs.spaces import normalized_columns
from kppo.gym_envs.vector import GymVecEnv
from kppo.rollout.gymnasium import Acting, HostSteps, host_steps, rollout_rng
from kppo.rollout.finish import finish_rollout
from kppo.training.runners.base import Iterations, Runner
from kppo.training.runners.settings import RunSpec, resolve, root_keys
from kppo.training.runners.host import HostEvaluation, eval_env_source, reset_rollout_state
from kppo.training.runners.member_loops import population_iteration
from kppo.config.population import check_members
from kppo.training.runners.population import MemberValues, MemberWeights, member_values
from kppo.update.driver import drive
from kppo.update.iteration import iteration_keys
from kppo.update.schedules import config_schedules
from kppo.training.runners.settings import agent_spec


class FinishCarry(NamedTuple):
    """The part of a member's host rollout state its compiled finish reads and writes."""

    return_stats: Moments
    discounted_return: tf.Tensor  # float32 [N]
    memory: tuple  # a recurrent agent's memory at the rollout's first step: (h, c) per LSTM, [N, units] each


class HostPopulation(NamedTuple):
    """What a gymnasium population builds before its first call."""

    configs: list[Config]
    specs: list[RunSpec]  # the members' Configs resolved (they differ only in seeds and values)
    vec_env: GymVecEnv  # every member's envs, member m's the m-th block of `num_envs`
    agent: Agent  # the first member's: the networks every member's weights run through
    weights: MemberWeights
    state: RunnerState  # joint host rollout state (statistics [M, ...]); key [M, 2], iteration [M]
    values: MemberValues
    masks: MaskReader | None

    def new_agent(self, config: Config) -> Agent:
        """A fresh single agent for `config` (its networks, before a member's weights are copied in)."""
        return build_agent(agent_spec(config), self.vec_env.observation_space, self.vec_env.action_space)


def _stacked(items: list) -> Any:
    return tf.nest.map_structure(lambda *xs: np.stack([np.asarray(x) for x in xs]), *items)


def _initial_state(vec_env: GymVecEnv, specs: list[RunSpec], agent: Agent, masks: MaskReader | None) -> RunnerState:
    """Member m's envs reset with seeds seed_m + i, its statistics counting its own reset observations."""
    envs = specs[0].num_envs
    obs = vec_env.reset(seed=[s.seed + i for s in specs for i in range(envs)])
    stats = []
    for m, spec in enumerate(specs):
        member = normalization.to_numpy(normalization.initial_stats([vec_env.flat_obs_dim]))
        if spec.rollout.normalize_obs:
            member = normalization.update_moments_np(member, obs[m * envs : (m + 1) * envs])
        stats.append(member)
    count = len(specs)
    return_stats = tf.nest.map_structure(lambda x: tf.stack([x] * count), normalization.initial_stats(()))
    rollout = reset_rollout_state(vec_env, obs, _stacked(stats), return_stats, tf.zeros([count, envs]), masks, agent)
    keys = tf.stack([root_keys(s.seed)[1] for s in specs])
    return RunnerState(rollout, keys, tf.zeros([count], tf.int32))


def build_host_population(env: Any, configs: list[Config]) -> HostPopulation:
    """The joint vector env, every member's agent as its single run builds it (stacked), the initial state."""
    check_members(configs)
    specs = [resolve(config) for config in configs]
    first, count = specs[0], len(specs)
    vec_env = gym_vec_env(env, first.num_envs * count, vectorization=first.vectorization, verbose=first.verbose)
    agents = [build_agent(s.agent, vec_env.observation_space, vec_env.action_space) for s in specs]
    masks = MaskReader(vec_env.vec_env, vec_env.action_space) if first.rollout.action_masks else None
    state = _initial_state(vec_env, specs, agents[0], masks)
    weights, values = MemberWeights(agents), member_values(specs)
    return HostPopulation(configs, specs, vec_env, agents[0], weights, state, values, masks)


def _by_member(x: tf.Tensor, members: int, axis: int) -> tf.Tensor:
    """[..., B, ...] (B at `axis`) -> [M, ..., B / M, ...]: member m's block of envs first."""
    shape = x.shape.as_list()
    split = [*shape[:axis], members, shape[axis] // members, *shape[axis + 1 :]]
    perm = [axis, *(i for i in range(len(split)) if i != axis)]
    return tf.transpose(tf.reshape(x, split), perm)


def member_inputs(steps: HostSteps, members: int) -> HostSteps:
    """What each member's finish reads, with a leading member axis: its envs' trajectory [T, N], features, final
    observations, last observation."""
    traj = tf.nest.map_structure(lambda x: _by_member(x, members, 1), steps.trajectory)
    features = () if steps.features is None else _by_member(steps.features, members, 1)  # (): tf.nest's nothing
    return steps._replace(trajectory=traj, features=features, last_obs=_by_member(steps.last_obs, members, 0))


def make_member_update(population: HostPopulation) -> Callable:
    """Compiled `(FinishCarry [M], keys [M, 2], iterations [M], member inputs) -> (FinishCarry, keys, iterations,
    Diagnostics [M])`: every member's finish + update + diagnostics (`population_iteration`), the population's weights
    updated."""
    spec, agent, weights = population.specs[0], population.agent, population.weights

    def collect(settings, carry, key, inputs):
        del key  # the host drew this rollout's actions from it already
        features = None if isinstance(inputs.features, tuple) else inputs.features
        finished = finish_rollout(agent, settings, *inputs._replace(features=features), *carry)
        return FinishCarry(finished.return_stats, finished.discounted_return, finished.memory), finished.rollout

    member_iteration = population_iteration(spec, agent, collect)

    def run(state: RunnerState, inputs):
        params, adam = weights.read()
        (params, adam, state), diag = member_iteration(params, adam, state, inputs, population.values)
        weights.assign(params, adam)
        return state, diag

    return tf.function(run, jit_compile=spec.jit_population, autograph=False)


def member_snapshots(agent: Agent, params: list[np.ndarray]) -> list[ActorWeights]:
    """Every member's actor snapshot, read from its weights (`params`: [M, ...] each, in `agent.variables` order)."""
    index = {id(v): i for i, v in enumerate(agent.variables)}

    def reader(member: int) -> Callable[[Any], np.ndarray]:
        return lambda variable: params[index[id(variable)]][member]

    return [snapshot(agent.actor, agent.lstm, read=reader(m)) for m in range(len(params[0]))]


def member_acting(agent: Agent, params: list[np.ndarray], keys: list) -> Acting:
    """Every member's actor snapshot, stacked, with the generator of its rollout key."""
    return Acting(stack_weights(member_snapshots(agent, params)), tuple(rollout_rng(k) for k in keys), True)


class HostPopulationRunner(Runner):
    """A population on gymnasium envs: the host steps every member's envs, one compiled call per iteration finishes
    and updates them all; diagnostics, evaluations and scheduled values have a member axis."""

    def __init__(self, env: Any, configs: list[Config]):
        population = build_host_population(env, configs)
        vec_env = population.vec_env
        super().__init__(population.agent, population.state, vec_env.observation_space, vec_env.action_space, vec_env)
        self.population, self.spec = population, population.specs[0]
        self.schedule_fn, self.schedules_from_config = config_schedules(self.spec.schedule, population.values), False
        columns = normalized_columns(vec_env.observation_space, self.spec.normalize_obs_keys)
        self.settings = self.spec.rollout._replace(norm_columns=columns)
        self.update_fn = make_member_update(population)
        self.eval_source = eval_env_source(env)
        count = len(configs) * self.spec.num_eval_envs
        masks = population.masks is not None
        self.evaluation = HostEvaluation(self.eval_source, count, self.spec.vectorization, self.action_space, masks)

    def _iteration(self, state: RunnerState):
        members = len(self.population.configs)
        rollout_keys = [iteration_keys(k)[1] for k in state.key]  # start_iteration's
        params = [p.numpy() for p in self.population.weights.params]
        acting = member_acting(self.agent, params, rollout_keys)
        stepped, steps = host_steps(
            self.env, acting, self.agent.dist, self.settings, state.rollout, None, self.population.masks
        )
        rollout = state.rollout
        memory = tuple(_by_member(tf.constant(m), members, 0) for m in rollout.memory)
        carry = FinishCarry(rollout.return_stats, rollout.discounted_return, memory)
        done, diag = self.update_fn(RunnerState(carry, state.key, state.iteration), member_inputs(steps, members))
        new_rollout = stepped._replace(
            return_stats=done.rollout.return_stats,
            discounted_return=done.rollout.discounted_return,
            memory=tuple(tf.reshape(m, [-1, m.shape[-1]]).numpy() for m in done.rollout.memory),
        )
        return RunnerState(new_rollout, done.key, done.iteration), diag

    def run_iterations(self, state, n, on_step=None) -> Iterations:
        del on_step  # a population takes no callbacks
        return drive(self._iteration, state, n)

    def evaluation_episodes(self, obs_stats, round_index) -> tuple[EvalResult, None]:
        specs, count = self.population.specs, len(self.population.specs)
        per_member = self.spec.num_eval_envs
        params = [p.numpy() for p in self.population.weights.params]
        settings, dist = self.settings, self.agent.dist
        actors = [
            NumpyActor(weights, dist, settings.normalize_obs, settings.norm_columns, settings.norm)
            for weights in member_snapshots(self.agent, params)
        ]
        seeds = [s.seed * 1000 + round_index + i for s in specs for i in range(per_member)]
        result, _ = self.evaluation.episodes(MemberActors(actors), obs_stats, seeds)
        return EvalResult(*(tf.reshape(x, [count, per_member]) for x in result)), None

    def view(self, state) -> RunnerState:
        return state._replace(iteration=state.iteration[0])

    def member_state(self, state: RunnerState, index: int) -> RunnerState:
        """Member `index`'s state as its single host run holds it: its block of envs, its statistics and key."""
        envs, rollout = self.spec.num_envs, state.rollout

        def rows(x):
            return None if x is None else tf.nest.map_structure(lambda a: a[index * envs : (index + 1) * envs], x)

        def own(x):
            return tf.nest.map_structure(lambda a: a[index], x)

        member = rollout._replace(
            obs=rows(rollout.obs),
            discounted_return=own(rollout.discounted_return),
            obs_stats=own(rollout.obs_stats),
            return_stats=own(rollout.return_stats),
            episode_return=rows(rollout.episode_return),
            episode_length=rows(rollout.episode_length),
            raw_obs=rows(rollout.raw_obs),
            action_mask=rows(rollout.action_mask),
            episode_start=rows(rollout.episode_start),
            memory=tuple(rows(m) for m in rollout.memory),
        )
        return RunnerState(member, state.key[index], state.iteration[index])

    def close(self) -> None:
        self.env.close()
        self.evaluation.close()
