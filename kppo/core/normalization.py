"""Running mean/variance (Chan et al. parallel merge), observation normalization and reward scaling.

Same statistics as Stable-Baselines3's `RunningMeanStd`/`VecNormalize`: count starts at 1e-4, observations are
normalized as clip((x - mean) / sqrt(var + epsilon), -clip_obs, clip_obs), rewards are divided by the std of the
discounted return and clipped to +-clip_reward (`Constants`: SB3's defaults 10, 10 and 1e-8, or a Config's).
Moments merge with Chan, Golub & LeVeque (1979), so replica statistics combine into exactly the statistics of one
stream (`merge`).

The host rollout keeps observation statistics in numpy (float32, the same arithmetic): `update_moments_np` and
`normalize_np` are the numpy twins of `update_moments` and `normalize`; `merge` serves both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from kppo._tf import tf
from kppo.core.types import Moments

EPSILON = 1e-8
CLIP = 10.0
INITIAL_COUNT = 1e-4


class Constants(NamedTuple):
    """VecNormalize's constants: the observation and reward clips, the epsilon under the square roots and the
    discount of the reward scaling's running return (None: the run's gamma)."""

    clip_obs: float = CLIP
    clip_reward: float = CLIP
    epsilon: float = EPSILON
    gamma: float | None = None


DEFAULTS = Constants()  # SB3's VecNormalize defaults


def initial_stats(shape: tuple[int, ...] | list[int]) -> Moments:
    """Moments of an empty stream: mean 0, var 1, count 1e-4 (SB3's start)."""
    return Moments(tf.zeros(shape, tf.float32), tf.ones(shape, tf.float32), tf.constant(INITIAL_COUNT, tf.float32))


def merge(a: Moments, b: Moments) -> Moments:
    """Chan's parallel merge of two moment sets: the moments of both streams together (tensors or numpy arrays)."""
    count = a.count + b.count
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.count / count)
    m2 = a.var * a.count + b.var * b.count + delta * delta * (a.count * b.count / count)
    return Moments(mean, m2 / count, count)


def merge_from_sums(
    base: Moments, num_replicas: int, total: Callable[[Callable[[Moments], tf.Tensor]], tf.Tensor]
) -> Moments:
    """The moments of `base`'s stream plus every replica's new samples, where each replica's moments are `base`
    updated with that replica's samples (tf.distribute: all replicas start an iteration from the same merged
    moments). `total(f)` is the sum of f(replica moments) over the replicas (`tf.add_n` over a list, or an
    all-reduce inside a replica context). `base` is counted once: sums over replicas minus (K - 1) copies of `base`,
    taken about the merged mean so nothing cancels beyond float32 rounding of the totals.
    """
    extra = float(num_replicas - 1)
    count = total(lambda s: s.count) - extra * base.count
    mean = (total(lambda s: s.count * s.mean) - extra * base.count * base.mean) / count

    def m2(s: Moments) -> tf.Tensor:  # sum of squared deviations about the merged mean
        return s.count * (s.var + tf.square(s.mean - mean))

    var = (total(m2) - extra * m2(base)) / count
    return Moments(mean, tf.maximum(var, 0.0), count)


def merge_replicas(base: Moments, replicas: list[Moments]) -> Moments:
    """`merge_from_sums` over a list of replica moments."""
    return merge_from_sums(base, len(replicas), lambda f: tf.add_n([f(r) for r in replicas]))


def batch_stats(x: tf.Tensor) -> Moments:
    """Moments of a batch x [N, *shape] (population variance)."""
    x = tf.cast(x, tf.float32)
    mean, var = tf.nn.moments(x, axes=[0])
    return Moments(mean, var, tf.cast(tf.shape(x)[0], tf.float32))


def update_moments(stats: Moments, x: tf.Tensor) -> Moments:
    """Adds the batch x [N, *shape] to the running moments."""
    return merge(stats, batch_stats(x))


def to_numpy(stats: Moments) -> Moments:
    """The moments as float32 numpy arrays."""
    return Moments(*(np.asarray(x, np.float32) for x in stats))


def update_moments_np(stats: Moments, x: np.ndarray) -> Moments:
    """`update_moments` in numpy (float32 moments)."""
    x = np.asarray(x, np.float32)
    count = np.float32(x.shape[0])
    mean = np.add.reduce(x, axis=0) / count  # not x.mean()/x.var(): their Python wrappers cost more than the sums here
    centered = x - mean
    return merge(stats, Moments(mean, np.add.reduce(centered * centered, axis=0) / count, count))


def normalize_np(
    stats: Moments, x: np.ndarray, clip: float = CLIP, columns: np.ndarray | None = None, epsilon: float = EPSILON
) -> np.ndarray:
    """`normalize` in numpy."""
    x = np.asarray(x, np.float32)
    z = np.clip((x - stats.mean) / np.sqrt(stats.var + np.float32(epsilon)), np.float32(-clip), np.float32(clip))
    return z if columns is None else np.where(columns, z, x)


def normalize(
    stats: Moments, x: tf.Tensor, clip: float = CLIP, columns: np.ndarray | None = None, epsilon: float = EPSILON
) -> tf.Tensor:
    """clip((x - mean) / sqrt(var + epsilon), -clip, clip) in float32; with `columns` (bool [D]) only those columns,
    the others as they are (`kppo.gym_envs.spaces.normalized_columns`: a Dict's images)."""
    x = tf.cast(x, tf.float32)
    z = tf.clip_by_value((x - stats.mean) / tf.sqrt(stats.var + epsilon), -clip, clip)
    return z if columns is None else tf.where(tf.constant(columns), z, x)


def scale_reward(
    stats: Moments,
    discounted_return: tf.Tensor,
    reward: tf.Tensor,
    done: tf.Tensor,
    gamma: float,
    constants: Constants = DEFAULTS,
) -> tuple[tf.Tensor, tf.Tensor, Moments]:
    """SB3 VecNormalize reward scaling for one vectorized step.

    Args:
        stats: moments of the discounted return (scalar shape).
        discounted_return: float32 [B], running discounted return before this step.
        reward: [B] raw reward of this step.
        done: bool [B], episode ended at this step (the running return restarts at 0).
        gamma: the run's discount, that of the running return unless `constants.gamma` sets another.
        constants: the reward clip, the epsilon under the square root and the running return's discount.

    Returns:
        (scaled reward [B], new discounted return [B], new stats).
    """
    reward = tf.cast(reward, tf.float32)
    discount = gamma if constants.gamma is None else constants.gamma
    discounted_return = discounted_return * discount + reward
    stats = update_moments(stats, discounted_return)
    clip = constants.clip_reward
    scaled = tf.clip_by_value(reward / tf.sqrt(stats.var + constants.epsilon), -clip, clip)
    return scaled, tf.where(done, tf.zeros_like(discounted_return), discounted_return), stats


class MomentVariables(tf.Module):
    """Moments kept in tf.Variables (checkpointable, readable inside compiled code)."""

    def __init__(self, shape: tuple[int, ...] | list[int] = (), name: str | None = None):
        super().__init__(name=name)
        start = initial_stats(shape)
        self.mean = tf.Variable(start.mean, trainable=False, name="mean")
        self.var = tf.Variable(start.var, trainable=False, name="var")
        self.count = tf.Variable(start.count, trainable=False, name="count")

    def read(self) -> Moments:
        return Moments(tf.identity(self.mean), tf.identity(self.var), tf.identity(self.count))

    def assign(self, stats: Moments) -> None:
        self.mean.assign(stats.mean)
        self.var.assign(stats.var)
        self.count.assign(stats.count)
