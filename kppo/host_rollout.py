"""Rollouts on gymnasium environments stepped on the host, with one compiled policy call per vectorized step.

The semantics are those of the compiled TF-native rollout (`kppo.rollout`): observation statistics are updated with
each new observation before it is normalized, the final observation of a finished episode is normalized with the
statistics of that step, rewards are scaled by the running discounted-return std, and GAE bootstraps truncated
episodes from V(final obs). Only the order of work differs: step t's statistics update and final-observation
normalization happen inside the policy call of step t + 1 (or in `finish_rollout` for the last step), so each env
step costs exactly one compiled call.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from kppo import normalization
from kppo._tf import tf
from kppo.distributions import ActionDistribution
from kppo.gae import compute_gae
from kppo.loops import scan
from kppo.networks import Actor, Critic
from kppo.rollout import RolloutSettings, observe
from kppo.types import EvalResult, EvalTransition, MeanStd, Transition


class HostRolloutState(NamedTuple):
    """Carry of the host rollout (the host path's `RolloutState`)."""

    obs: np.ndarray  # float32 [B, D], raw flattened observation, already counted in obs_stats
    discounted_return: tf.Tensor  # float32 [B]
    obs_stats: MeanStd
    return_stats: MeanStd
    episode_return: np.ndarray  # float64 [B], running raw return of the current episodes
    episode_length: np.ndarray  # int32 [B]


class PolicyStep(NamedTuple):
    obs_stats: MeanStd
    obs: tf.Tensor  # normalized obs the policy acted on
    prev_final_obs: tf.Tensor  # previous step's final obs, normalized with the updated statistics
    action: tf.Tensor  # stored action
    env_action: tf.Tensor  # env units
    log_prob: tf.Tensor
    value: tf.Tensor


class HostPolicy(NamedTuple):
    dist: ActionDistribution
    actor: Actor
    critic: Critic


def policy_step(
    policy: HostPolicy,
    normalize_obs: bool,
    obs_stats: MeanStd,
    obs: tf.Tensor,
    prev_final_obs: tf.Tensor,
    update_stats: tf.Tensor,
    key: tf.Tensor,
) -> PolicyStep:
    """Counts `obs` in the statistics (unless `update_stats` is False: the first step of a rollout, whose obs was
    counted already), normalizes it and the previous final obs, and samples an action."""
    if normalize_obs:
        updated = normalization.update(obs_stats, obs)
        obs_stats = MeanStd(*[tf.where(update_stats, new, old) for new, old in zip(updated, obs_stats)])
    norm_obs = observe(obs_stats, obs, normalize_obs)
    params = policy.actor(norm_obs)
    action = policy.dist.sample(params, key)
    return PolicyStep(
        obs_stats=obs_stats,
        obs=norm_obs,
        prev_final_obs=observe(obs_stats, prev_final_obs, normalize_obs),
        action=action,
        env_action=policy.dist.to_env(action),
        log_prob=policy.dist.log_prob(params, action),
        value=policy.critic(norm_obs),
    )


class FinishedRollout(NamedTuple):
    traj: Transition
    advantages: tf.Tensor
    returns: tf.Tensor
    obs_stats: MeanStd
    return_stats: MeanStd
    discounted_return: tf.Tensor


def finish_rollout(
    critic: Critic,
    settings: RolloutSettings,
    traj: Transition,
    final_obs: tf.Tensor,
    last_final_obs: tf.Tensor,
    last_obs: tf.Tensor,
    obs_stats: MeanStd,
    return_stats: MeanStd,
    discounted_return: tf.Tensor,
) -> FinishedRollout:
    """After the host loop: last statistics update, reward scaling, values of final observations, GAE.

    Args:
        traj: the rollout with raw rewards; `final_value` is filled in here.
        final_obs: float32 [T, B, D] normalized final observations of steps 0..T-2 (row T-1 is ignored).
        last_final_obs: raw final observation of step T-1 [B, D].
        last_obs: raw observation after the last step [B, D] (not yet counted in `obs_stats`).
    """
    if settings.normalize_obs:
        obs_stats = normalization.update(obs_stats, last_obs)
    last_norm_final = observe(obs_stats, last_final_obs, settings.normalize_obs)
    final_obs = tf.concat([final_obs[:-1], last_norm_final[None]], axis=0)
    rewards = traj.reward
    if settings.normalize_reward:
        done = tf.logical_or(traj.terminated, traj.truncated)

        def scale_step(carry, inputs):
            stats, disc = carry
            reward, done_t = inputs
            scaled, disc, stats = normalization.scale_reward(stats, disc, reward, done_t, settings.gamma)
            return (stats, disc), scaled

        (return_stats, discounted_return), rewards = scan(scale_step, (return_stats, discounted_return), (rewards, done))
    num_steps, num_envs = traj.value.shape[0], traj.value.shape[1]
    final_values = tf.reshape(critic(tf.reshape(final_obs, [num_steps * num_envs, -1])), [num_steps, num_envs])
    last_value = critic(observe(obs_stats, last_obs, settings.normalize_obs))
    traj = traj._replace(reward=rewards, final_value=final_values)
    advantages, returns = compute_gae(
        rewards, traj.value, traj.terminated, traj.truncated, final_values, last_value, settings.gamma,
        settings.gae_lambda,
    )
    return FinishedRollout(traj, advantages, returns, obs_stats, return_stats, discounted_return)


def _env_actions(action: np.ndarray, action_space) -> np.ndarray:
    return action.astype(action_space.dtype, copy=False)


def collect_host_rollout(
    vec_env: Any,
    policy_fn,
    finish_fn,
    num_steps: int,
    state: HostRolloutState,
    key: tf.Tensor,
) -> tuple[HostRolloutState, FinishedRollout]:
    """Steps `vec_env` (a `kppo.envs.gymnasium.GymVecEnv`) `num_steps` times.

    Args:
        policy_fn: compiled `policy_step` bound to the policy: (obs_stats, obs, prev_final_obs, update, key).
        finish_fn: compiled `finish_rollout` bound to the critic and settings.
    """
    keys = tf.random.experimental.stateless_split(key, num_steps)
    num_envs, dim = state.obs.shape
    records: dict[str, list] = {name: [] for name in ("obs", "action", "log_prob", "value", "reward", "terminated",
                                                       "truncated", "final_obs", "episode_return", "episode_length")}
    obs_stats, obs = state.obs_stats, state.obs
    prev_final = np.zeros_like(obs)
    ep_return, ep_length = state.episode_return.copy(), state.episode_length.copy()
    for t in range(num_steps):
        out = policy_fn(obs_stats, tf.constant(obs), tf.constant(prev_final), tf.constant(t > 0), keys[t])
        obs_stats = out.obs_stats
        if t > 0:
            records["final_obs"].append(out.prev_final_obs)
        step = vec_env.step(_env_actions(out.env_action.numpy(), vec_env.action_space))
        done = step.terminated | step.truncated
        ep_return += step.reward
        ep_length += 1
        records["obs"].append(out.obs)
        records["action"].append(out.action)
        records["log_prob"].append(out.log_prob)
        records["value"].append(out.value)
        records["reward"].append(step.reward)
        records["terminated"].append(step.terminated)
        records["truncated"].append(step.truncated)
        records["episode_return"].append(np.where(done, ep_return, 0.0).astype(np.float32))
        records["episode_length"].append(np.where(done, ep_length, 0).astype(np.int32))
        ep_return[done], ep_length[done] = 0.0, 0
        prev_final, obs = step.final_obs, step.obs
    records["final_obs"].append(tf.zeros([num_envs, dim]))  # placeholder for step T-1, filled by finish_fn
    stacked = {name: tf.stack([tf.convert_to_tensor(v) for v in values]) for name, values in records.items()}
    traj = Transition(
        obs=stacked["obs"],
        action=stacked["action"],
        log_prob=stacked["log_prob"],
        value=stacked["value"],
        reward=tf.cast(stacked["reward"], tf.float32),
        terminated=stacked["terminated"],
        truncated=stacked["truncated"],
        final_value=tf.zeros_like(stacked["value"]),
        episode_return=stacked["episode_return"],
        episode_length=stacked["episode_length"],
    )
    finished = finish_fn(
        traj, stacked["final_obs"], tf.constant(prev_final), tf.constant(obs), obs_stats, state.return_stats,
        state.discounted_return,
    )
    new_state = HostRolloutState(
        obs, finished.discounted_return, finished.obs_stats, finished.return_stats, ep_return, ep_length
    )
    return new_state, finished


def evaluate_host(
    vec_env: Any, act_fn, obs_stats: MeanStd, seed: int, max_steps: int
) -> tuple[EvalResult, EvalTransition]:
    """One deterministic episode per env of `vec_env` (at most `max_steps` steps), statistics frozen.

    Args:
        act_fn: compiled (obs_stats, raw obs [E, D]) -> deterministic env action [E, ...].
    """
    obs = vec_env.reset(seed=seed)
    num_envs = obs.shape[0]
    active = np.ones(num_envs, bool)
    returns, lengths = np.zeros(num_envs), np.zeros(num_envs, np.int32)
    records = []
    for _ in range(max_steps):
        action = act_fn(obs_stats, tf.constant(obs)).numpy()
        step = vec_env.step(_env_actions(action, vec_env.action_space))
        records.append((obs, action, step.reward, step.terminated, step.truncated, active.copy()))
        returns += np.where(active, step.reward, 0.0)
        lengths += active
        active &= ~(step.terminated | step.truncated)
        obs = step.obs
        if not active.any():
            break
    transitions = EvalTransition(*[tf.constant(np.stack(column)) for column in zip(*records)])
    result = EvalResult(tf.constant(returns, tf.float32), tf.constant(lengths), tf.constant(~active))
    return result, transitions
