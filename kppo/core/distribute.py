"""tf.distribute: strategy resolution, the cross-replica rules (gradients, advantage moments, normalization merge)
and the replica-state helpers checkpoints use; the replicated runner itself is `kppo.training.runners.replicated`.

One code path: with no strategy (distribute="none") nothing here changes the computation. Under a strategy each
replica runs its own environment shard, rollout and GAE; per minibatch each replica computes the gradient of its own
shard, the gradients are all-reduced (mean over replicas), clipped by global norm, then applied. Keras 3's optimizer
sums gradients over replicas again inside `apply_gradients` (keras/src/backend/tensorflow/optimizer.py,
`_all_reduce_sum_gradients`), so the clipped mean is divided by the number of replicas first; Keras' own
`global_clipnorm` would clip each replica's gradient before the all-reduce, which is wrong: its update is off a
single-device one by far more than float32 rounding, this rule's is not (`docs/benchmarks/devices.md`, "Measurements
behind the defaults").

MirroredStrategy forbids synchronization points (all-reduce, optimizer apply) inside `tf.while_loop`, so the
distributed update runs its epochs x minibatches as separate `strategy.run` calls in one traced function, and the
iterations of a call run from the host. Advantages are normalized over the whole minibatch (moments all-reduced
across the replicas' shards, `minibatch_moments`), as on one device. Observation and return moments are
merged across replicas after every rollout (Chan merge, `merge_normalization`): during a rollout each replica adds
only its own shard's samples to the common moments, as the envs of one device would add theirs step by step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from kppo._tf import tf
from kppo.config.choices import DISTRIBUTE
from kppo.core.errors import reason
from kppo.core.normalization import merge_from_sums, merge_replicas

_STRATEGY_CACHE: dict = {}  # MultiWorkerMirroredStrategy and TPU initialization may happen once per process


def make_strategy(name: str, devices: tuple[str, ...] | None = None) -> tf.distribute.Strategy | None:
    """None for "none"; a MirroredStrategy over `devices` (default: all local GPUs, else the CPU); a
    MultiWorkerMirroredStrategy from the TF_CONFIG environment variable; a TPUStrategy from a TPUClusterResolver
    (TPU VM: `tpu="local"`). Each is created once per process (per device list) and reused."""
    if name == "none":
        return None
    if name == "mirrored":
        # One strategy per device list and process: every new MirroredStrategy numbers its collectives from the same
        # keys, and the process's collective runtime keeps each key's tensor shape, so a second run with other
        # network shapes would fail ("Shape mismatch in the collective instance").
        key = (name, tuple(devices) if devices else None)
        if key not in _STRATEGY_CACHE:
            _STRATEGY_CACHE[key] = tf.distribute.MirroredStrategy(list(devices) if devices else None)
        return _STRATEGY_CACHE[key]
    if name in _STRATEGY_CACHE:
        return _STRATEGY_CACHE[name]
    if name == "multi_worker":
        try:
            cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
        except (json.JSONDecodeError, AttributeError):
            cluster = {}
        if not cluster:
            raise ValueError(
                "distribute: 'multi_worker' reads the cluster from TF_CONFIG, expected "
                '{"cluster": {"worker": [...]}, "task": {...}}, got '
                f"{os.environ.get('TF_CONFIG')!r}"
            )
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif name == "tpu":
        strategy = _tpu_strategy()
    else:
        raise ValueError(f"distribute: expected one of {DISTRIBUTE}, got {name!r}")
    _STRATEGY_CACHE[name] = strategy
    return strategy


def _tpu_strategy() -> tf.distribute.Strategy:
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=os.environ.get("TPU_NAME", "local"))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as err:
        raise ValueError(f"distribute: 'tpu' needs a TPU, found none ({reason(err)})") from None
    return tf.distribute.TPUStrategy(resolver)


def _cluster(strategy: tf.distribute.Strategy | None):
    """The cluster resolver of a MultiWorkerMirroredStrategy, else None."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return strategy.cluster_resolver
    return None


def is_chief(strategy: tf.distribute.Strategy | None) -> bool:
    """True except on the non-chief workers of a multi-worker cluster (worker 0 is the chief without a "chief")."""
    resolver = _cluster(strategy)
    if resolver is None:
        return True
    return resolver.task_type in (None, "chief") or (
        resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()
    )


def worker_id(strategy: tf.distribute.Strategy | None) -> int:
    resolver = _cluster(strategy)
    return 0 if resolver is None else int(resolver.task_id or 0)


def num_replicas() -> int:
    """Replicas of the current replica context (1 outside any strategy)."""
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


def minibatch_moments(x: tf.Tensor, ddof: int = 0) -> tuple[tf.Tensor, tf.Tensor]:
    """Mean and variance of x [N] over the whole minibatch (population variance, or with `ddof=1` the sample
    variance): under a strategy, over every replica's (equal-sized) shard, so advantage normalization matches one
    device's."""
    n = x.shape[0] * num_replicas()
    if num_replicas() == 1:
        mean, var = tf.nn.moments(x, axes=[0])
    else:
        context = tf.distribute.get_replica_context()
        mean, square = context.all_reduce(
            tf.distribute.ReduceOp.MEAN, [tf.reduce_mean(x), tf.reduce_mean(tf.square(x))]
        )
        var = tf.maximum(square - tf.square(mean), 0.0)
    return mean, var * (n / (n - ddof)) if ddof else var


def clip_and_scale(grads: list, max_grad_norm: float) -> tuple[list, tf.Tensor]:
    """All-reduce (mean), clip by global norm, and pre-divide by the replica count for Keras' own sum.

    With one replica this is exactly `tf.clip_by_global_norm`. Returns (gradients for `apply_gradients`, global norm
    of the mean gradient before clipping).
    """
    n = num_replicas()
    if n > 1:
        grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, grads)
    clipped, norm = tf.clip_by_global_norm(grads, max_grad_norm)
    if n > 1:
        clipped = [g / n for g in clipped]
    return clipped, norm


def _all_local(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process holds every replica's values (one machine), so merges need no collectives. With two
    replicas on one machine's logical CPU devices, all-reduces added to the rollout function clash with the update's
    gradient all-reduce ("Shape mismatch in the collective instance"), so a single machine merges from its local
    results instead."""
    resolver = _cluster(strategy)
    return resolver is None or sum(len(tasks) for tasks in resolver.cluster_spec().as_dict().values()) <= 1


def merge_normalization(strategy: tf.distribute.Strategy, base_obs, base_return, state):
    """Per-replica runner `state` with every replica's observation and return moments replaced by their merge;
    `base_obs`/`base_return` are the moments all replicas started from. One machine merges its local replicas'
    values (`merge_replicas`); a multi-worker cluster all-reduces the sums (`merge_from_sums`). After the merge all
    replicas normalize with the moments of every shard's samples, as one device would."""
    names, bases = ("obs_stats", "return_stats"), (base_obs, base_return)

    def assign(replica_state, merged):
        return replica_state._replace(rollout=replica_state.rollout._replace(**merged))

    if _all_local(strategy):
        local = [s.rollout for s in strategy.experimental_local_results(state)]
        merged = {name: merge_replicas(base, [getattr(r, name) for r in local]) for name, base in zip(names, bases)}
        return strategy.run(assign, args=(state, merged))

    device = strategy.extended.worker_devices[0]  # placed: a collective needs its input's device (multi-worker)

    def merge(replica_state, bases):
        context = tf.distribute.get_replica_context()
        merged = {}
        with tf.device(device):
            for name, base in zip(names, bases):
                mine = getattr(replica_state.rollout, name)

                def total(f, mine=mine):  # identity: an op with a device
                    return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.identity(f(mine)))

                merged[name] = merge_from_sums(base, context.num_replicas_in_sync, total)
        return assign(replica_state, merged)

    return strategy.run(merge, args=(state, bases))


def replica_values(strategy: tf.distribute.Strategy, state) -> tuple:
    """Every replica's runner state (across all workers), as a tuple of plain nests, so the chief can checkpoint the
    env states and RNG streams of the whole cluster: local results on one machine, all-gathered across workers."""
    count = strategy.num_replicas_in_sync
    if _all_local(strategy):

        def pick(x, i):
            local = strategy.experimental_local_results(x)
            return local[i] if len(local) > 1 else local[0]  # a leaf every replica shares comes back as one tensor

        return tuple(tf.nest.map_structure(lambda x, i=i: pick(x, i), state) for i in range(count))

    device = strategy.extended.worker_devices[0]

    def gather_leaf(x):  # collective gathers take no bool on CPU (as int32 and back) and crash on empty tensors
        context = tf.distribute.get_replica_context()
        if x.shape.num_elements() == 0:
            return tf.zeros([count, *x.shape], x.dtype)
        with tf.device(device):
            wide = tf.cast(x, tf.int32) if x.dtype == tf.bool else x
            out = context.all_gather(tf.expand_dims(wide, 0), axis=0)
        return tf.cast(out, tf.bool) if x.dtype == tf.bool else out

    stacked = tf.nest.map_structure(
        lambda x: strategy.experimental_local_results(x)[0],
        strategy.run(lambda s: tf.nest.map_structure(gather_leaf, s), args=(state,)),
    )
    return tuple(tf.nest.map_structure(lambda x, i=i: x[i], stacked) for i in range(count))


def from_replica_values(strategy: tf.distribute.Strategy, values: tuple):
    """Inverse of `replica_values` for runner states, laid out as the training step returns them: replica i
    (counted across workers) gets values[i] on its device; on one machine the merged normalization moments are one
    tensor all replicas share."""
    if len(values) != strategy.num_replicas_in_sync:
        raise ValueError(
            f"checkpoint: expected a state for each of {strategy.num_replicas_in_sync} replicas, got {len(values)}"
        )
    state = strategy.experimental_distribute_values_from_function(
        lambda context: values[context.replica_id_in_sync_group]
    )
    if _all_local(strategy):
        shared = {name: getattr(values[0].rollout, name) for name in ("obs_stats", "return_stats")}
        state = state._replace(rollout=state.rollout._replace(**shared))
    return on_replica_devices(strategy, state)


def on_replica_devices(strategy: tf.distribute.Strategy, state):
    """`state` with every replica's values copied onto that replica's device by an op that runs there.

    Values handed to `experimental_distribute_values_from_function`, or returned untouched from a tf.function, stay
    on the device that made them (the first); the training step's multi-device function is then instantiated (placed
    and graph-optimized) once for those inputs and again for its own outputs, which lengthens the first call by
    seconds (`docs/benchmarks/devices.md`, "Measurements behind the defaults")."""
    leaves = tf.nest.flatten(state)
    spread = [i for i, leaf in enumerate(leaves) if isinstance(leaf, tf.distribute.DistributedValues)]
    if not spread:
        # nothing per-replica (values every replica shares stay one tensor, as the training step returns them)
        return state
    copy = tf.function(lambda xs: strategy.run(lambda ys: [tf.identity(y) for y in ys], args=(xs,)), autograph=False)
    for i, leaf in zip(spread, copy([leaves[i] for i in spread])):
        leaves[i] = leaf
    return tf.nest.pack_sequence_as(state, leaves)


def replica_view(strategy: tf.distribute.Strategy) -> Callable:
    """Maps a per-replica nest to the first replica's values (what evaluation and reports read)."""

    def view(state):
        return tf.nest.map_structure(lambda x: strategy.experimental_local_results(x)[0], state)

    return view
