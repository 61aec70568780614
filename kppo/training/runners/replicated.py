"""The replicated runner: TF-native environments under any tf.distribute strategy (mirrored devices, multi_worker,
tpu), and the replicated update the host runner uses for gymnasium envs (see `kppo.core.distribute` for the rules).

Each replica owns an env shard of num_envs / replicas envs and its own RNG stream; per iteration one compiled function
runs every replica's rollout, merges the normalization moments, then the epochs x minibatches as separate
`strategy.run` calls (MirroredStrategy allows no all-reduce inside a tf.while_loop, nor inside a tf.cond branch).
With `target_kl` the minibatch loop runs from the host instead: before each gradient step the replicas' approx KL of
the minibatch (mean over replicas = the KL of the whole minibatch) is read, and the update stops once it exceeds
1.5 x target_kl, as SB3 (and kppo on one device) do.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo.core import losses, normalization
from kppo.core import counter_rng
from kppo._tf import tf
from kppo.agent.agent import Agent, build_agent
from kppo.core.distribute import merge_normalization, on_replica_devices, replica_view
from kppo.envs.base import VecEnv
from kppo.rollout.native import collect_rollout, initial_rollout_state
from kppo.training.runners.base import EvalMetricsFn, Runner
from kppo.training.runners.settings import RunSpec, maybe_compile, root_keys, update_batch
from kppo.training.runners.native import NativeParts, NativeRunner, make_native_envs, native_observation_dim
from kppo.core.types import Rollout, RunnerState
from kppo.update.ppo import (
    UpdateStats,
    gather,
    kl_within,
    minibatch_gradients,
    minibatch_loop,
    minibatch_outputs,
    minibatch_step,
    update_indices,
)
from kppo.update.driver import drive
from kppo.update.diagnostics import rollout_diagnostics
from kppo.update.iteration import Begun, make_iteration, start_iteration
from kppo.update.schedules import Schedules, config_schedules, with_schedules


def shard_size(spec: RunSpec, strategy) -> int:
    """Envs per replica; a one-line error unless num_envs splits evenly into shards whose update batches (rows, or a
    recurrent agent's sequences) split evenly into num_minibatches."""
    replicas, minibatches = strategy.num_replicas_in_sync, spec.update.num_minibatches
    shard = spec.num_envs // replicas
    if spec.num_envs % replicas or shard * spec.update_rows_per_env % minibatches:
        raise ValueError(
            f"num_envs: expected a multiple of the {replicas} replicas whose shard's update batch divides into "
            f"num_minibatches={minibatches}, got {spec.num_envs}"
        )
    return shard


def build_replicated(env: str | VecEnv, spec: RunSpec, strategy) -> NativeParts:
    """`build_native` under a tf.distribute strategy: networks and optimizer created in its scope (mirrored), each
    replica with its own env shard of num_envs / replicas envs and its own RNG stream (keys folded with the replica
    id)."""
    shard = shard_size(spec, strategy)
    train_env, eval_env = make_native_envs(env, spec)
    obs_dim = native_observation_dim(train_env.observation_space)
    agent = build_agent(spec.agent, train_env.observation_space, train_env.action_space, strategy=strategy)
    key_reset, key_train, key_eval = root_keys(spec.seed)

    def replica_state(context):
        replica = context.replica_id_in_sync_group
        fold = counter_rng.fold_in
        rollout = initial_rollout_state(train_env, agent, fold(key_reset, replica), shard, spec.rollout.normalize_obs)
        return RunnerState(rollout, fold(key_train, replica), tf.constant(0, tf.int32))

    state = strategy.experimental_distribute_values_from_function(replica_state)
    # each shard's reset observations (collectives run inside a tf.function: eager ones clash with traced ones)
    start = normalization.initial_stats([obs_dim]), normalization.initial_stats(())
    state = tf.function(lambda s: merge_normalization(strategy, *start, s), autograph=False)(state)
    state = on_replica_devices(strategy, state)  # the merge passes most values through: they sit on the first device
    return NativeParts(train_env, eval_env, agent, state, key_eval)


class ReplicaUpdate(NamedTuple):
    """The distributed update over per-replica (batch, indices) with this iteration's `Schedules`: `unrolled` is traced
    into a caller's tf.function (all epochs x minibatches as separate `strategy.run` calls: `minibatch_loop`'s
    "unrolled" mode); `with_kl_stop` runs them from the host ("host" mode) and stops at SB3's target-KL test. Both
    return the update's sums (`UpdateStats`)."""

    unrolled: Callable
    with_kl_stop: Callable


def make_replica_update(agent: Agent, spec: RunSpec, strategy) -> ReplicaUpdate:
    """The update over the replicas (the learning rate assigned to the mirrored optimizer before the minibatches)."""
    upd = spec.update._replace(target_kl=None)  # the KL stop is decided outside the replicas
    steps = spec.update.num_epochs * spec.update.num_minibatches
    mean = tf.distribute.ReduceOp.MEAN

    def reduce(nest):
        return tf.nest.map_structure(lambda x: strategy.reduce(mean, x, axis=None), nest)

    # One function per replica, called (not inlined) by each unrolled step with k as a tensor: the step is traced
    # and graph-optimized once per replica instead of epochs x minibatches times (docs/benchmarks/devices.md,
    # "Measurements behind the defaults").
    @tf.function(autograph=False, experimental_attributes={"_noinline": True})
    def replica_minibatch(batch, indices, k, schedules):
        info, grad_norm, _ = minibatch_step(agent, with_schedules(upd, schedules), gather(batch, indices, k))
        return info, grad_norm

    def unrolled(batch, indices, schedules: Schedules) -> UpdateStats:
        agent.optimizer.learning_rate.assign(schedules.learning_rate)

        def step(carry, k, stopped):
            info, grad_norm = reduce(strategy.run(replica_minibatch, args=(batch, indices, k, schedules)))
            return carry, info, grad_norm, True

        return minibatch_loop(step, (), steps, mode="unrolled")[1]  # unrolled on purpose (the module docstring)

    minibatch_call = tf.function(
        lambda b, i, k, s: reduce(strategy.run(replica_minibatch, args=(b, i, k, s))), autograph=False
    )

    def replica_kl(batch, indices, k):  # the KL only: no collective inside (they clash across functions, measured)
        mb, params, _ = minibatch_outputs(agent, upd, gather(batch, indices, k))
        return losses.approx_kl(agent.dist.log_prob(params, mb.action), mb.log_prob)

    kl_call = tf.function(
        lambda b, i, k: strategy.reduce(mean, strategy.run(replica_kl, args=(b, i, k)), axis=None), autograph=False
    )

    def replica_probe(batch, indices, k, schedules):  # a minibatch computed, not applied (the one that stops)
        info, _, grad_norm = minibatch_gradients(agent, with_schedules(upd, schedules), gather(batch, indices, k))
        return info, grad_norm

    probe_call = tf.function(lambda b, i, k, s: reduce(strategy.run(replica_probe, args=(b, i, k, s))), autograph=False)

    def with_kl_stop(batch, indices, schedules: Schedules) -> UpdateStats:
        agent.optimizer.learning_rate.assign(schedules.learning_rate)

        def step(carry, k, stopped):
            if kl_within(float(kl_call(batch, indices, k)), spec.update.target_kl):
                return (carry, *minibatch_call(batch, indices, k, schedules), True)
            return (carry, *probe_call(batch, indices, k, schedules), False)  # counted as on one device

        return minibatch_loop(step, (), steps, mode="host")[1]

    return ReplicaUpdate(unrolled, with_kl_stop)


def make_replicated_iterations_fn(env: VecEnv, agent: Agent, spec: RunSpec, strategy, view) -> Callable:
    """`(per-replica state, n) -> (state, summed Diagnostics)` under `strategy`, iterations looped on the host
    (`drive`'s Python mode), each one compiled call (or, with target_kl, a compiled rollout and the host's
    minibatch loop)."""
    settings, upd = spec.rollout, spec.update
    collect = maybe_compile(lambda s, k: collect_rollout(env, agent, settings, s, k), spec.jit_rollout)
    replica_update = make_replica_update(agent, spec, strategy)
    schedule_fn = config_schedules(spec.schedule)  # evaluated on the host, passed into the compiled iteration

    def replica_rollout(state: RunnerState, schedules):
        state, rollout, key_update, _ = start_iteration(lambda iteration: schedules, collect, state)
        batch = update_batch(spec, rollout)
        return state, batch, update_indices(upd, batch.obs.shape[0], key_update), rollout_diagnostics(rollout)

    def rollout(state, schedules):
        base = view(state).rollout
        state, batch, indices, partial = strategy.run(replica_rollout, args=(state, schedules))
        partial = tf.nest.map_structure(lambda x: strategy.reduce(tf.distribute.ReduceOp.MEAN, x, axis=None), partial)
        return merge_normalization(strategy, base.obs_stats, base.return_stats, state), batch, indices, partial

    if upd.target_kl is None:  # the whole iteration in one compiled call
        run_iteration = tf.function(replicated_iteration(rollout, replica_update.unrolled), autograph=False)
    else:  # the rollout compiled, the minibatch loop on the host
        run_iteration = replicated_iteration(tf.function(rollout, autograph=False), replica_update.with_kl_stop)

    def run_iterations(state, num_iterations):
        done = drive(lambda st: run_iteration(st, schedule_fn(int(view(st).iteration))), state, num_iterations)
        return done.state, done.diagnostics

    return run_iterations


class Scheduled(NamedTuple):
    """A replicated iteration's carry: the per-replica runner state and the schedules the host computed for it."""

    state: Any
    schedules: Schedules


def replicated_iteration(rollout_fn: Callable, update: Callable) -> Callable:
    """The one iteration (`make_iteration`) under a strategy: `(per-replica state, Schedules) -> (state,
    Diagnostics)`; `rollout_fn` runs `start_iteration` on every replica and merges their statistics, `update` the
    all-reduced minibatch steps."""

    def begin(carry: Scheduled) -> Begun:
        state, batch, indices, partial = rollout_fn(carry.state, carry.schedules)
        return Begun(carry._replace(state=state), (batch, indices), partial, carry.schedules.learning_rate)

    def on_replicas(carry: Scheduled, work: tuple) -> tuple[Scheduled, UpdateStats]:
        return carry, update(*work, carry.schedules)

    iteration = make_iteration(begin, on_replicas)

    def run(state, schedules: Schedules):
        carry, diag = iteration(Scheduled(state, schedules))
        return carry.state, diag

    return run


class ReplicatedRunner(NativeRunner):
    """TF-native envs under `strategy`: replica shards, merged statistics, the all-reduced update; metrics,
    evaluation and checkpoints read the first replica's state."""

    def __init__(self, parts: NativeParts, spec: RunSpec, strategy, eval_metrics_fn: EvalMetricsFn | None):
        self.strategy, self.replica_view = strategy, replica_view(strategy)
        iterations_fn = make_replicated_iterations_fn(parts.train_env, parts.agent, spec, strategy, self.view)
        super().__init__(parts, spec, iterations_fn, eval_metrics_fn)

    def view(self, state) -> RunnerState:
        return self.replica_view(state)


def make_replicated_runner(
    env: str | VecEnv, spec: RunSpec, strategy, eval_metrics_fn: EvalMetricsFn | None = None
) -> Runner:
    """The Runner for TF-native envs under `strategy` (replica shards, merged statistics, all-reduced update)."""
    return ReplicatedRunner(build_replicated(env, spec, strategy), spec, strategy, eval_metrics_fn)


def make_sharded_update(agent: Agent, spec: RunSpec, strategy) -> Callable:
    """The gymnasium path's update under `strategy`: `(Rollout, key, Schedules) -> UpdateStats` on a rollout collected
    on the host for all num_envs envs; replica r trains on envs [r * shard, (r + 1) * shard) with its own
    minibatch permutation (key folded with r)."""
    shard = shard_size(spec, strategy)
    replica_update = make_replica_update(agent, spec, strategy)
    upd = spec.update

    def replica_shard(rollout, key):
        replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int32)
        columns = tf.range(shard) + replica * shard
        batch = update_batch(spec, tf.nest.map_structure(lambda x: tf.gather(x, columns, axis=1), rollout))
        key = counter_rng.fold_in(key, replica)
        return batch, update_indices(upd, batch.obs.shape[0], key)

    shard_call = tf.function(lambda *args: strategy.run(replica_shard, args=args), autograph=False)
    unrolled_call = tf.function(replica_update.unrolled, autograph=False)

    def update(rollout: Rollout, key, schedules: Schedules) -> UpdateStats:
        batch, indices = shard_call(rollout, key)
        run = unrolled_call if upd.target_kl is None else replica_update.with_kl_stop
        return run(batch, indices, schedules)

    return update
