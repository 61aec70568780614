"""Rollouts on gymnasium environments stepped on the host, acting in numpy: no TensorFlow call per step.

The policy acts from a numpy snapshot of the actor taken at the start of the rollout (`kppo.agent.numpy_actor`); after
the last step one compiled call (`kppo.rollout.finish.finish_rollout`) computes the log-probabilities of the actions
taken, the values, the values of final observations, the reward scaling and GAE with the networks the update uses.

The semantics are those of the compiled TF-native rollout (`kppo.rollout.native`) and of SB3's VecNormalize +
`collect_rollouts`: observation statistics are updated with each new observation before it is normalized, the final
observation of a finished episode is normalized with the statistics of that step, rewards are scaled by the running
discounted-return std, and GAE bootstraps truncated episodes from V(final obs). Observation statistics live on the host
(float32 numpy moments in `HostRolloutState.obs_stats`).

A per-step hook (`on_step`) sees each vector step as Stable-Baselines3's `collect_rollouts` shows it to callbacks
(`StepRecord.sb3_locals`); returning False stops the rollout at once (`RolloutStopped`), before the update.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple
from collections.abc import Callable

import numpy as np

from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import Agent
from kppo.gym_envs.action_masks import MaskReader
from kppo.gym_envs.vector import GymStep
from kppo.gym_envs.vector_info import sb3_info
from kppo.agent.numpy_actor import (
    ActorWeights,
    MemberActors,
    NumpyActor,
    actor_input,
    head_params,
    member_params,
    network_input,
    snapshot,
    stack_weights,
)
from kppo.agent.numpy_conv import one_blas_thread
from kppo.rollout.native import RolloutSettings, resample_noise
from kppo.core.types import EvalResult, EvalTrajectory, Moments, Rollout, Trajectory

StepHook = Callable[["StepRecord"], bool]  # one vector step -> False stops the rollout


class HostRolloutState(NamedTuple):
    """Carry of the host rollout (the host path's `RolloutState`)."""

    obs: np.ndarray  # float32 [B, D] (uint8 for images), raw flattened observation, already counted in obs_stats
    discounted_return: tf.Tensor  # float32 [B]
    obs_stats: Moments  # float32 numpy moments (`normalization.to_numpy`)
    return_stats: Moments
    episode_return: np.ndarray  # float64 [B], running raw return of the current episodes
    episode_length: np.ndarray  # int32 [B]
    raw_obs: Any = None  # `obs` as gymnasium returned it (what SB3 callbacks see as `obs`)
    clock_start: float = 0.0  # time.perf_counter() when the env was first reset (episode infos' "t")
    action_mask: np.ndarray | None = None  # bool [B, mask_size]: the actions allowed at `obs` (None: no masks)
    episode_start: np.ndarray | None = None  # bool [B]: `obs` is an episode's first (None: all, after the reset)
    memory: tuple = ()  # a recurrent agent's memory before acting on `obs` (numpy (h, c) per LSTM), () otherwise


class RolloutStopped(Exception):
    """Raised out of `collect_host_rollout` when the per-step hook returned False; holds the state at that step."""

    def __init__(self, state: HostRolloutState):
        super().__init__("the per-step hook stopped the rollout")
        self.state = state


def rollout_rng(key) -> np.random.Generator:
    """The numpy generator of one rollout, from its stateless key (int32 [2]): same key, same actions."""
    return np.random.default_rng(np.asarray(key).astype(np.uint32).tolist())


def _env_actions(action: np.ndarray, action_space) -> np.ndarray:
    return action.astype(action_space.dtype, copy=False)


class StepRecord(NamedTuple):
    """One vector step of the host rollout, as the per-step hook sees it (Stable-Baselines3's view of it is built
    only when asked for: `sb3_locals`)."""

    step: GymStep
    obs: Any  # the raw observations acted on
    actions: np.ndarray  # env units
    episode_return: np.ndarray  # float64 [B], running raw returns (the finished episode's where one ended)
    episode_length: np.ndarray  # int32 [B]
    elapsed_s: float  # since the env was first reset
    n_steps: int  # steps of this rollout before this one

    def info(self, i: int) -> dict[str, Any]:
        """Env i's info as SB3's VecEnv + Monitor give it (`kppo.gym_envs.vector_info.sb3_info`)."""
        step = self.step
        episode = {"r": float(self.episode_return[i]), "l": int(self.episode_length[i]), "t": round(self.elapsed_s, 6)}
        return sb3_info(step.infos, i, bool(step.terminated[i]), bool(step.truncated[i]), step.final_obs[i], episode)

    def sb3_locals(self) -> dict[str, Any]:
        """The step as SB3's `collect_rollouts` shows it to callbacks (`BaseCallback.locals`): `obs` (raw, acted on),
        `new_obs` (raw, after the step: the next episode's first observation where one ended), `actions` and
        `clipped_actions` (env units), `rewards` (raw), `dones` (terminated | truncated), `infos` (one dict per env,
        `info(i)`) and `n_steps`."""
        step = self.step
        return {
            "obs": self.obs,
            "new_obs": step.raw_obs,
            "actions": self.actions,
            "clipped_actions": self.actions,
            "rewards": step.reward,
            "dones": step.terminated | step.truncated,
            "infos": [self.info(i) for i in range(len(step.reward))],
            "n_steps": self.n_steps,
        }


class Acting(NamedTuple):
    """Who acts in a host rollout: one run's actor, or every member of a population (its own weights, generator,
    observation statistics and `num_envs // members` consecutive envs of the one vector env), in one batched call
    per step (`kppo.agent.numpy_actor.stack_weights`)."""

    weights: ActorWeights  # stacked: a leading member axis (one member for a single run)
    rngs: tuple  # np.random.Generator per member (`rollout_rng` of the member's rollout key)
    stacked_stats: bool = False  # obs_stats carry a member axis (a population) or are the run's own

    @property
    def members(self) -> int:
        return len(self.rngs)

    def split_stats(self, stats: Moments) -> list[Moments]:
        """Each member's observation statistics."""
        if not self.stacked_stats:
            return [stats]
        return [Moments(*(np.asarray(x)[m] for x in stats)) for m in range(self.members)]

    def join_stats(self, stats: list[Moments]) -> Moments:
        return Moments(*(np.stack(x) for x in zip(*stats))) if self.stacked_stats else stats[0]


def single_acting(agent: Agent, key: tf.Tensor) -> Acting:
    """A single run's `Acting`: a snapshot of the agent's actor, the rollout key's generator."""
    return Acting(stack_weights([snapshot(agent.actor, agent.lstm)]), (rollout_rng(key),))


class HostSteps(NamedTuple):
    """What the host loop collected, as tensors [T, B, ...] (B: every env of the vector env), for `finish_rollout`."""

    trajectory: Trajectory  # log_prob, value and final_value zeros (finish_rollout computes them)
    features: tf.Tensor | None  # the actor extractor's outputs at the observations acted on
    final_obs: tf.Tensor  # [M, K, D] per member (see `_Buffers.final_batch`)
    final_index: tf.Tensor  # [M, K]
    last_obs: tf.Tensor  # [B, D], normalized with each member's statistics


def host_steps(
    vec_env: Any,
    acting: Acting,
    dist,
    settings: RolloutSettings,
    state: HostRolloutState,
    on_step: StepHook | None = None,
    masks: MaskReader | None = None,
) -> tuple[HostRolloutState, HostSteps]:
    """Steps `vec_env` (a `kppo.gym_envs.vector.GymVecEnv`) `settings.num_steps` times, acting in numpy (`acting`):
    the state after the last step and what `finish_rollout` reads.

    Args:
        on_step: called after every vector step with its `StepRecord`; False stops the rollout.
        masks: the env's action masks (the state's `action_mask` is the first step's), or None: no masks.

    Raises:
        RolloutStopped: `on_step` returned False (it holds the state after that step; no rollout is returned).
    """
    with one_blas_thread(acting.weights.numpy_extractor):
        stepped, buf = _host_steps(vec_env, acting, dist, settings, state, on_step, masks)
    zeros = tf.zeros([settings.num_steps, state.obs.shape[0]])
    traj = Trajectory(
        obs=tf.constant(buf.obs),
        action=tf.constant(buf.action),
        log_prob=zeros,
        value=zeros,
        reward=tf.constant(buf.reward),
        terminated=tf.constant(buf.terminated),
        truncated=tf.constant(buf.truncated),
        final_value=zeros,
        episode_return=tf.constant(buf.episode_return),
        episode_length=tf.constant(buf.episode_length),
        action_mask=tf.constant(buf.action_mask),
        episode_start=tf.constant(buf.episode_start),
    )
    final_obs, final_index = buf.final_batch()
    last = [
        network_input(stats, obs, settings.normalize_obs, settings.norm_columns, settings.norm)
        for stats, obs in zip(acting.split_stats(stepped.obs_stats), _by_member(stepped.obs, acting.members))
    ]
    features = None if buf.features is None else tf.constant(buf.features)
    return stepped, HostSteps(
        traj, features, tf.constant(final_obs), tf.constant(final_index), tf.constant(_joined(last))
    )


def collect_host_rollout(
    vec_env: Any,
    agent: Agent,
    settings: RolloutSettings,
    finish_fn,
    state: HostRolloutState,
    key: tf.Tensor,
    on_step: StepHook | None = None,
    masks: MaskReader | None = None,
) -> tuple[HostRolloutState, Rollout]:
    """A single run's host rollout: `host_steps` acting from a snapshot of `agent.actor` with the generator of
    `key` (`rollout_rng`), then `finish_fn` (compiled `finish_rollout`) once. Raises `RolloutStopped` as
    `host_steps` does."""
    stepped, steps = host_steps(vec_env, single_acting(agent, key), agent.dist, settings, state, on_step, masks)
    finished = finish_fn(
        steps.trajectory,
        steps.features,
        steps.final_obs[0],
        steps.final_index[0],
        steps.last_obs,
        state.return_stats,
        state.discounted_return,
        tuple(tf.constant(m) for m in state.memory),
    )
    new_state = stepped._replace(
        discounted_return=finished.discounted_return,
        return_stats=finished.return_stats,
        memory=tuple(m.numpy() for m in finished.memory),
    )
    return new_state, finished.rollout


def _by_member(x: np.ndarray, members: int) -> np.ndarray:
    """[B, ...] -> [M, B / M, ...] (a view): member m's envs are the m-th block of consecutive envs."""
    return x.reshape(members, x.shape[0] // members, *x.shape[1:])


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _Buffers:
    """The host rollout's numpy buffers, [T, B, ...] each; the final observations of truncated steps compacted per
    member."""

    def __init__(self, num_steps: int, num_envs: int, dim: int, obs_dtype, dist, mask_size: int, members: int):
        self.num_steps, self.num_envs, self.members = num_steps, num_envs, members
        self.obs = np.zeros((num_steps, num_envs, dim), obs_dtype)
        self.action = np.zeros((num_steps, num_envs, *tuple(dist.action_shape)), dist.action_dtype.as_numpy_dtype)
        self.reward = np.zeros((num_steps, num_envs), np.float32)
        self.terminated = np.zeros((num_steps, num_envs), bool)
        self.truncated = np.zeros((num_steps, num_envs), bool)
        self.episode_return = np.zeros((num_steps, num_envs), np.float32)
        self.episode_length = np.zeros((num_steps, num_envs), np.int32)
        self.action_mask = np.zeros((num_steps, num_envs, mask_size), bool)
        self.episode_start = np.zeros((num_steps, num_envs), bool)
        self.features: np.ndarray | None = None  # the actor extractor's outputs, when it has one
        self.final_obs: list[list[np.ndarray]] = [[] for _ in range(members)]
        self.final_index: list[list[np.ndarray]] = [[] for _ in range(members)]

    def add_features(self, t: int, features: np.ndarray) -> None:
        if self.features is None:
            self.features = np.zeros((self.num_steps, *features.shape), np.float32)
        self.features[t] = features

    def add_final(self, t: int, member: int, rows: np.ndarray, obs: np.ndarray) -> None:
        """The normalized final observations `obs` of member `member`'s truncated envs `rows` (bool [N]) at step t."""
        self.final_obs[member].append(obs)
        self.final_index[member].append(t * len(rows) + np.flatnonzero(rows).astype(np.int32))

    def final_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(final observations [M, K, D], their steps as t * N + env [M, K], N a member's envs), padded to K = a power
        of two >= 8 (a few shapes for the compiled finish_rollout; the most any member has) with zero rows at index
        T * N."""
        counts = [sum(len(i) for i in index) for index in self.final_index]
        rows = max(8, 1 << max(max(counts) - 1, 0).bit_length())
        envs = self.num_envs // self.members
        obs = np.zeros((self.members, rows, self.obs.shape[2]), self.obs.dtype)
        index = np.full((self.members, rows), self.num_steps * envs, np.int32)
        for m, count in enumerate(counts):
            if count:
                obs[m, :count] = np.concatenate(self.final_obs[m])
                index[m, :count] = np.concatenate(self.final_index[m])
        return obs, index


def _act(acting: Acting, dist, params, masks, mask, noise, t, settings, buf) -> list[np.ndarray]:
    """Each member's actions at step t from the stacked actor parameters (its masks, gSDE noise and generator)."""
    members, actions = acting.members, []
    rows = None if masks is None else _by_member(mask, members)
    for m, rng in enumerate(acting.rngs):
        params_m = member_params(acting.weights, params, m)
        if rows is not None:
            params_m = dist.masked_np(params_m, rows[m])
        if dist.state_dependent and resample_noise(t, settings.sde_sample_freq):
            noise[m] = dist.new_noise_np(params_m, rng, buf.num_envs // members)
        actions.append(dist.sample_np(params_m, rng, noise[m]))
    return actions


def _host_steps(vec_env, acting: Acting, dist, settings: RolloutSettings, state, on_step, masks):
    """The host rollout's loop (`host_steps`): (the state after the last step, its `_Buffers`)."""
    members = acting.members
    actor_memory = tuple(_by_member(m, members) for m in state.memory[:2])  # the critic's is replayed after the loop
    num_steps, (num_envs, dim) = settings.num_steps, state.obs.shape
    normalize_obs, columns, norm = settings.normalize_obs, settings.norm_columns, settings.norm
    obs_dtype = np.uint8 if state.obs.dtype == np.uint8 and not normalize_obs else np.float32  # images stay bytes
    buf = _Buffers(num_steps, num_envs, dim, obs_dtype, dist, dist.mask_size if masks else 0, members)
    starts = np.ones(num_envs, bool) if state.episode_start is None else state.episode_start
    obs, raw_obs, stats, mask = state.obs, state.raw_obs, acting.split_stats(state.obs_stats), state.action_mask
    ep_return, ep_length = state.episode_return.copy(), state.episode_length.copy()
    space, weights = vec_env.action_space, acting.weights
    noise: list = [None] * members
    for t in range(num_steps):
        norm_obs = _joined(
            [network_input(s, o, normalize_obs, columns, norm) for s, o in zip(stats, _by_member(obs, members))]
        )
        features, actor_memory = actor_input(
            weights, _by_member(norm_obs, members), actor_memory, _by_member(starts, members)
        )
        if weights.extractor is not None and weights.lstm is None:  # the update replays a recurrent one's
            buf.add_features(t, features.reshape(num_envs, -1))
        params = head_params(weights, features)
        if masks is not None:
            buf.action_mask[t] = mask
        action = _joined(_act(acting, dist, params, masks, mask, noise, t, settings, buf))
        actions = _env_actions(dist.to_env_np(action), space).reshape((num_envs, *space.shape))
        step = vec_env.step(actions)
        if masks is not None:
            mask = masks.step(step.infos)
        if normalize_obs:
            stats = [normalization.update_moments_np(s, o) for s, o in zip(stats, _by_member(step.obs, members))]
        done = step.terminated | step.truncated
        ended = done.any()
        ep_return += step.reward
        ep_length += 1
        buf.obs[t], buf.action[t], buf.episode_start[t] = norm_obs, action, starts
        starts = done
        buf.reward[t], buf.terminated[t], buf.truncated[t] = step.reward, step.terminated, step.truncated
        if step.truncated.any():  # final values are read only where truncated
            _add_finals(buf, t, stats, step, settings)
        if ended:
            buf.episode_return[t, done], buf.episode_length[t, done] = ep_return[done], ep_length[done]
        proceed = on_step is None or on_step(
            StepRecord(step, raw_obs, actions, ep_return, ep_length, time.perf_counter() - state.clock_start, t)
        )
        if ended:
            ep_return[done], ep_length[done] = 0.0, 0
        obs, raw_obs = step.obs, step.raw_obs
        if not proceed:
            episode_start = np.ones_like(starts) if state.memory else starts
            raise RolloutStopped(
                state._replace(
                    obs=obs,
                    raw_obs=raw_obs,
                    obs_stats=acting.join_stats(stats),
                    episode_return=ep_return,
                    episode_length=ep_length,
                    action_mask=mask,
                    episode_start=episode_start,
                )
            )
    carried = dict(obs=obs, raw_obs=raw_obs, obs_stats=acting.join_stats(stats), action_mask=mask, episode_start=starts)
    return state._replace(episode_return=ep_return, episode_length=ep_length, **carried), buf


def _add_finals(buf: _Buffers, t: int, stats: list[Moments], step: GymStep, settings: RolloutSettings) -> None:
    """The truncated envs' final observations at step t, each normalized with its member's statistics."""
    truncated, final_obs = _by_member(step.truncated, buf.members), _by_member(step.final_obs, buf.members)
    for m, rows in enumerate(truncated):
        if rows.any():
            normalized = network_input(
                stats[m], final_obs[m][rows], settings.normalize_obs, settings.norm_columns, settings.norm
            )
            buf.add_final(t, m, rows, normalized)


def evaluation_episodes(
    vec_env: Any,
    actor: NumpyActor | MemberActors,
    obs_stats: Moments,
    seed: int | list[int],
    max_steps: int,
    masks: MaskReader | None = None,
) -> tuple[EvalResult, EvalTrajectory]:
    """One deterministic episode per env of `vec_env` (at most `max_steps` steps), statistics frozen, acting in numpy
    (`actor`: a snapshot of the actor, or a population's `MemberActors` with `obs_stats` per member) with `vec_env`'s
    action masks when `masks` reads them. `seed`: the reset's (env i gets seed + i), or one seed per env."""
    obs = vec_env.reset(seed=seed)
    mask = masks.reset(vec_env.reset_infos) if masks is not None else None
    memory = actor.initial_memory(obs.shape[0])
    obs_stats = normalization.to_numpy(obs_stats)
    num_envs = obs.shape[0]
    active = np.ones(num_envs, bool)
    returns, lengths = np.zeros(num_envs), np.zeros(num_envs, np.int32)
    records = []
    with one_blas_thread(actor.weights.numpy_extractor):
        for _ in range(max_steps):
            action, memory = actor.deterministic_env_action(obs_stats, obs, mask, memory)
            action = _env_actions(action, vec_env.action_space)
            step = vec_env.step(action)
            mask = masks.step(step.infos) if masks is not None else None
            records.append((obs, action, step.reward, step.terminated, step.truncated, active.copy()))
            returns += np.where(active, step.reward, 0.0)
            lengths += active
            active &= ~(step.terminated | step.truncated)
            obs = step.obs
            if not active.any():
                break
    transitions = EvalTrajectory(*[tf.constant(np.stack(column)) for column in zip(*records)])
    result = EvalResult(tf.constant(returns, tf.float32), tf.constant(lengths), tf.constant(~active))
    return result, transitions
