"""Compiled rollouts on TF-native environments: the training rollout (sampled actions, running normalization,
GAE) and the deterministic evaluation rollout. Loop bodies are module-level pure functions over NamedTuples."""

from __future__ import annotations

import math

from typing import Any, NamedTuple

from kppo.core import normalization
from kppo.core import counter_rng
from kppo._tf import tf
from kppo.agent.agent import Agent, act_step, initial_memory, value_after
from kppo.envs.base import VecEnv
from kppo.core.gae import compute_gae
from kppo.core.tf_loops import scan
from kppo.core.types import EvalResult, EvalTrajectory, Moments, Rollout, RolloutState, Trajectory


class RolloutSettings(NamedTuple):
    num_steps: int
    gamma: float
    gae_lambda: float
    normalize_obs: bool
    normalize_reward: bool
    sde_sample_freq: int = -1  # gSDE: redraw the exploration noise every N steps (-1: at the rollout start only)
    action_masks: bool = False  # act with the env's action masks (`VecEnv.action_mask`) and store them
    norm_columns: Any = None  # host rollouts: bool [D], the columns normalize_obs applies to (None: all)
    norm: normalization.Constants = normalization.DEFAULTS  # the clips and epsilon of both normalizations


#: The longest TF-native evaluation episode, for tasks without a time limit (MinAtar's): the evaluation is one
#: compiled scan of fixed length that records every step (16 envs x 10,000 steps of a 10x10x4 grid: 26 MB).
EVAL_STEP_CAP = 10_000


def current_mask(env: VecEnv, agent: Agent, env_state, num_envs: int, action_masks: bool) -> tf.Tensor:
    """bool [num_envs, mask_size]: the env's action mask at its current observations when `action_masks`, else the
    width-0 mask of unmasked runs."""
    mask = env.action_mask(env_state) if action_masks else None
    if mask is None:
        if action_masks:
            raise ValueError(
                f"action_masks: expected the env to implement action_mask(state), got None from "
                f"{type(getattr(env, 'task', env)).__name__}"
            )
        return agent.dist.no_mask([num_envs])
    if mask.shape[1:] != [agent.dist.mask_size]:
        raise ValueError(
            f"action_mask: expected shape [num_envs, {agent.dist.mask_size}] for {env.action_space}, got {mask.shape}"
        )
    return tf.cast(mask, tf.bool)


def resample_noise(t, sde_sample_freq: int):
    """Whether step t (0-based within the rollout) draws new gSDE noise (SB3: at the start and every freq steps)."""
    return t == 0 if sde_sample_freq <= 0 else t % sde_sample_freq == 0


def flat_rows(obs: tf.Tensor) -> tf.Tensor:
    """Observations [B, *shape] as rows [B, D]: how the networks, the statistics, checkpoints and artifacts read
    them (a TF-native image task's frames [B, H, W, C] included)."""
    return obs if obs.shape.rank == 2 else tf.reshape(obs, [tf.shape(obs)[0], -1])


def network_input(
    stats: Moments, obs: tf.Tensor, normalize_obs: bool, norm: normalization.Constants = normalization.DEFAULTS
) -> tf.Tensor:
    """What the networks see of raw observations [B, *shape]: rows [B, D] (`flat_rows`), float32, normalized with
    `stats` and `norm`'s clip and epsilon when enabled."""
    obs = flat_rows(obs)
    if not normalize_obs:
        return tf.cast(obs, tf.float32)
    return normalization.normalize(stats, obs, norm.clip_obs, epsilon=norm.epsilon)


def env_action(env: VecEnv, agent: Agent, action: tf.Tensor) -> tf.Tensor:
    """Stored action -> the dtype and units the env takes."""
    to_env = agent.dist.to_env(action)
    return to_env if to_env.dtype.is_integer else tf.cast(to_env, env.dtype)


def initial_rollout_state(
    env: VecEnv, agent: Agent, key: tf.Tensor, num_envs: int, normalize_obs: bool
) -> RolloutState:
    """Resets the env; the first observations enter the observation statistics (as SB3's VecNormalize.reset)."""
    env_state, obs = env.reset(key, num_envs)
    shape = env.observation_space.shape
    assert shape is not None, "a TF-native env's observation space has a shape"
    obs_stats = normalization.initial_stats([math.prod(shape)])
    if normalize_obs:
        obs_stats = normalization.update_moments(obs_stats, flat_rows(obs))
    return RolloutState(
        env_state=env_state,
        obs=obs,
        discounted_return=tf.zeros([num_envs], tf.float32),
        obs_stats=obs_stats,
        return_stats=normalization.initial_stats(()),
        noise=tf.zeros(agent.dist.noise_shape(num_envs)),
        memory=initial_memory(agent, num_envs),
        episode_start=tf.ones([num_envs], tf.bool),
    )


def env_step(
    env: VecEnv, agent: Agent, settings: RolloutSettings, state: RolloutState, inputs: tuple[tf.Tensor, tf.Tensor]
) -> tuple[RolloutState, tuple[Trajectory, tf.Tensor]]:
    """One vectorized step with a sampled action; `inputs` = (key, step index in the rollout). Returns the new
    state and (transition, normalized final obs); the transition's `final_value` is filled in after the loop, in
    one batched critic call."""
    key, t = inputs
    key_action, key_env = tf.unstack(counter_rng.split(key, 2))
    obs = network_input(state.obs_stats, state.obs, settings.normalize_obs, settings.norm)
    num_envs = state.discounted_return.shape[0]
    mask = current_mask(env, agent, state.env_state, num_envs, settings.action_masks)
    params, value, memory = act_step(agent, obs, state.memory, state.episode_start)
    params = agent.dist.masked(params, mask)
    noise = tf.where(
        resample_noise(t, settings.sde_sample_freq), agent.dist.new_noise(params, key_action, num_envs), state.noise
    )
    action = agent.dist.sample(params, key_action, noise)
    log_prob = agent.dist.log_prob(params, action)
    result = env.step(state.env_state, env_action(env, agent, action), key_env)
    done = tf.logical_or(result.terminated, result.truncated)

    obs_stats = state.obs_stats
    if settings.normalize_obs:
        obs_stats = normalization.update_moments(obs_stats, flat_rows(result.obs))
    final_obs = network_input(obs_stats, result.final_obs, settings.normalize_obs, settings.norm)
    reward = tf.cast(result.reward, tf.float32)
    discounted_return, return_stats = state.discounted_return, state.return_stats
    if settings.normalize_reward:
        reward, discounted_return, return_stats = normalization.scale_reward(
            return_stats, discounted_return, reward, done, settings.gamma, settings.norm
        )
    stats = result.state  # EpisodeStatsState: the finished episode's return/length where done
    transition = Trajectory(
        obs=obs,
        action=action,
        log_prob=log_prob,
        value=value,
        reward=reward,
        terminated=result.terminated,
        truncated=result.truncated,
        final_value=tf.zeros_like(value) if agent.lstm is None else value_after(agent, final_obs, memory),
        episode_return=tf.where(done, stats.returned_episode_return, 0.0),
        episode_length=tf.where(done, stats.returned_episode_length, 0),
        action_mask=mask,
        episode_start=state.episode_start,
        memory=state.memory,
    )
    new_state = RolloutState(result.state, result.obs, discounted_return, obs_stats, return_stats, noise, memory, done)
    return new_state, (transition, final_obs)


def collect_rollout(
    env: VecEnv, agent: Agent, settings: RolloutSettings, state: RolloutState, key: tf.Tensor
) -> tuple[RolloutState, Rollout]:
    """`num_steps` env steps, then values of final observations and GAE.

    Returns:
        (state after the rollout, Rollout: trajectory [T, B], advantages [T, B], returns [T, B]).
    """
    keys = counter_rng.split(key, settings.num_steps)
    state, (traj, final_obs) = scan(
        lambda s, x: env_step(env, agent, settings, s, x), state, (keys, tf.range(settings.num_steps))
    )
    return state, finish_steps(agent, settings, state, traj, final_obs)


def finish_steps(
    agent: Agent, settings: RolloutSettings, state: RolloutState, traj: Trajectory, final_obs: tf.Tensor
) -> Rollout:
    """What follows the steps of a rollout: the critic's values of the final observations (one batched call), the
    value of the last observations, and GAE. `state` is the state after the steps."""
    num_steps, num_envs = settings.num_steps, traj.value.shape[1]
    if agent.lstm is None:  # a recurrent agent's final values were computed in the loop, from its memory
        flat_final = tf.reshape(final_obs, [num_steps * num_envs, -1])
        traj = traj._replace(final_value=tf.reshape(agent.critic(flat_final), [num_steps, num_envs]))
    last_obs = network_input(state.obs_stats, state.obs, settings.normalize_obs, settings.norm)
    last_value = act_step(agent, last_obs, state.memory, state.episode_start)[1]
    advantages, returns = compute_gae(
        traj.reward,
        traj.value,
        traj.terminated,
        traj.truncated,
        traj.final_value,
        last_value,
        settings.gamma,
        settings.gae_lambda,
    )
    return Rollout(traj, advantages, returns)


class _EvalCarry(NamedTuple):
    env_state: object
    obs: tf.Tensor
    active: tf.Tensor  # bool [E]: still in the first episode
    returns: tf.Tensor
    lengths: tf.Tensor
    memory: tuple = ()  # a recurrent agent's memory (its first episode only counts: never reset)


def eval_env_step(
    env: VecEnv,
    agent: Agent,
    obs_stats: Moments,
    normalize_obs: bool,
    action_masks: bool,
    norm: normalization.Constants,
    carry: _EvalCarry,
    key: tf.Tensor,
) -> tuple[_EvalCarry, EvalTrajectory]:
    """One deterministic step (masked when `action_masks`); only each env's first episode counts."""
    mask = current_mask(env, agent, carry.env_state, carry.active.shape[0], action_masks)
    params, _, memory = act_step(agent, network_input(obs_stats, carry.obs, normalize_obs, norm), carry.memory)
    action = env_action(env, agent, agent.dist.mode(agent.dist.masked(params, mask)))
    result = env.step(carry.env_state, action, key)
    reward = tf.cast(result.reward, tf.float32)
    active = carry.active
    returns = carry.returns + tf.where(active, reward, 0.0)
    lengths = carry.lengths + tf.cast(active, tf.int32)
    done = tf.logical_or(result.terminated, result.truncated)
    record = EvalTrajectory(carry.obs, action, reward, result.terminated, result.truncated, active)
    return _EvalCarry(result.state, result.obs, tf.logical_and(active, ~done), returns, lengths, memory), record


def evaluation_episodes(
    env: VecEnv,
    agent: Agent,
    obs_stats: Moments,
    key: tf.Tensor,
    num_envs: int,
    normalize_obs: bool,
    action_masks: bool = False,
    norm: normalization.Constants = normalization.DEFAULTS,
) -> tuple[EvalResult, EvalTrajectory]:
    """One deterministic episode in each of `num_envs` envs (at most max_episode_steps steps, and at most
    `EVAL_STEP_CAP`: a compiled evaluation has a fixed length, and MinAtar's games have no time limit), statistics
    frozen."""
    carry, keys = evaluation_start(env, agent, key, num_envs)
    carry, records = scan(
        lambda c, k: eval_env_step(env, agent, obs_stats, normalize_obs, action_masks, norm, c, k),
        carry,
        keys,
        until=evaluation_over,  # every episode ended: the rest would be zeros
    )
    return evaluation_result(carry), records


def evaluation_start(env: VecEnv, agent: Agent, key: tf.Tensor, num_envs: int) -> tuple[_EvalCarry, tf.Tensor]:
    """The evaluation's envs reset from `key`, and its steps' keys [steps, 2]."""
    key_reset, key_steps = tf.unstack(counter_rng.split(key, 2))
    env_state, obs = env.reset(key_reset, num_envs)
    carry = _EvalCarry(
        env_state,
        obs,
        tf.ones([num_envs], tf.bool),
        tf.zeros([num_envs], tf.float32),
        tf.zeros([num_envs], tf.int32),
        initial_memory(agent, num_envs),
    )
    return carry, counter_rng.split(key_steps, min(env.max_episode_steps, EVAL_STEP_CAP))


def evaluation_over(carry: _EvalCarry) -> tf.Tensor:
    """Whether every episode of the evaluation (of every member, with a member axis) has ended."""
    return tf.logical_not(tf.reduce_any(carry.active))


def evaluation_result(carry: _EvalCarry) -> EvalResult:
    """The first episodes' returns, lengths and whether they ended (any leading axes)."""
    return EvalResult(carry.returns, carry.lengths, tf.logical_not(carry.active))
