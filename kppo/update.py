"""The PPO update: epochs x shuffled minibatches, global-norm clipping, Adam, target-KL early stop.

Shuffling is an argsort of stateless uniforms (XLA has no kernel for `stateless_shuffle`); the minibatch index table
[epochs * minibatches, minibatch_size] is built once per update, so no slice has tensor bounds.
"""

from __future__ import annotations

from typing import NamedTuple

from kppo import losses
from kppo._tf import tf
from kppo.agent import Agent, merge_steps, replay, with_weights
from kppo.distribute import clip_and_scale, minibatch_moments
from kppo.loops import merge_leading, swap_leading, while_loop
from kppo.optimizers import AdamState, adam_step
from kppo.types import Batch, LossInfo, Rollout


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
    return UpdateStats(LossInfo(*[tf.constant(0.0)] * len(LossInfo._fields)), tf.constant(0.0), tf.constant(0),
                       tf.constant(0))


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


def sequences(rollout: Rollout, length: int = 0) -> Batch:
    """Time-major rollout [T, B, ...] -> sequences [B * T / L, L, ...]: each env's steps cut into chunks of `length`
    (0: the whole rollout, L = T, as purejaxrl's ppo_rnn), each with the memory stored at its first step (the
    memory before acting, so its reset still applies): what a recurrent agent's update replays."""
    traj, advantages, returns = rollout
    steps, envs = traj.reward.shape[0], traj.reward.shape[1]
    length = length or steps

    def chunks(x: tf.Tensor) -> tf.Tensor:  # [T, B, ...] -> [B * T / L, L, ...], env after env
        return tf.reshape(swap_leading(x), [envs * (steps // length), length] + x.shape[2:].as_list())

    memory = tuple(chunks(m)[:, 0] for m in traj.memory)
    return Batch(chunks(traj.obs), chunks(traj.action), chunks(traj.log_prob), chunks(traj.value), chunks(advantages),
                 chunks(returns), chunks(traj.action_mask), chunks(traj.episode_start), memory)


def rows(rollout: Rollout) -> Batch:
    """Time-major recurrent rollout [T, B, ...] -> env-major rows [B * T, ...] (row env * T + step, as sb3-contrib's
    `swap_and_flatten`), each with the memory stored before its step, `restart` at each env's first step: what
    `rotated_indices` cuts into windows."""
    traj, advantages, returns = rollout
    steps, envs = traj.reward.shape[0], traj.reward.shape[1]

    def env_major(x: tf.Tensor) -> tf.Tensor:
        return merge_leading(swap_leading(x))

    restart = tf.reshape(tf.tile((tf.range(steps) == 0)[None], [envs, 1]), [-1])
    return Batch(env_major(traj.obs), env_major(traj.action), env_major(traj.log_prob), env_major(traj.value),
                 env_major(advantages), env_major(returns), env_major(traj.action_mask), env_major(traj.episode_start),
                 tuple(env_major(m) for m in traj.memory), restart)


def rotated_indices(key: tf.Tensor, size: int, num_epochs: int, num_minibatches: int) -> tf.Tensor:
    """int32 [num_epochs * num_minibatches, size // num_minibatches]: sb3-contrib's `RecurrentRolloutBuffer.get`, per
    epoch the rows rotated by a random offset and cut, in order, into windows of consecutive rows."""
    offsets = tf.random.stateless_uniform([num_epochs, 1], seed=key, minval=0, maxval=size, dtype=tf.int32)
    rotated = (offsets + tf.range(size)[None]) % size
    return tf.reshape(rotated, [num_epochs * num_minibatches, size // num_minibatches])


def minibatch_indices(key: tf.Tensor, size: int, num_epochs: int, num_minibatches: int) -> tf.Tensor:
    """int32 [num_epochs * num_minibatches, size // num_minibatches]: a fresh permutation per epoch, cut in rows."""
    noise = tf.random.stateless_uniform([num_epochs, size], seed=key)
    perms = tf.argsort(noise, axis=-1)
    return tf.reshape(perms, [num_epochs * num_minibatches, size // num_minibatches])


def _replayed(agent: Agent, mb: Batch) -> tuple[Batch, tf.Tensor, tf.Tensor]:
    """A minibatch of env sequences [b, T, ...] replayed through a recurrent agent: (the minibatch flattened to
    [b * T, ...], actor params, values), both computed from each sequence's start memory with its resets."""
    params, values, _ = replay(agent, swap_leading(mb.obs), swap_leading(mb.episode_start), mb.memory)
    flat = tf.nest.map_structure(lambda x: merge_leading(swap_leading(x)), mb._replace(episode_start=(), memory=()))
    return flat, merge_steps(agent, params), tf.reshape(values, [-1])


def window_segments(restart: tf.Tensor, steps: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A window of W consecutive rows (`restart` bool [W] at each env's first row) cut where it enters another env:
    (grid int32 [S, L] of window positions, one segment per row, -1 past its end; the flat time-major index
    [W] of each position in an [L, S] replay), with L = min(W, steps) and S = ceil(W / steps) + 1 segments at most."""
    size = int(restart.shape[0])
    length, segments = min(size, steps), -(-size // steps) + 1
    segment = tf.cumsum(tf.cast(tf.concat([[True], restart[1:]], 0), tf.int32)) - 1
    position = tf.range(size)
    offset = position - tf.gather(tf.math.unsorted_segment_min(position, segment, segments), segment)
    grid = tf.scatter_nd(tf.stack([segment, offset], 1), position + 1, [segments, length]) - 1
    return grid, offset * segments + segment


def replay_window(agent: Agent, mb: Batch, steps: int) -> tuple[Batch, tf.Tensor, tf.Tensor]:
    """A window of consecutive rows [W, ...] (`rows`) replayed as sb3-contrib does: each env segment it covers from
    the memory stored at its first row, with the episode resets; -> (the window's rows, actor params, values) in
    window order. A window of at most `steps` rows (two segments at most) runs as one sequence that restarts at the
    second segment (2x faster on CPU than two side by side); a longer one as its segments side by side
    (`window_segments`: 32 steps instead of 256 for CartPoleNoVel's windows)."""
    flat = mb._replace(episode_start=(), memory=(), restart=())
    if mb.obs.shape[0] <= steps:
        column = lambda x: tf.expand_dims(x, 1)  # noqa: E731  [W, ...] -> time-major [W, 1, ...]
        stored = tuple(column(m) for m in mb.memory)
        params, values, _ = replay(agent, column(mb.obs), column(mb.episode_start), tuple(m[0] for m in stored),
                                   column(mb.restart), stored)
        return flat, merge_steps(agent, params), tf.reshape(values, [-1])
    grid, index = window_segments(mb.restart, steps)
    gathered = tf.maximum(grid, 0)  # past a segment's end: any row (its outputs are dropped)
    time_major = lambda x: swap_leading(tf.gather(x, gathered))  # noqa: E731  [W, ...] -> [L, S, ...]
    params, values, _ = replay(agent, time_major(mb.obs), time_major(mb.episode_start),
                               tuple(tf.gather(m, gathered[:, 0]) for m in mb.memory))
    return flat, merge_steps(agent, params, index), tf.gather(tf.reshape(values, [-1]), index)


def minibatch_loss(agent: Agent, settings: UpdateSettings, mb: Batch) -> tuple[tf.Tensor, LossInfo]:
    """PPO loss of one minibatch (inside the tape); a recurrent agent's minibatch holds env sequences, or one window
    of rows (`settings.rotated_steps`)."""
    if agent.memory is not None:
        mb, params, values = (replay_window(agent, mb, settings.rotated_steps) if settings.rotated_steps
                              else _replayed(agent, mb))
    else:
        params, values = agent.actor(mb.obs), agent.critic(mb.obs)
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
    tf.distribute the gradients are all-reduced before the clip (`kppo.distribute.clip_and_scale`).

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
    _, carry, stats, _ = while_loop(cond, body, start, maximum_iterations=total)
    return carry, stats


def ppo_update(agent: Agent, settings: UpdateSettings, batch: Batch, key: tf.Tensor) -> UpdateStats:
    """All epochs and minibatches of one PPO update on the agent's variables; stops early after a target-KL
    violation."""

    def step(carry, mb, stopped):
        del stopped  # the loop has exited by then
        return (carry, *minibatch_step(agent, settings, mb))

    _, stats = _minibatch_loop(step, (), settings, batch, key, early_exit=True)
    return stats


def functional_update(agent: Agent, settings: UpdateSettings, adam_style: str, params: list, adam: AdamState,
                      batch: Batch, key: tf.Tensor, learning_rate: tf.Tensor) -> tuple[tuple[list, AdamState],
                                                                                       UpdateStats]:
    """`ppo_update` on weights held as tensors (`params`, in `agent.variables` order) with Adam as a function
    (`kppo.optimizers.adam_step`): what a population vectorizes over its members. Computes what `ppo_update` computes
    on one device; every minibatch is computed (see `_minibatch_loop`). Returns ((params, Adam state), stats)."""

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
