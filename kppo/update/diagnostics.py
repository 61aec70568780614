"""An iteration's diagnostics (`Diagnostics`): the rollout's scalars, completed by the update's means, and the one sum
over a call's iterations. Every runner reports through these, one device, replicas and population members alike."""

from __future__ import annotations

import operator

from kppo._tf import tf
from kppo.core import losses
from kppo.core.types import Diagnostics, Rollout
from kppo.update.ppo import UpdateStats

__all__ = ["add_diagnostics", "diagnostics", "rollout_diagnostics", "with_update", "zero_diagnostics"]


def zero_diagnostics() -> Diagnostics:
    return Diagnostics(*[tf.constant(0.0)] * len(Diagnostics._fields))


def add_diagnostics(total: Diagnostics | None, diag: Diagnostics) -> Diagnostics:
    """The one diagnostics sum: a call's diagnostics are its iterations' sums (in-graph), a round's its calls' (on
    the host, in numpy)."""
    return diag if total is None else tf.nest.map_structure(operator.add, total, diag)


def rollout_diagnostics(rollout: Rollout) -> Diagnostics:
    """The rollout's scalars (explained variance, finished episodes); the update's fields zero."""
    traj = rollout.trajectory
    ended = tf.cast(tf.logical_or(traj.terminated, traj.truncated), tf.float32)
    return zero_diagnostics()._replace(
        explained_variance=losses.explained_variance(tf.reshape(traj.value, [-1]), tf.reshape(rollout.returns, [-1])),
        episode_return_sum=tf.reduce_sum(traj.episode_return),
        episode_length_sum=tf.cast(tf.reduce_sum(traj.episode_length), tf.float32),
        episodes=tf.reduce_sum(ended),
    )


def with_update(diag: Diagnostics, stats: UpdateStats, lr: tf.Tensor) -> Diagnostics:
    """`diag` with the update's means over the minibatches computed, its gradient steps and the learning rate."""
    count = tf.cast(tf.maximum(stats.minibatches, 1), tf.float32)
    return diag._replace(
        **{name: x / count for name, x in stats.loss._asdict().items()},
        learning_rate=tf.cast(lr, tf.float32),
        grad_norm=stats.grad_norm / count,
        minibatch_steps=tf.cast(stats.steps, tf.float32),
    )


def diagnostics(rollout: Rollout, stats: UpdateStats, lr: tf.Tensor) -> Diagnostics:
    """Per-iteration scalars from the rollout and the update's sums."""
    return with_update(rollout_diagnostics(rollout), stats, lr)
