"""The PPO update: epochs x shuffled minibatches, global-norm clipping, Adam, target-KL early stop; and the PPO
iteration around it (keys, schedule, rollout, update, diagnostics: `iteration_step`), written once for every runner.

Shuffling is an argsort of stateless uniforms (XLA has no kernel for `stateless_shuffle`); the minibatch index table
[epochs * minibatches, minibatch_size] is built once per update, so no slice has tensor bounds.
"""

from __future__ import annotations

from typing import NamedTuple
from collections.abc import Callable

from kppo.core import losses
from kppo._tf import tf
from kppo.agent.agent import Agent, actor_critic, with_weights
from kppo.core.distribute import clip_and_scale, minibatch_moments
from kppo.core.tf_loops import merge_leading, tie_to_members
from kppo.core.optimizers import AdamState, adam_step
from kppo.update.recurrent import replay_sequences, replay_window, rotated_indices, rows, sequences
from kppo.core.types import Batch, Diagnostics, LossInfo, Rollout, RunnerState


class UpdateSettings(NamedTuple):
    num_epochs: int
    num_minibatches: int
    clip_range: float
    clip_range_vf: float | None
    vf_clip_mode: str
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    normalize_advantage: bool
    target_kl: float | None
    advantage_std_ddof: int = 0  # 1: the sample std (n - 1), as SB3's torch.std
    rotated_steps: int = 0  # recurrent, sb3-contrib's minibatches (`rows`, `rotated_indices`): steps per env; 0: not


class UpdateStats(NamedTuple):
    """Sums over computed minibatches (divide by `minibatches`)."""

    loss: LossInfo
    grad_norm: tf.Tensor
    minibatches: tf.Tensor  # minibatches computed (incl. the one that triggered a target-KL stop)
    steps: tf.Tensor  # gradient steps applied


def zero_stats() -> UpdateStats:
    """The sums before the first minibatch."""
    return UpdateStats(
        LossInfo(*[tf.constant(0.0)] * len(LossInfo._fields)), tf.constant(0.0), tf.constant(0), tf.constant(0)
    )


def flatten(rollout: Rollout, sequence_length: int = 0, rotated: bool = False) -> Batch:
    """Time-major rollout [T, B, ...] -> flat Batch [T * B, ...] (the only place kppo flattens); for a recurrent
    agent's rollout (one with a memory), `sequences`, or `rows` for rotated windows."""
    if len(rollout.trajectory.memory) > 0:
        return rows(rollout) if rotated else sequences(rollout, sequence_length)
    traj, advantages, returns = rollout
    return Batch(
        obs=merge_leading(traj.obs),
        action=merge_leading(traj.action),
        log_prob=merge_leading(traj.log_prob),
        value=merge_leading(traj.value),
        advantage=merge_leading(advantages),
        returns=merge_leading(returns),
        action_mask=merge_leading(traj.action_mask),
    )


def minibatch_indices(key: tf.Tensor, size: int, num_epochs: int, num_minibatches: int) -> tf.Tensor:
    """int32 [num_epochs * num_minibatches, size // num_minibatches]: a fresh permutation per epoch, cut in rows."""
    noise = tf.random.stateless_uniform([num_epochs, size], seed=key)
    perms = tf.argsort(noise, axis=-1)
    return tf.reshape(perms, [num_epochs * num_minibatches, size // num_minibatches])


def minibatch_loss(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[tf.Tensor, LossInfo]:
    """PPO loss of one minibatch (inside the tape); a recurrent agent's minibatch holds env sequences, or one window
    of rows (`settings.rotated_steps`)."""
    if agent.lstm is not None:
        mb, params, values = (
            replay_window(agent, mb, settings.rotated_steps) if settings.rotated_steps else replay_sequences(agent, mb)
        )
    else:
        params, values = actor_critic(agent, mb.obs)
    params = agent.dist.masked(params, mb.action_mask)
    advantages = mb.advantage
    if settings.normalize_advantage:
        advantages = losses.normalize_advantages(advantages, minibatch_moments(advantages, settings.advantage_std_ddof))
    return losses.ppo_loss(
        agent.dist.log_prob(params, mb.action),
        agent.dist.entropy(params),
        values,
        mb.log_prob,
        mb.value,
        advantages,
        mb.returns,
        clip_range=settings.clip_range,
        clip_range_vf=settings.clip_range_vf,
        ent_coef=settings.ent_coef,
        vf_coef=settings.vf_coef,
        vf_clip_mode=settings.vf_clip_mode,
    )


def minibatch_step(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[LossInfo, tf.Tensor, tf.Tensor]:
    """Gradient of one minibatch, clipped by global norm and applied unless target KL is exceeded. Under
    tf.distribute the gradients are all-reduced before the clip (`kppo.core.distribute.clip_and_scale`).

    Returns (loss info, pre-clip global gradient norm, bool applied). The KL test uses the approx KL of this
    minibatch before the step (SB3: https://github.com/DLR-RM/stable-baselines3/blob/master/stable_baselines3/ppo/ppo.py).
    """
    variables = agent.variables
    with tf.GradientTape() as tape:
        loss, info = minibatch_loss(agent, settings, mb)
    grads = tape.gradient(loss, variables)
    clipped, grad_norm = clip_and_scale(grads, settings.max_grad_norm)  # all-reduce first under tf.distribute
    if settings.target_kl is None:
        agent.optimizer.apply_gradients(zip(clipped, variables))
        return info, grad_norm, tf.constant(True)
    apply = info.approx_kl <= 1.5 * settings.target_kl

    def _apply():
        agent.optimizer.apply_gradients(zip(clipped, variables))
        return tf.constant(True)

    return info, grad_norm, tf.cond(apply, _apply, lambda: tf.constant(False))


def _minibatch_loop(step, carry, settings: UpdateSettings, batch: Batch, key: tf.Tensor, early_exit: bool):
    """Epochs x minibatches of `step(carry, minibatch, stopped) -> (carry, info, grad norm, applied)`; after a target-KL
    violation no more minibatches count. `early_exit` leaves the loop there; otherwise (a loop with the same trip count
    for every member of a population, as vectorization needs) the remaining minibatches are computed and dropped."""
    size = batch.obs.shape[0]
    draw = rotated_indices if settings.rotated_steps else minibatch_indices
    indices = draw(key, size, settings.num_epochs, settings.num_minibatches)
    total = settings.num_epochs * settings.num_minibatches

    def cond(k, carry, stats, stopped):
        return tf.logical_and(k < total, tf.logical_not(stopped)) if early_exit else k < total

    def body(k, carry, stats, stopped):
        mb = tf.nest.map_structure(lambda x: tf.gather(x, indices[k]), batch)
        carry, info, grad_norm, applied = step(carry, mb, stopped)
        counts = tf.logical_not(stopped)
        stats = UpdateStats(
            loss=tf.nest.map_structure(lambda a, b: a + tf.where(counts, b, 0.0), stats.loss, info),
            grad_norm=stats.grad_norm + tf.where(counts, grad_norm, 0.0),
            minibatches=stats.minibatches + tf.cast(counts, tf.int32),
            steps=stats.steps + tf.cast(applied, tf.int32),
        )
        return k + 1, carry, stats, tf.logical_or(stopped, tf.logical_not(applied))

    start = (tf.constant(0), carry, zero_stats(), tf.constant(False))
    _, carry, stats, _ = tf.while_loop(cond, body, tie_to_members(start), maximum_iterations=total)
    return carry, stats


def ppo_update(agent: Agent, settings: UpdateSettings, batch: Batch, key: tf.Tensor) -> UpdateStats:
    """All epochs and minibatches of one PPO update on the agent's variables; stops early after a target-KL
    violation."""

    def step(carry, mb, stopped):
        del stopped  # the loop has exited by then
        return (carry, *minibatch_step(agent, settings, mb))

    _, stats = _minibatch_loop(step, (), settings, batch, key, early_exit=True)
    return stats


def functional_update(
    agent: Agent,
    settings: UpdateSettings,
    adam_style: str,
    params: list,
    adam: AdamState,
    batch: Batch,
    key: tf.Tensor,
    learning_rate: tf.Tensor,
) -> tuple[tuple[list, AdamState], UpdateStats]:
    """`ppo_update` on weights held as tensors (`params`, in `agent.variables` order) with Adam as a function
    (`kppo.core.optimizers.adam_step`): what a population vectorizes over its members. Computes what `ppo_update`
    computes on one device; every minibatch is computed (see `_minibatch_loop`).
    Returns ((params, Adam state), stats)."""

    def step(carry, mb, stopped):
        params, adam = carry
        with tf.GradientTape() as tape:
            tape.watch(params)
            loss, info = with_weights(agent, params, lambda: minibatch_loss(agent, settings, mb))
        grads = tape.gradient(loss, params, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        clipped, grad_norm = tf.clip_by_global_norm(grads, settings.max_grad_norm)
        applied = tf.logical_not(stopped)
        if settings.target_kl is not None:
            applied = tf.logical_and(applied, info.approx_kl <= 1.5 * settings.target_kl)
        new = adam_step(adam_style, params, clipped, adam, learning_rate)
        carry = tf.nest.map_structure(lambda a, b: tf.where(applied, a, b), new, (params, adam))
        return carry, info, grad_norm, applied

    return _minibatch_loop(step, (list(params), adam), settings, batch, key, early_exit=False)


# The iteration: one PPO iteration around any rollout and any update, written once for every runner.


def zero_diagnostics() -> Diagnostics:
    return Diagnostics(*[tf.constant(0.0)] * len(Diagnostics._fields))


def add_diagnostics(total: Diagnostics | None, diag: Diagnostics) -> Diagnostics:
    return diag if total is None else tf.nest.map_structure(tf.add, total, diag)


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


def start_iteration(learning_rate_fn: Callable, collect: Callable, state: RunnerState):
    """The first half of a training iteration: keys, schedule, rollout + GAE.

    Returns (state after the iteration, Rollout, the update's key, learning rate).
    """
    key, key_rollout, key_update = tf.unstack(tf.random.experimental.stateless_split(state.key, 3))
    lr = learning_rate_fn(state.iteration)
    rollout_state, rollout = collect(state.rollout, key_rollout)
    return RunnerState(rollout_state, key, state.iteration + 1), rollout, key_update, lr


def iteration_step(
    learning_rate_fn: Callable, collect: Callable, update: Callable, state: RunnerState
) -> tuple[RunnerState, Diagnostics]:
    """One training iteration: keys -> schedule -> rollout + GAE -> update -> diagnostics. The same function runs
    inside the native runner's compiled loop and eagerly in the host runner; the replicated runner runs
    `start_iteration` on every replica and its cross-replica update between (MirroredStrategy allows no all-reduce
    inside a tf.while_loop); a population member runs `start_iteration` and `functional_update`.

    Args:
        learning_rate_fn: `iteration -> learning rate` (`kppo.training.runners.base.make_learning_rate_fn`).
        collect: `(rollout state, key) -> (rollout state, Rollout)` (`kppo.rollout`).
        update: `(Rollout, key) -> UpdateStats` (`ppo_update` on the flattened rollout, compiled or not).
    """
    state, rollout, key_update, lr = start_iteration(learning_rate_fn, collect, state)
    return state, diagnostics(rollout, update(rollout, key_update), lr)
