"""Tensor ops written so that `tf.vectorized_map` and XLA run them fast over a population's members, each computing
what its TF counterpart computes: `argsort_network` (`tf.argsort`'s permutation) and `clip_by_global_norm`
(`tf.clip_by_global_norm`) exactly, `narrow_matmul` (`tf.matmul`, its gradients to float32 rounding)."""

from __future__ import annotations

import numpy as np

from kppo._tf import tf
from kppo.core.tf_loops import tie_to_members


def argsort_network(values: tf.Tensor) -> tf.Tensor:
    """`tf.argsort(values, axis=-1)` (ascending; ties in index order, as its stable top-k) of non-negative float32
    values, by a bitonic sorting network over unique int64 keys (the value's bits, then its index): a `tf.while_loop`
    over the network's passes, each a compare-exchange of every key with the one `stride` away.

    While the population's update loop ran inside `tf.vectorized_map`, this network sorted a population's shuffle
    faster than XLA's sort for a little more tracing and compilation (a `tf.while_loop`: unrolled, its passes cost
    far more; TF's own sort kernel is the fast one outside XLA). Since the loop runs outside it, an iteration takes
    the same time with either; the permutations are the same (`docs/benchmarks/tuning.md`, "Measurements behind the
    defaults")."""
    size = values.shape[-1]
    width = 1 << max(size - 1, 0).bit_length()  # the network sorts powers of 2: padded with the largest key
    keys = tf.cast(tf.bitcast(values, tf.int32), tf.int64) * size + tf.range(size, dtype=tf.int64)
    axis = values.shape.rank - 1  # not -1: tf.vectorized_map shifts a negative roll axis wrongly
    if width > size:
        keys = tf.concat([keys, tf.fill([*values.shape[:-1], width - size], tf.int64.max)], axis)
    # (block, stride) of every pass: runs of block / 2 merged into runs of block, alternately ascending, descending
    passes = [(1 << b, 1 << s) for b in range(1, width.bit_length()) for s in reversed(range(b))]
    if not passes:  # one value
        return tf.zeros_like(values, tf.int32)
    table, position = tf.constant(np.array(passes, np.int32).reshape(-1, 2)), tf.range(width)

    def compare_exchange(p, keys):
        block, stride = table[p, 0], table[p, 1]
        first = tf.equal(tf.bitwise.bitwise_and(position, stride), 0)  # the pair's first key
        partner = tf.where(first, tf.roll(keys, -stride, axis), tf.roll(keys, stride, axis))
        take_min = tf.equal(first, tf.equal(tf.bitwise.bitwise_and(position, block), 0))
        return p + 1, tf.where(take_min, tf.minimum(keys, partner), tf.maximum(keys, partner))

    _, keys = tf.while_loop(lambda p, _: p < len(passes), compare_exchange, tie_to_members((tf.constant(0), keys)))
    return tf.cast(keys[..., :size] % size, tf.int32)


def clip_by_global_norm(tensors: list, clip_norm) -> tuple[list, tf.Tensor]:
    """`tf.clip_by_global_norm` with each tensor's half squared norm as `reduce_sum(square) / 2` instead of the
    `L2Loss` op, which `tf.vectorized_map` has no converter for: it ran every gradient's norm as a loop over the members
    (12 loops of a 2x64 actor-critic, every minibatch). Under XLA bit for bit the same (XLA lowers `L2Loss` to this
    sum); in TF kernels within an ulp of the norm (another summation order)."""
    half_squared = [tf.reduce_sum(tf.square(t)) / 2.0 for t in tensors]
    norm = tf.sqrt(tf.reduce_sum(tf.stack(half_squared)) * 2.0)
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)  # NaN for an infinite norm, as TF
    return [t * tf.cast(scale, t.dtype) for t in tensors], norm


@tf.custom_gradient
def narrow_matmul(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """`x @ kernel` for a kernel with few columns (a policy or value head: [units, n], n small), whose gradients
    are multiply-reduce fusions instead of dots: XLA's CPU dots with 2 output columns, or contracting 2, run at a few
    GFLOP/s, and the policy head's two gradient dots are a visible share of a CartPole population's iteration
    (`docs/benchmarks/tuning.md`, "Measurements behind the defaults"). The product is the same matmul; the gradients
    sum in another order (float32 rounding)."""

    def grad(dy):
        dx = tf.reduce_sum(dy[..., None, :] * kernel, axis=-1)
        rows, dys = tf.reshape(x, [-1, x.shape[-1]]), tf.reshape(dy, [-1, dy.shape[-1]])
        columns = [tf.reduce_sum(rows * dys[:, j : j + 1], axis=0) for j in range(dys.shape[-1])]
        return dx, tf.stack(columns, axis=-1)

    return tf.matmul(x, kernel), grad
