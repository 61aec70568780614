"""PPO-clip losses and diagnostics (Schulman et al. 2017, https://arxiv.org/abs/1707.06347).

All functions take flat [N] tensors and return scalars; `ppo_loss` combines them as
loss = policy_loss + vf_coef * value_loss - ent_coef * entropy.
"""

from __future__ import annotations

from kppo._tf import tf
from kppo.core.types import LossInfo


def policy_loss(log_prob: tf.Tensor, old_log_prob: tf.Tensor, advantages: tf.Tensor, clip_range: float) -> tf.Tensor:
    """Clipped surrogate: -mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A)), r = exp(log_prob - old_log_prob).

    With r = 1 this is -mean(A). Gradients vanish where the clipped term is the smaller one.
    """
    ratio = tf.exp(log_prob - old_log_prob)
    unclipped = ratio * advantages
    clipped = tf.clip_by_value(ratio, 1.0 - clip_range, 1.0 + clip_range) * advantages
    return -tf.reduce_mean(tf.minimum(unclipped, clipped))


def value_loss(
    values: tf.Tensor,
    old_values: tf.Tensor,
    returns: tf.Tensor,
    clip_range_vf: float | None,
    clip_mode: str = "max",
) -> tf.Tensor:
    """Mean squared error to the returns (SB3's scale: no 1/2 factor), optionally with value clipping.

    With `clip_range_vf`, v_clip = old_values + clip(values - old_values, -clip_range_vf, clip_range_vf) and
      - clip_mode "max" (PPO2/purejaxrl/rex/CleanRL): mean(max((v - R)^2, (v_clip - R)^2)), pessimistic;
      - clip_mode "clipped" (Stable-Baselines3): mean((v_clip - R)^2), no gradient once outside the range.
    """
    if clip_range_vf is None:
        return tf.reduce_mean(tf.square(returns - values))
    clipped = old_values + tf.clip_by_value(values - old_values, -clip_range_vf, clip_range_vf)
    if clip_mode == "clipped":
        return tf.reduce_mean(tf.square(returns - clipped))
    return tf.reduce_mean(tf.maximum(tf.square(returns - values), tf.square(returns - clipped)))


def approx_kl(log_prob: tf.Tensor, old_log_prob: tf.Tensor) -> tf.Tensor:
    """KL(old || new) estimate mean((r - 1) - log r) (low variance, unbiased; http://joschu.net/blog/kl-approx.html)."""
    log_ratio = log_prob - old_log_prob
    return tf.reduce_mean(tf.exp(log_ratio) - 1.0 - log_ratio)


def clip_fraction(log_prob: tf.Tensor, old_log_prob: tf.Tensor, clip_range: float) -> tf.Tensor:
    """Fraction of samples whose ratio lies outside [1 - eps, 1 + eps]."""
    ratio = tf.exp(log_prob - old_log_prob)
    return tf.reduce_mean(tf.cast(tf.abs(ratio - 1.0) > clip_range, tf.float32))


def explained_variance(values: tf.Tensor, returns: tf.Tensor) -> tf.Tensor:
    """1 - Var(returns - values) / Var(returns); NaN when Var(returns) == 0 (as SB3)."""
    var_returns = tf.math.reduce_variance(returns)
    ratio = tf.math.reduce_variance(returns - values) / var_returns
    return tf.where(var_returns > 0, 1.0 - ratio, tf.constant(float("nan"), returns.dtype))


def normalize_advantages(advantages: tf.Tensor, moments: tuple[tf.Tensor, tf.Tensor] | None = None) -> tf.Tensor:
    """(A - mean) / (std + 1e-8) over the minibatch (SB3, CleanRL); `moments` = (mean, variance) when computed
    elsewhere (tf.distribute: over every replica's shard of the minibatch; SB3's sample variance)."""
    mean, var = tf.nn.moments(advantages, axes=[0]) if moments is None else moments
    return (advantages - mean) / (tf.sqrt(var) + 1e-8)


def ppo_loss(
    log_prob: tf.Tensor,
    entropy: tf.Tensor,
    values: tf.Tensor,
    old_log_prob: tf.Tensor,
    old_values: tf.Tensor,
    advantages: tf.Tensor,
    returns: tf.Tensor,
    *,
    clip_range: float,
    clip_range_vf: float | None,
    ent_coef: float,
    vf_coef: float,
    vf_clip_mode: str = "max",
) -> tuple[tf.Tensor, LossInfo]:
    """Total PPO loss of one minibatch and its diagnostics. All inputs are float32 [N]."""
    pg = policy_loss(log_prob, old_log_prob, advantages, clip_range)
    vf = value_loss(values, old_values, returns, clip_range_vf, vf_clip_mode)
    ent = tf.reduce_mean(entropy)
    total = pg + vf_coef * vf - ent_coef * ent
    info = LossInfo(
        total_loss=total,
        policy_loss=pg,
        value_loss=vf,
        entropy=ent,
        approx_kl=approx_kl(log_prob, old_log_prob),
        clip_fraction=clip_fraction(log_prob, old_log_prob, clip_range),
    )
    return total, tf.nest.map_structure(tf.stop_gradient, info)
