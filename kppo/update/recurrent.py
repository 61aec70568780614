"""sb3-contrib's and purejaxrl's recurrent batches: a recurrent rollout cut into env sequences (`sequences`) or
env-major rows (`rows`) with the memory stored before each, sb3-contrib's rotated windows of rows (`rotated_indices`),
and their replay through the agent's LSTM from the stored memory (`replay_sequences`, `replay_window`)."""

from __future__ import annotations

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.agent.agent import Agent, merge_steps, replay
from kppo.core.tf_loops import merge_leading, swap_leading
from kppo.core.types import Batch, Rollout


def sequences(rollout: Rollout, length: int = 0) -> Batch:
    """Time-major rollout [T, B, ...] -> sequences [B * T / L, L, ...]: each env's steps cut into chunks of `length`
    (0: the whole rollout, L = T, as purejaxrl's ppo_rnn), each with the memory stored at its first step (the
    memory before acting, so its reset still applies): what a recurrent agent's update replays."""
    traj, advantages, returns = rollout
    steps, envs = traj.reward.shape[0], traj.reward.shape[1]
    length = length or steps

    def chunks(x: tf.Tensor) -> tf.Tensor:  # [T, B, ...] -> [B * T / L, L, ...], env after env
        return tf.reshape(swap_leading(x), [envs * (steps // length), length, *x.shape[2:].as_list()])

    memory = tuple(chunks(m)[:, 0] for m in traj.memory)
    return Batch(
        chunks(traj.obs),
        chunks(traj.action),
        chunks(traj.log_prob),
        chunks(traj.value),
        chunks(advantages),
        chunks(returns),
        chunks(traj.action_mask),
        chunks(traj.episode_start),
        memory,
    )


def rows(rollout: Rollout) -> Batch:
    """Time-major recurrent rollout [T, B, ...] -> env-major rows [B * T, ...] (row env * T + step, as sb3-contrib's
    `swap_and_flatten`), each with the memory stored before its step, `restart` at each env's first step: what
    `rotated_indices` cuts into windows."""
    traj, advantages, returns = rollout
    steps, envs = traj.reward.shape[0], traj.reward.shape[1]

    def env_major(x: tf.Tensor) -> tf.Tensor:
        return merge_leading(swap_leading(x))

    restart = tf.reshape(tf.tile((tf.range(steps) == 0)[None], [envs, 1]), [-1])
    return Batch(
        env_major(traj.obs),
        env_major(traj.action),
        env_major(traj.log_prob),
        env_major(traj.value),
        env_major(advantages),
        env_major(returns),
        env_major(traj.action_mask),
        env_major(traj.episode_start),
        tuple(env_major(m) for m in traj.memory),
        restart,
    )


def rotated_indices(key: tf.Tensor, size: int, num_epochs: int, num_minibatches: int) -> tf.Tensor:
    """int32 [num_epochs * num_minibatches, size // num_minibatches]: sb3-contrib's `RecurrentRolloutBuffer.get`, per
    epoch the rows rotated by a random offset and cut, in order, into windows of consecutive rows."""
    offsets = counter_rng.uniform_int(key, [num_epochs, 1], 0, size)
    rotated = (offsets + tf.range(size)[None]) % size
    return tf.reshape(rotated, [num_epochs * num_minibatches, size // num_minibatches])


def replay_sequences(agent: Agent, mb: Batch) -> tuple[Batch, tf.Tensor, tf.Tensor]:
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
    second segment (faster on CPU than two side by side); a longer one as its segments side by side
    (`window_segments`: 32 steps instead of 256 for CartPoleNoVel's windows)."""
    flat = mb._replace(episode_start=(), memory=(), restart=())
    if mb.obs.shape[0] <= steps:
        column = lambda x: tf.expand_dims(x, 1)  # noqa: E731  [W, ...] -> time-major [W, 1, ...]
        stored = tuple(column(m) for m in mb.memory)
        params, values, _ = replay(
            agent, column(mb.obs), column(mb.episode_start), tuple(m[0] for m in stored), column(mb.restart), stored
        )
        return flat, merge_steps(agent, params), tf.reshape(values, [-1])
    grid, index = window_segments(mb.restart, steps)
    gathered = tf.maximum(grid, 0)  # past a segment's end: any row (its outputs are dropped)
    time_major = lambda x: swap_leading(tf.gather(x, gathered))  # noqa: E731  [W, ...] -> [L, S, ...]
    params, values, _ = replay(
        agent, time_major(mb.obs), time_major(mb.episode_start), tuple(tf.gather(m, gathered[:, 0]) for m in mb.memory)
    )
    return flat, merge_steps(agent, params, index), tf.gather(tf.reshape(values, [-1]), index)
