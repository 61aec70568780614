"""Counter-based random numbers: the same draws in TF kernels, under XLA, inside `tf.vectorized_map` and in numpy.

TensorFlow's stateless ops give other numbers under XLA than in TF kernels for one key (`stateless_uniform`,
`stateless_normal`, and `stateless_split` / `stateless_fold_in` for keys with a negative word). A run whose rollout is
XLA-compiled and whose update runs in kernels, and a population that compiles both into one XLA program, would then
draw differently from the same seed. Here every draw is a function of the key and the element's index alone, computed
with 64-bit integer arithmetic that every backend evaluates exactly: element i of a stream is SplitMix64's finalizer
applied to `seed + (i + 1) * golden_gamma`, where `seed` mixes the key's two int32 words and the stream's salt. Floats
are cut from the top bits, exactly too; `normal` and `gumbel` then apply `log`, `sqrt` and `cos`, whose last bit can
differ between XLA's and TF's kernels.

Keys are int32 [2], as TensorFlow's stateless ops take them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kppo._tf import tf

__all__ = ["fold_in", "gumbel", "normal", "split", "split_np", "uniform", "uniform_int", "words_np"]

_GAMMA = 0x9E3779B97F4A7C15
_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB
#: One salt per use of a key, so that a key's children, its folds and its draws are separate streams.
_DRAW, _SPLIT, _FOLD = 0x0, 0x5851F42D4C957F2D, 0x2545F4914F6CDD1D
_MASK_64 = (1 << 64) - 1


def _u64(value: int) -> tf.Tensor:
    return tf.constant(value, tf.uint64)


def _mix(z: tf.Tensor) -> tf.Tensor:
    """SplitMix64's finalizer (a bijection of uint64)."""
    xor, shift = tf.bitwise.bitwise_xor, tf.bitwise.right_shift
    z = xor(z, shift(z, _u64(30))) * _u64(_MIX_1)
    z = xor(z, shift(z, _u64(27))) * _u64(_MIX_2)
    return xor(z, shift(z, _u64(31)))


def _seed(key: tf.Tensor, salt: int) -> tf.Tensor:
    """The stream's uint64 seed from an int32 [2] key (its words read as unsigned) and a salt."""
    words = tf.cast(tf.bitcast(tf.convert_to_tensor(key, tf.int32), tf.uint32), tf.uint64)
    joined = tf.bitwise.bitwise_or(tf.bitwise.left_shift(words[0], _u64(32)), words[1])
    return _mix(tf.bitwise.bitwise_xor(joined, _u64(salt)))


def _stream(seed: tf.Tensor, count) -> tf.Tensor:
    """uint64 [count]: elements 0 .. count-1 of the stream of `seed`."""
    index = tf.cast(tf.range(1, tf.cast(count, tf.int64) + 1, dtype=tf.int64), tf.uint64)
    return _mix(seed + index * _u64(_GAMMA))


def _words(key: tf.Tensor, shape, salt: int = _DRAW) -> tf.Tensor:
    """uint64 of `shape` (a list or a shape tensor), element i from the stream's element i in C order."""
    shape = tf.convert_to_tensor(shape, tf.int32) if not isinstance(shape, (list, tuple)) else list(shape)
    count = tf.reduce_prod(shape) if isinstance(shape, tf.Tensor) else int(np.prod(shape, dtype=np.int64))
    return tf.reshape(_stream(_seed(key, salt), count), shape)


def _as_keys(words: tf.Tensor) -> tf.Tensor:
    """uint64 [...] -> int32 [..., 2] keys."""
    return tf.bitcast(words, tf.int32)


def split(key: tf.Tensor, num: int = 2) -> tf.Tensor:
    """int32 [num, 2]: `num` new keys from `key` (as `tf.random.experimental.stateless_split`)."""
    return _as_keys(_words(key, [num], _SPLIT))


def fold_in(key: tf.Tensor, data) -> tf.Tensor:
    """int32 [2]: a new key from `key` and an integer (as `tf.random.experimental.stateless_fold_in`)."""
    data = tf.cast(tf.bitcast(tf.cast(data, tf.int64), tf.uint64), tf.uint64)
    return _as_keys(_mix(_seed(key, _FOLD) + _mix(data + _u64(_GAMMA))))


def _unit(words: tf.Tensor, dtype, offset: float = 0.0) -> tf.Tensor:
    """Uniform floats in [0, 1) from the top 24 (float32) or 53 (float64) bits; `offset` 0.5 gives (0, 1)."""
    bits = 24 if dtype == tf.float32 else 53
    top = tf.cast(tf.bitwise.right_shift(words, _u64(64 - bits)), dtype)
    return (top + offset) * (1.0 / (1 << bits))


def uniform(key: tf.Tensor, shape, minval: float = 0.0, maxval: float = 1.0, dtype=tf.float32) -> tf.Tensor:
    """Floats uniform in [minval, maxval) (as `tf.random.stateless_uniform` with a float dtype)."""
    dtype = tf.as_dtype(dtype)
    bits = 24 if dtype == tf.float32 else 53
    top = tf.cast(tf.bitwise.right_shift(_words(key, shape), _u64(64 - bits)), dtype)
    return top * tf.constant((maxval - minval) / (1 << bits), dtype) + tf.constant(minval, dtype)


def uniform_int(key: tf.Tensor, shape, minval: int | None = None, maxval: int | None = None) -> tf.Tensor:
    """int32 uniform in [minval, maxval), or over every int32 when both are None (as `stateless_uniform`)."""
    words = _words(key, shape)
    if minval is None and maxval is None:
        return tf.bitcast(tf.cast(tf.bitwise.right_shift(words, _u64(32)), tf.uint32), tf.int32)
    if minval is None or maxval is None or maxval <= minval:
        raise ValueError(f"uniform_int: expected minval < maxval or both None, got {minval}, {maxval}")
    top = tf.bitwise.right_shift(words, _u64(32))  # 32 bits, times the range, keeps the high 32: in [0, range)
    drawn = tf.bitwise.right_shift(top * _u64(maxval - minval), _u64(32))
    return tf.cast(drawn, tf.int32) + minval


def normal(key: tf.Tensor, shape, dtype=tf.float32) -> tf.Tensor:
    """Standard normal floats (Box-Muller on two 24-bit fields of one word)."""
    dtype = tf.as_dtype(dtype)
    words = _words(key, shape)
    radius_u = 1.0 - _unit(words, dtype)  # in (0, 1]: a finite log
    angle_u = _unit(tf.bitwise.left_shift(words, _u64(24)), dtype)
    return tf.sqrt(-2.0 * tf.math.log(radius_u)) * tf.cos(tf.cast(2.0 * np.pi, dtype) * angle_u)


def gumbel(key: tf.Tensor, shape, dtype=tf.float32) -> tf.Tensor:
    """Standard Gumbel floats: -log(-log(u)) for u uniform in (0, 1)."""
    return -tf.math.log(-tf.math.log(_unit(_words(key, shape), dtype, offset=0.5)))


def words_np(key: Sequence[int] | np.ndarray, count: int, salt: int = _DRAW) -> np.ndarray:
    """The numpy twin of the stream: uint64 [count], for tests and host code that must draw what the graph draws."""

    def mix(z: np.ndarray) -> np.ndarray:
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX_1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX_2)
        return z ^ (z >> np.uint64(31))

    with np.errstate(over="ignore"):
        words = np.asarray(key, np.int32).view(np.uint32).astype(np.uint64)
        seed = mix(np.asarray([((int(words[0]) << 32) | int(words[1])) ^ salt], np.uint64))
        index = np.arange(1, count + 1, dtype=np.uint64)
        return mix(seed + index * np.uint64(_GAMMA & _MASK_64))


def split_np(key: Sequence[int] | np.ndarray, num: int = 2) -> np.ndarray:
    """`split` in numpy: int32 [num, 2]."""
    return words_np(key, num, _SPLIT).view(np.int32).reshape(num, 2)
