"""The end of a host rollout, in one compiled call (`finish_rollout`): the log-probabilities of the actions taken,
the values (a recurrent agent's replayed from the rollout's first memory), the values of final observations, the
reward scaling and GAE, with the networks the update uses."""

from __future__ import annotations

from typing import NamedTuple

from kppo._tf import tf
from kppo.agent.agent import Agent, act_step, actor_critic, merge_steps, replay, value_after
from kppo.core import normalization
from kppo.core.gae import compute_gae
from kppo.core.tf_loops import scan
from kppo.core.types import Moments, Rollout, Trajectory
from kppo.rollout.native import RolloutSettings

__all__ = ["FinishedRollout", "finish_rollout"]


class FinishedRollout(NamedTuple):
    """What `finish_rollout` returns: the rollout and the reward statistics carried to the next one."""

    rollout: Rollout
    return_stats: Moments
    discounted_return: tf.Tensor
    memory: tuple = ()  # a recurrent agent's memory after the last step (before a reset at the next observation)


def finish_rollout(
    agent: Agent,
    settings: RolloutSettings,
    traj: Trajectory,
    features: tf.Tensor | None,
    final_obs: tf.Tensor,
    final_index: tf.Tensor,
    last_obs: tf.Tensor,
    return_stats: Moments,
    discounted_return: tf.Tensor,
    memory: tuple = (),
) -> FinishedRollout:
    """After the host loop, in one compiled call: log-probabilities of the actions taken, values, values of final
    observations, reward scaling, GAE.

    Args:
        traj: the rollout with normalized observations, actions and raw rewards; `log_prob`, `value` and
            `final_value` are filled in here.
        features: float32 [T, B, F], the actor's features extractor's output at `traj.obs` from the acting pass, or
            None (no extractor): the extractor does not run again for the actor, nor for a critic sharing it.
        final_obs: [K, D], the normalized final observations of the truncated steps (padded to K rows).
        final_index: int32 [K], each final observation's step as t * B + env; T * B for a padding row.
        last_obs: float32 [B, D], the normalized observation after the last step.
        memory: a recurrent agent's memory at the first step: the rollout is replayed from it (`agent.replay`), and
            a final observation's value continues the memory of its step.
    """
    num_steps, num_envs = traj.reward.shape[0], traj.reward.shape[1]

    def flat(x: tf.Tensor) -> tf.Tensor:
        return tf.reshape(x, [num_steps * num_envs, *x.shape[2:].as_list()])

    def time_major(x: tf.Tensor) -> tf.Tensor:
        return tf.reshape(x, [num_steps, num_envs])

    def scattered(final: tf.Tensor) -> tf.Tensor:  # [K] at final_index -> [T, B], zeros elsewhere
        rows = tf.scatter_nd(final_index[:, None], final, [num_steps * num_envs + 1])
        return time_major(rows[: num_steps * num_envs])

    if agent.lstm is None:
        params, values = actor_critic(agent, flat(traj.obs), None if features is None else flat(features))
        values, end_memory = time_major(values), ()
        final_values = scattered(agent.critic(final_obs))
        last_value = agent.critic(last_obs)
    else:
        params, values, memories = replay(agent, traj.obs, traj.episode_start, memory)
        params = merge_steps(agent, params)
        at_final = tf.minimum(final_index, num_steps * num_envs - 1)
        final_values = scattered(value_after(agent, final_obs, tuple(tf.gather(flat(m), at_final) for m in memories)))
        end_memory = tuple(m[-1] for m in memories)
        traj = traj._replace(memory=tuple(tf.concat([m0[None], m[:-1]], 0) for m0, m in zip(memory, memories)))
        last_done = tf.logical_or(traj.terminated[-1], traj.truncated[-1])
        last_value = act_step(agent, last_obs, end_memory, last_done)[1]
    params = agent.dist.masked(params, flat(traj.action_mask))
    log_prob = time_major(agent.dist.log_prob(params, flat(traj.action)))
    rewards = traj.reward
    if settings.normalize_reward:
        done = tf.logical_or(traj.terminated, traj.truncated)

        def scale_step(carry, inputs):
            stats, disc = carry
            reward, done_t = inputs
            scaled, disc, stats = normalization.scale_reward(stats, disc, reward, done_t, settings.gamma, settings.norm)
            return (stats, disc), scaled

        (return_stats, discounted_return), rewards = scan(
            scale_step, (return_stats, discounted_return), (rewards, done)
        )
    traj = traj._replace(log_prob=log_prob, value=values, reward=rewards, final_value=final_values)
    advantages, returns = compute_gae(
        rewards,
        values,
        traj.terminated,
        traj.truncated,
        final_values,
        last_value,
        settings.gamma,
        settings.gae_lambda,
    )
    return FinishedRollout(Rollout(traj, advantages, returns), return_stats, discounted_return, end_memory)
