"""Generalized Advantage Estimation (Schulman et al. 2016, https://arxiv.org/abs/1506.02438), with terminated and
truncated episodes kept apart.

GAE runs once per rollout, outside the gradient tape (as SB3 and purejaxrl; brax recomputes it inside the loss).
"""

from __future__ import annotations

from kppo._tf import tf
from kppo.core.tf_loops import scan


def compute_gae(
    rewards: tf.Tensor,
    values: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    final_values: tf.Tensor,
    last_value: tf.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Advantages and value targets of one time-major rollout.

    Index convention: step t takes obs_t with value v_t, receives r_t, and ends the episode when terminated_t or
    truncated_t. The value of what follows step t is

        next_t = 0                    if terminated_t  (no future)
               = final_values_t       if truncated_t   (V of the final observation, not of the reset one)
               = v_{t+1}              otherwise        (last_value for t = T-1)

    delta_t = r_t + gamma * next_t - v_t and A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}.

    Args:
        rewards: float32 [T, B].
        values: float32 [T, B], V(obs_t).
        terminated: bool [T, B].
        truncated: bool [T, B].
        final_values: float32 [T, B], V(final obs of step t); read only where truncated.
        last_value: float32 [B], V(obs_T) of the observation after the last step.
        gamma: discount factor.
        gae_lambda: GAE lambda.

    Returns:
        (advantages [T, B], returns [T, B] = advantages + values).
    """
    terminated = tf.cast(terminated, tf.bool)
    truncated = tf.cast(truncated, tf.bool)
    next_values = tf.concat([values[1:], last_value[None]], axis=0)
    next_values = tf.where(truncated, final_values, next_values)
    next_values = tf.where(terminated, tf.zeros_like(next_values), next_values)
    deltas = rewards + gamma * next_values - values
    continues = gamma * gae_lambda * (1.0 - tf.cast(tf.logical_or(terminated, truncated), rewards.dtype))

    def backward_step(advantage_tp1: tf.Tensor, inputs: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        delta_t, continue_t = inputs
        advantage_t = delta_t + continue_t * advantage_tp1
        return advantage_t, advantage_t

    backward = (tf.reverse(deltas, [0]), tf.reverse(continues, [0]))
    _, advantages = scan(backward_step, tf.zeros_like(last_value), backward)
    advantages = tf.reverse(advantages, [0])
    return advantages, advantages + values
