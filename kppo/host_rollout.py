"""Rollouts on gymnasium environments stepped on the host, with one compiled policy call per vectorized step.

The semantics are those of the compiled TF-native rollout (`kppo.rollout`): observation statistics are updated with
each new observation before it is normalized, the final observation of a finished episode is normalized with the
statistics of that step, rewards are scaled by the running discounted-return std, and GAE bootstraps truncated
episodes from V(final obs). Only the order of work differs: step t's statistics update and final-observation
normalization happen inside the policy call of step t + 1 (or in `finish_rollout` for the last step), so each env
step costs exactly one compiled call.

A per-step hook (`on_step`) sees each vector step as Stable-Baselines3's `collect_rollouts` shows it to callbacks
(`StepRecord.sb3_locals`); returning False stops the rollout at once (`RolloutStopped`), before the update.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import numpy as np

from kppo import normalization
from kppo._tf import tf
from kppo.agent import Agent
from kppo.envs.gymnasium import HostStep
from kppo.envs.vector_info import sb3_info
from kppo.gae import compute_gae
from kppo.loops import scan
from kppo.networks import Critic
from kppo.rollout import RolloutSettings, network_input, resample_noise
from kppo.types import EvalResult, EvalTrajectory, MeanStd, Rollout, Trajectory

StepHook = Callable[["StepRecord"], bool]  # one vector step -> False stops the rollout


class HostRolloutState(NamedTuple):
    """Carry of the host rollout (the host path's `RolloutState`)."""

    obs: np.ndarray  # float32 [B, D], raw flattened observation, already counted in obs_stats
    discounted_return: tf.Tensor  # float32 [B]
    obs_stats: MeanStd
    return_stats: MeanStd
    episode_return: np.ndarray  # float64 [B], running raw return of the current episodes
    episode_length: np.ndarray  # int32 [B]
    raw_obs: Any = None  # `obs` as gymnasium returned it (what SB3 callbacks see as `obs`)
    clock_start: float = 0.0  # time.perf_counter() when the env was first reset (episode infos' "t")


class RolloutStopped(Exception):
    """Raised out of `collect_host_rollout` when the per-step hook returned False; holds the state at that step."""

    def __init__(self, state: "HostRolloutState"):
        super().__init__("the per-step hook stopped the rollout")
        self.state = state


class ActStep:
    """The per-step compiled call of the host rollout.

    TF function calls cost ~40 us per input/output tensor here (140 us for an identity function), so inputs and
    outputs are packed: one [2, B, D] tensor (observation, previous final observation) and a key in, one float32
    [B, K] tensor out; observation statistics live in variables. Two concrete functions: with and without the
    statistics update (the first step of a rollout acts on an observation that was counted already).
    """

    def __init__(
        self, agent: Agent, normalize_obs: bool, num_envs: int, obs_dim: int, jit: bool, sde_sample_freq: int = -1
    ):
        self.agent = agent
        self.normalize_obs = normalize_obs
        self.stats = normalization.RunningMeanStd([obs_dim], name="obs_stats")
        self.noise = tf.Variable(tf.zeros(agent.dist.noise_shape(num_envs)), trainable=False, name="sde_noise")
        self.sde_sample_freq = sde_sample_freq
        self.action_size = int(np.prod(agent.dist.action_shape, dtype=np.int64))
        self.obs_dim = obs_dim
        spec = (tf.TensorSpec([2, num_envs, obs_dim], tf.float32), tf.TensorSpec([2], tf.int32))
        resample_flags = (False, True) if agent.dist.state_dependent else (False,)
        self._calls = {
            (update, resample): self._compile(update, resample, jit, spec)
            for update in (False, True)
            for resample in resample_flags
        }

    def _compile(self, update_stats: bool, resample: bool, jit: bool, spec):
        def call(packed, key):
            return self._step(packed, key, update_stats, resample)

        return tf.function(call, jit_compile=jit, autograph=False).get_concrete_function(*spec)

    def _step(self, packed: tf.Tensor, key: tf.Tensor, update_stats: bool, resample: bool) -> tf.Tensor:
        obs, prev_final = packed[0], packed[1]
        num_envs = obs.shape[0]
        stats = self.stats.read()
        if update_stats and self.normalize_obs:
            stats = normalization.update_moments(stats, obs)
            self.stats.assign(stats)
        norm_obs = network_input(stats, obs, self.normalize_obs)
        params = self.agent.actor(norm_obs)
        noise = tf.identity(self.noise)
        if resample:
            noise = self.agent.dist.new_noise(params, key, num_envs)
            self.noise.assign(noise)
        action = self.agent.dist.sample(params, key, noise)
        columns = [
            norm_obs,
            network_input(stats, prev_final, self.normalize_obs),
            tf.reshape(tf.cast(action, tf.float32), [num_envs, self.action_size]),
            tf.reshape(tf.cast(self.agent.dist.to_env(action), tf.float32), [num_envs, self.action_size]),
            self.agent.dist.log_prob(params, action)[:, None],
            self.agent.critic(norm_obs)[:, None],
        ]
        return tf.concat(columns, axis=1)

    def __call__(self, obs: np.ndarray, prev_final: np.ndarray, key: np.ndarray, t: int) -> dict:
        """Step t of a rollout, numpy in and out: normalized obs and previous final obs, action, env action,
        log-prob, value. Step 0 does not count `obs` in the statistics again; gSDE noise is redrawn on schedule."""
        resample = self.agent.dist.state_dependent and bool(resample_noise(t, self.sde_sample_freq))
        call = self._calls[(t > 0, resample)]
        out = call(tf.constant(np.stack([obs, prev_final])), tf.constant(key)).numpy()
        d, a = self.obs_dim, self.action_size
        parts = np.split(out, np.cumsum([d, d, a, a, 1]), axis=1)
        names = ("obs", "prev_final_obs", "action", "env_action", "log_prob", "value")
        result = dict(zip(names, parts))
        result["log_prob"], result["value"] = result["log_prob"][:, 0], result["value"][:, 0]
        return result


class FinishedRollout(NamedTuple):
    """What `finish_rollout` returns: the rollout and the statistics carried to the next one."""

    rollout: Rollout
    obs_stats: MeanStd
    return_stats: MeanStd
    discounted_return: tf.Tensor


def finish_rollout(
    critic: Critic,
    settings: RolloutSettings,
    traj: Trajectory,
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
        obs_stats = normalization.update_moments(obs_stats, last_obs)
    last_norm_final = network_input(obs_stats, last_final_obs, settings.normalize_obs)
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
    last_value = critic(network_input(obs_stats, last_obs, settings.normalize_obs))
    traj = traj._replace(reward=rewards, final_value=final_values)
    advantages, returns = compute_gae(
        rewards, traj.value, traj.terminated, traj.truncated, final_values, last_value, settings.gamma,
        settings.gae_lambda,
    )
    return FinishedRollout(Rollout(traj, advantages, returns), obs_stats, return_stats, discounted_return)


def _env_actions(action: np.ndarray, action_space) -> np.ndarray:
    return action.astype(action_space.dtype, copy=False)


class StepRecord(NamedTuple):
    """One vector step of the host rollout, as the per-step hook sees it (Stable-Baselines3's view of it is built
    only when asked for: `sb3_locals`)."""

    step: HostStep
    obs: Any  # the raw observations acted on
    actions: np.ndarray  # env units
    episode_return: np.ndarray  # float64 [B], running raw returns (the finished episode's where one ended)
    episode_length: np.ndarray  # int32 [B]
    elapsed_s: float  # since the env was first reset
    n_steps: int  # steps of this rollout before this one

    def info(self, i: int) -> dict[str, Any]:
        """Env i's info as SB3's VecEnv + Monitor give it (`kppo.envs.vector_info.sb3_info`)."""
        step = self.step
        episode = {"r": float(self.episode_return[i]), "l": int(self.episode_length[i]), "t": round(self.elapsed_s, 6)}
        ended = bool(step.terminated[i] or step.truncated[i])
        return sb3_info(step.infos, i, ended, bool(step.truncated[i]), step.final_obs[i], episode)

    def finished_episodes(self) -> list[dict[str, Any]]:
        """The `"episode"` entries (Monitor's {"r", "l", "t"}) of the envs whose episode ended at this step."""
        return [self.info(i)["episode"] for i in np.flatnonzero(self.step.terminated | self.step.truncated)]

    def sb3_locals(self) -> dict[str, Any]:
        """The step as SB3's `collect_rollouts` shows it to callbacks (`BaseCallback.locals`): `obs` (raw, acted on),
        `new_obs` (raw, after the step: the next episode's first observation where one ended), `actions` and
        `clipped_actions` (env units), `rewards` (raw), `dones` (terminated | truncated), `infos` (one dict per env,
        `info(i)`) and `n_steps`."""
        step = self.step
        return {"obs": self.obs, "new_obs": step.raw_obs, "actions": self.actions, "clipped_actions": self.actions,
                "rewards": step.reward, "dones": step.terminated | step.truncated,
                "infos": [self.info(i) for i in range(len(step.reward))], "n_steps": self.n_steps}


def collect_host_rollout(
    vec_env: Any,
    act_step: ActStep,
    finish_fn,
    num_steps: int,
    state: HostRolloutState,
    key: tf.Tensor,
    on_step: StepHook | None = None,
) -> tuple[HostRolloutState, Rollout]:
    """Steps `vec_env` (a `kppo.envs.gymnasium.GymVecEnv`) `num_steps` times, one compiled call per step.

    Args:
        act_step: the compiled per-step call; its statistics variables are set from `state` first.
        finish_fn: compiled `finish_rollout` bound to the critic and settings.
        on_step: called after every vector step with its `StepRecord`; False stops the rollout.

    Raises:
        RolloutStopped: `on_step` returned False (it holds the state after that step; no rollout is returned).
    """
    keys = tf.random.experimental.stateless_split(key, num_steps).numpy()
    num_envs, dim = state.obs.shape
    action_shape = (num_steps, num_envs) + tuple(act_step.agent.dist.action_shape)
    buf = {
        "obs": np.zeros((num_steps, num_envs, dim), np.float32),
        "final_obs": np.zeros((num_steps, num_envs, dim), np.float32),
        "action": np.zeros(action_shape, act_step.agent.dist.action_dtype.as_numpy_dtype),
        "log_prob": np.zeros((num_steps, num_envs), np.float32),
        "value": np.zeros((num_steps, num_envs), np.float32),
        "reward": np.zeros((num_steps, num_envs), np.float32),
        "terminated": np.zeros((num_steps, num_envs), bool),
        "truncated": np.zeros((num_steps, num_envs), bool),
        "episode_return": np.zeros((num_steps, num_envs), np.float32),
        "episode_length": np.zeros((num_steps, num_envs), np.int32),
    }
    act_step.stats.assign(state.obs_stats)
    obs, prev_final = state.obs, np.zeros_like(state.obs)
    raw_obs = state.raw_obs
    ep_return, ep_length = state.episode_return.copy(), state.episode_length.copy()
    space = vec_env.action_space
    for t in range(num_steps):
        out = act_step(obs, prev_final, keys[t], t)
        if t > 0:
            buf["final_obs"][t - 1] = out["prev_final_obs"]
        actions = out["env_action"].reshape((num_envs,) + space.shape).astype(space.dtype)
        step = vec_env.step(actions)
        done = step.terminated | step.truncated
        ep_return += step.reward
        ep_length += 1
        buf["obs"][t] = out["obs"]
        buf["action"][t] = out["action"].reshape(action_shape[1:])
        buf["log_prob"][t], buf["value"][t] = out["log_prob"], out["value"]
        buf["reward"][t], buf["terminated"][t], buf["truncated"][t] = step.reward, step.terminated, step.truncated
        buf["episode_return"][t] = np.where(done, ep_return, 0.0)
        buf["episode_length"][t] = np.where(done, ep_length, 0)
        if on_step is not None and not on_step(StepRecord(step, raw_obs, actions, ep_return, ep_length,
                                                           time.perf_counter() - state.clock_start, t)):
            ep_return[done], ep_length[done] = 0.0, 0
            obs_stats = act_step.stats.read()  # `obs` counted in the statistics, as the state promises
            if act_step.normalize_obs:
                obs_stats = normalization.update_moments(obs_stats, tf.constant(step.obs))
            raise RolloutStopped(state._replace(obs=step.obs, raw_obs=step.raw_obs, obs_stats=obs_stats,
                                                episode_return=ep_return, episode_length=ep_length))
        ep_return[done], ep_length[done] = 0.0, 0
        prev_final, obs, raw_obs = step.final_obs, step.obs, step.raw_obs
    traj = Trajectory(
        obs=tf.constant(buf["obs"]),
        action=tf.constant(buf["action"]),
        log_prob=tf.constant(buf["log_prob"]),
        value=tf.constant(buf["value"]),
        reward=tf.constant(buf["reward"]),
        terminated=tf.constant(buf["terminated"]),
        truncated=tf.constant(buf["truncated"]),
        final_value=tf.zeros([num_steps, num_envs]),
        episode_return=tf.constant(buf["episode_return"]),
        episode_length=tf.constant(buf["episode_length"]),
    )
    finished = finish_fn(
        traj, tf.constant(buf["final_obs"]), tf.constant(prev_final), tf.constant(obs), act_step.stats.read(),
        state.return_stats, state.discounted_return,
    )
    new_state = HostRolloutState(obs, finished.discounted_return, finished.obs_stats, finished.return_stats,
                                 ep_return, ep_length, raw_obs, state.clock_start)
    return new_state, finished.rollout


def evaluate_host(
    vec_env: Any, act_fn, obs_stats: MeanStd, seed: int, max_steps: int
) -> tuple[EvalResult, EvalTrajectory]:
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
    transitions = EvalTrajectory(*[tf.constant(np.stack(column)) for column in zip(*records)])
    result = EvalResult(tf.constant(returns, tf.float32), tf.constant(lengths), tf.constant(~active))
    return result, transitions
