"""tf.distribute: strategy resolution, the cross-replica gradient rule, and the distributed training iteration.

One code path: with no strategy (distribute="none") nothing here changes the computation. Under a strategy each
replica runs its own environment shard, rollout and GAE; per minibatch each replica computes the gradient of its own
shard, the gradients are all-reduced (mean over replicas), clipped by global norm, then applied. Keras 3's optimizer
sums gradients over replicas again inside `apply_gradients` (keras/src/backend/tensorflow/optimizer.py,
`_all_reduce_sum_gradients`), so the clipped mean is divided by the number of replicas first; Keras' own
`global_clipnorm` would clip each replica's gradient before the all-reduce, which is wrong (measured on 2 logical
CPUs: 5e-3 off a single-device update; this rule: 3e-8).

MirroredStrategy forbids synchronization points (all-reduce, optimizer apply) inside `tf.while_loop`, so the
distributed update runs its epochs x minibatches as separate `strategy.run` calls in one traced function, and the
iterations of a call run from the host. Advantages are normalized per replica. Observation and return moments are
merged across replicas after every rollout (Chan merge, `merge_normalization`): during a rollout each replica adds
only its own shard's samples to the common moments, as the envs of one device would add theirs step by step.
"""

from __future__ import annotations

from typing import Callable

from kppo._tf import tf
from kppo.normalization import merge_replicas

STRATEGIES = ("none", "mirrored")


def make_strategy(name: str, devices: tuple[str, ...] | None = None) -> tf.distribute.Strategy | None:
    """None for "none"; a MirroredStrategy over `devices` (default: all local GPUs, else the CPU)."""
    if name == "none":
        return None
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(list(devices) if devices else None)
    raise ValueError(f"distribute: expected one of {STRATEGIES}, got {name!r}")


def num_replicas() -> int:
    """Replicas of the current replica context (1 outside any strategy)."""
    context = tf.distribute.get_replica_context()
    return 1 if context is None else context.num_replicas_in_sync


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


def merge_normalization(strategy: tf.distribute.Strategy, base, state):
    """Per-replica runner `state` with every replica's observation and return moments replaced by their merge
    (`kppo.normalization.merge_replicas`); `base` is the rollout state all replicas started from (one replica's).
    After the merge all replicas normalize with the moments of every shard's samples, as one device would."""
    local = [s.rollout for s in strategy.experimental_local_results(state)]
    obs = merge_replicas(base.obs_stats, [r.obs_stats for r in local])
    ret = merge_replicas(base.return_stats, [r.return_stats for r in local])

    def assign(s, obs, ret):
        return s._replace(rollout=s.rollout._replace(obs_stats=obs, return_stats=ret))

    return strategy.run(assign, args=(state, obs, ret))


def replica_values(strategy: tf.distribute.Strategy, state) -> tuple:
    """A per-replica nest as a tuple of plain nests, one per replica (checkpoints save every replica's env state
    and RNG stream). A leaf all replicas share (MirroredStrategy returns it as one tensor) is repeated."""
    count = strategy.num_replicas_in_sync

    def pick(x, i):
        local = strategy.experimental_local_results(x)
        return local[i] if len(local) > 1 else local[0]

    return tuple(tf.nest.map_structure(lambda x: pick(x, i), state) for i in range(count))


def from_replica_values(strategy: tf.distribute.Strategy, values: tuple):
    """Inverse of `replica_values`: replica i gets values[i]."""
    if len(values) != strategy.num_replicas_in_sync:
        raise ValueError(f"checkpoint: expected a state for each of {strategy.num_replicas_in_sync} replicas, "
                         f"got {len(values)}")
    return strategy.experimental_distribute_values_from_function(
        lambda context: values[context.replica_id_in_sync_group]
    )


def replica_view(strategy: tf.distribute.Strategy) -> Callable:
    """Maps a per-replica nest to the first replica's values (what evaluation and reports read)."""

    def view(state):
        return tf.nest.map_structure(lambda x: strategy.experimental_local_results(x)[0], state)

    return view
