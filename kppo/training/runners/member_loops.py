"""The parts of a population's iteration, every member's at once: `population_iteration` (the finish of the rollout,
the update's shuffle, its minibatch loop `member_updates`, the diagnostics) and, on TF-native envs, `member_steps` (the
rollout's steps) and `member_evaluation` (an evaluation round). Each member computes what its single run computes, on
its own weights, keys, statistics and values (`kppo.training.runners.population`).

`tf.vectorized_map` (pfor) runs each part for every member at once. The long loops, the rollout's steps, the update's
minibatches and the evaluation's steps, run outside it with a vectorized body (`every_member`), so XLA compiles them as
plain loops whose buffers update in place: pfor converts a loop into a loop around a conditional that copies
everything the loop carries, at every step (`docs/benchmarks/populations.md`, "Measurements behind the defaults").
The shuffle's sort runs outside too. Every
draw comes from `kppo.core.counter_rng`, integer arithmetic that pfor vectorizes over the members' keys and that gives
each member the numbers its single run draws.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.agent.agent import Agent, with_weights
from kppo.core.tf_loops import scan, swap_leading, vectorizing
from kppo.core.types import EvalResult, RunnerState
from kppo.rollout.native import (
    env_step,
    eval_env_step,
    evaluation_over,
    evaluation_result,
    evaluation_start,
)
from kppo.training.runners.settings import RunSpec, update_batch
from kppo.update.ppo import functional_step, minibatch_loop, shuffle_noise, shuffled_rows, update_indices
from kppo.update.iteration import Begun, iteration_keys, make_iteration, start_iteration
from kppo.update.diagnostics import rollout_diagnostics
from kppo.update.schedules import config_schedules, with_schedules, with_values

__all__ = ["every_member", "member_evaluation", "member_steps", "member_updates", "population_iteration"]


class MemberCarry(NamedTuple):
    """What a population's iteration carries: every member's weights, Adam state and runner state [M, ...], with the
    call's inputs (what the host collected, or nothing) and the members' values."""

    params: list
    adam: Any
    state: RunnerState
    inputs: Any
    values: Any


def population_iteration(spec: RunSpec, agent: Agent, collect: Callable) -> Callable:
    """Every member's `iteration_step` on tensor weights, in one program: `(params [M], adam [M], runner state [M],
    inputs [M], MemberValues) -> ((params, adam, runner state), Diagnostics [M])`.

    The iteration's parts are the single run's (`start_iteration`, the update's `minibatch_loop` of
    `functional_step`, `diagnostics`), each member's on its own weights, keys, statistics and values. The rollout's
    finish and the update's shuffle run under `tf.vectorized_map`; the minibatch loop runs outside it, its body
    stepping every member (`member_updates`).

    Args:
        collect: `(RolloutSettings, rollout state, key, inputs) -> (rollout state, Rollout)`, run with the member's
            weights: the finish of the steps a TF-native population took (`member_steps`), or of what the host
            collected (`inputs`, that member's).
    """
    xla = spec.jit_population  # how both population runners compile it
    rotated = spec.update.rotated_steps

    def start(elems):
        (params, state, inputs), values = elems
        rollout_kw = with_values(spec.rollout, values)

        def member_collect(rollout_state, key):
            return with_weights(agent, params, lambda: collect(rollout_kw, rollout_state, key, inputs))

        iteration = state.iteration
        with vectorizing(state.key[0]):  # GAE's loop starts per-member
            state, rollout, key_update, schedules = start_iteration(
                config_schedules(spec.schedule, values), member_collect, state
            )
            settings = member_update_settings(spec, values, schedules)
            batch = update_batch(spec, rollout)
            if rotated:  # sb3-contrib's windows of rows
                order = update_indices(settings, batch.obs.shape[0], key_update)
            else:  # sorted outside the map: the sort's loop would be converted into a loop that copies
                order = shuffle_noise(key_update, batch.obs.shape[0], spec.update.num_epochs)
        return state, rollout_diagnostics(rollout), batch, order, iteration, schedules.learning_rate

    def begin(carry: MemberCarry) -> Begun:
        state, diag, batch, order, iterations, learning_rate = tf.vectorized_map(
            start, ((carry.params, carry.state, carry.inputs), carry.values)
        )
        indices = order if rotated else shuffled_rows(order, spec.update.num_minibatches, network=xla)
        return Begun(carry._replace(state=state), (batch, indices, iterations), diag, learning_rate)

    def update(carry: MemberCarry, work: tuple) -> tuple[MemberCarry, Any]:
        batch, indices, iterations = work
        weights = (carry.params, carry.adam)
        (params, adam), stats = member_updates(agent, spec, weights, batch, indices, iterations, carry.values)
        return carry._replace(params=params, adam=adam), stats

    iteration = make_iteration(begin, update)

    def run(params, adam, state, inputs, values):
        carry, diag = iteration(MemberCarry(params, adam, state, inputs, values))
        return (carry.params, carry.adam, carry.state), diag

    return run


def member_update_settings(spec: RunSpec, values: Any, schedules: Any) -> Any:
    """A member's `UpdateSettings`: its values (`MemberValues`, one member's) and its iteration's `Schedules`."""
    return with_schedules(with_values(spec.update, values), schedules)


def member_updates(agent: Agent, spec: RunSpec, carry: tuple, batch, indices, iterations, values: Any):
    """Every member's update: one `minibatch_loop` whose step runs each member's `functional_step` (under
    `tf.vectorized_map`) with the values scheduled for its iteration (`iterations` [M], before the increment).

    Outside the vectorized map the loop compiles as a plain XLA while loop; pfor would convert it into a loop around
    a conditional that copies everything the loop carries at every minibatch."""

    def step(carry, k, stopped):
        def member(elems):
            member_carry, member_batch, member_indices, iteration, member_values, member_stopped = elems
            schedules = config_schedules(spec.schedule, member_values)(iteration)
            settings = member_update_settings(spec, member_values, schedules)
            update = functional_step(
                agent, settings, spec.adam_style, member_batch, member_indices, schedules.learning_rate
            )
            with vectorizing(schedules.learning_rate):  # a recurrent replay's loop starts per-member
                return update(member_carry, k, member_stopped)

        return tf.vectorized_map(member, (carry, batch, indices, iterations, values, stopped))

    total = spec.update.num_epochs * spec.update.num_minibatches
    return minibatch_loop(step, carry, total, mode="members", members=values.learning_rate.shape[0])


def member_steps(env, agent: Agent, spec: RunSpec, params: list, state: RunnerState, values: Any):
    """Every member's rollout steps: a loop over the steps whose body steps all members (`env_step` on each member's
    weights, keys and values, `every_member`). Returns (rollout states after the steps, trajectories [M, T, ...],
    final observations [M, T, ...]), what `finish_steps` completes inside the member's iteration.

    Outside the vectorized map, the loop compiles as a plain XLA while loop whose buffers update in place; pfor would
    convert it into a loop around a conditional that copies every buffer of the rollout at every step."""
    steps = spec.rollout.num_steps

    def member_keys(key):  # the rollout's key of `start_iteration`, split as `collect_rollout` splits it
        return counter_rng.split(iteration_keys(key)[1], steps)

    keys = swap_leading(tf.vectorized_map(member_keys, state.key))  # [T, M, 2]

    def step(rollout_states, inputs):
        keys_t, t = inputs

        def member_step(member_state, member_values, key):
            return env_step(env, agent, with_values(spec.rollout, member_values), member_state, (key, t))

        return every_member(agent, params, member_step, rollout_states, values, keys_t)

    after, (traj, final_obs) = scan(step, state.rollout, (keys, tf.range(steps)))
    return after, tf.nest.map_structure(swap_leading, traj), swap_leading(final_obs)


def member_evaluation(env, agent: Agent, spec: RunSpec, params: list, stats: Any, keys: tf.Tensor) -> EvalResult:
    """One deterministic evaluation round of every member (`evaluation_episodes`' steps as a loop whose body steps
    every member, `every_member`; it stops when every member's episodes have ended): EvalResult [M, num_eval_envs]."""
    rollout = spec.rollout
    carry, step_keys = tf.vectorized_map(lambda key: evaluation_start(env, agent, key, spec.num_eval_envs), keys)

    def member_step(member_stats, member_carry, key):
        carry, _ = eval_env_step(
            env, agent, member_stats, rollout.normalize_obs, rollout.action_masks, rollout.norm, member_carry, key
        )
        return carry

    def step(carry, keys_t):
        return every_member(agent, params, member_step, stats, carry, keys_t), ()

    carry, _ = scan(step, carry, swap_leading(step_keys), until=evaluation_over)
    return evaluation_result(carry)


def every_member(agent: Agent, params: list, member_step: Callable, *elems) -> Any:
    """`member_step(*elems of one member)` for every member (`tf.vectorized_map`), on that member's weights and traced
    under `vectorizing`; the last of `elems` is the members' step keys [M, 2]."""

    def member(xs):
        member_params, *rest = xs
        with vectorizing(rest[-1][0]):
            return with_weights(agent, member_params, lambda: member_step(*rest))

    return tf.vectorized_map(member, (params, *elems))
