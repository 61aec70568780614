"""NamedTuples carried through the compiled loops. Time-major: [T, B, ...] = [num_steps, num_envs, ...]."""

from __future__ import annotations

from typing import Any, NamedTuple

from kppo._tf import tf


class Moments(NamedTuple):
    """Running moments of a stream (see `kppo.core.normalization`). Shapes: [*x_shape], [*x_shape], []."""

    mean: tf.Tensor
    var: tf.Tensor
    count: tf.Tensor


class Trajectory(NamedTuple):
    """A whole rollout, time-major [T, B, ...] (inside the rollout's loop body: one step of it, [B, ...]).
    Observations are stored normalized (as the policy saw them)."""

    obs: tf.Tensor  # float32 [T, B, obs_dim], normalized
    action: tf.Tensor  # [T, B, *action_shape]: Gaussian sample u (pre-squash) or int32 index
    log_prob: tf.Tensor  # float32 [T, B]
    value: tf.Tensor  # float32 [T, B]
    reward: tf.Tensor  # float32 [T, B], scaled when normalize_reward
    terminated: tf.Tensor  # bool [T, B]
    truncated: tf.Tensor  # bool [T, B]
    final_value: tf.Tensor  # float32 [T, B], V(final obs of the step); used only where truncated
    episode_return: tf.Tensor  # float32 [T, B], raw return of an episode that ended at this step, else 0
    episode_length: tf.Tensor  # int32 [T, B], its length, else 0
    action_mask: tf.Tensor  # bool [T, B, mask_size]: the actions allowed when acting (width 0: no masks)
    episode_start: tf.Tensor  # bool [T, B]: obs is an episode's first (a recurrent agent's memory restarts there)
    memory: Any = ()  # a recurrent agent's memory before acting on obs (before a reset), [T, B, units] per tensor


class RolloutState(NamedTuple):
    """Carry between rollout steps and between iterations."""

    env_state: Any
    obs: tf.Tensor  # raw observation [B, obs_dim] the policy acts on next
    discounted_return: tf.Tensor  # float32 [B], for reward scaling
    obs_stats: Moments
    return_stats: Moments
    noise: tf.Tensor  # gSDE exploration matrices [B, latent, A]; an empty tensor for other distributions
    memory: Any = ()  # a recurrent agent's LSTM memory before acting on `obs` ((h, c) per cell, [B, units]); () else
    episode_start: Any = ()  # bool [B]: `obs` is an episode's first (set by `initial_rollout_state`)


class Rollout(NamedTuple):
    """A collected trajectory with its GAE: what the update trains on."""

    trajectory: Trajectory  # [T, B, ...]
    advantages: tf.Tensor  # float32 [T, B]
    returns: tf.Tensor  # float32 [T, B], advantages + values


class RunnerState(NamedTuple):
    """Everything that changes between compiled calls, except variables (model, optimizer)."""

    rollout: Any  # RolloutState (TF-native envs) or kppo.rollout.gymnasium.HostRolloutState (gymnasium envs)
    key: tf.Tensor  # int32 [2] stateless seed
    iteration: tf.Tensor  # int32 [], iterations done so far


class Batch(NamedTuple):
    """A flattened rollout fed to the update, [N, ...] with N = T * B; for a recurrent agent sequences instead,
    [S, L, ...]: each env's steps cut into S / B chunks of L (`kppo.update.ppo.sequences`), with the memory each starts
    from; or, for sb3-contrib's rotated windows, env-major rows [B * T, ...] (`kppo.update.ppo.rows`) with the memory
    stored before every row and `restart` at each env's first row."""

    obs: tf.Tensor
    action: tf.Tensor
    log_prob: tf.Tensor
    value: tf.Tensor
    advantage: tf.Tensor
    returns: tf.Tensor
    action_mask: tf.Tensor  # bool [N, mask_size]; width 0 without masks
    episode_start: Any = ()  # recurrent: bool [S, L]; () (no leaf) for a flat batch
    memory: Any = ()  # recurrent: the memory at each sequence's start, [S, units] per tensor (rows: [B * T, units])
    restart: Any = ()  # recurrent rows: bool [B * T], True at each env's first step (its stored memory is its start)


class LossInfo(NamedTuple):
    """Per-minibatch scalars (averaged over the update by `kppo.update.ppo`)."""

    total_loss: tf.Tensor
    policy_loss: tf.Tensor
    value_loss: tf.Tensor
    entropy: tf.Tensor
    approx_kl: tf.Tensor
    clip_fraction: tf.Tensor


class Diagnostics(NamedTuple):
    """Per-iteration scalars (a call running n iterations returns their sums)."""

    total_loss: tf.Tensor
    policy_loss: tf.Tensor
    value_loss: tf.Tensor
    entropy: tf.Tensor
    approx_kl: tf.Tensor
    clip_fraction: tf.Tensor
    explained_variance: tf.Tensor
    learning_rate: tf.Tensor
    grad_norm: tf.Tensor
    minibatch_steps: tf.Tensor  # gradient steps taken (fewer than epochs * minibatches after a target-KL stop)
    episode_return_sum: tf.Tensor  # summed raw returns of episodes finished in the rollouts
    episode_length_sum: tf.Tensor
    episodes: tf.Tensor  # episodes finished in the rollouts


class EvalTrajectory(NamedTuple):
    """An evaluation rollout, time-major [T, E, ...], raw (unnormalized) values; passed to `eval_metrics_fn`."""

    obs: tf.Tensor
    action: tf.Tensor  # env units
    reward: tf.Tensor
    terminated: tf.Tensor
    truncated: tf.Tensor
    active: tf.Tensor  # bool: the env was still in its first episode at this step


class EvalResult(NamedTuple):
    returns: tf.Tensor  # float32 [E], first-episode return of each eval env
    lengths: tf.Tensor  # int32 [E]
    finished: tf.Tensor  # bool [E], whether that episode ended within max_episode_steps
