"""The host rollout against a recorded Stable-Baselines3 rollout (`tests/fixtures/sb3`, made by
`record_sb3_rollout.py` with SB3 2.9.2): from SB3's initial weights and the same env transitions, kppo's normalized
observations, scaled rewards, values, advantages, returns and observation statistics equal what SB3's VecNormalize +
`collect_rollouts` + `compute_returns_and_advantage` computed, to float32 rounding (SB3 keeps its moments in float64,
kppo in float32); `pendulum_clipped` with VecNormalize's clip_obs=1, clip_reward=0.5 and epsilon=0.01, where both clips
bind."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.gym_envs.make import gym_vec_env
from kppo.rollout.gymnasium import HostRolloutState, collect_host_rollout
from kppo.rollout.finish import finish_rollout
from kppo.training.runners.settings import rollout_settings
from tests.helpers.sb3_reference import ENV_IDS, load, set_weights


class Replay(gym.Env):
    """Sub-env `index` of the recorded vector env: plays its transitions back whatever the action."""

    def __init__(self, data, index: int, spaces: gym.Env):
        self.data, self.index, self.t = data, index, 0
        self.observation_space, self.action_space = spaces.observation_space, spaces.action_space

    def reset(self, *, seed=None, options=None):
        return self.data["raw_obs"][self.t, self.index], {}  # after an episode end: the next episode's first obs

    def step(self, action):
        t, i, d = self.t, self.index, self.data
        self.t += 1
        done = d["terminated"][t, i] or d["truncated"][t, i]
        obs = d["terminal_obs"][t, i] if done else d["raw_obs"][t + 1, i]
        return obs, float(d["reward"][t, i]), bool(d["terminated"][t, i]), bool(d["truncated"][t, i]), {}


@pytest.mark.parametrize("task", ["pendulum", "cartpole", "pendulum_clipped"])
def test_the_host_rollout_computes_what_sb3_computes(task):
    data = load(task)
    rollouts, num_steps, num_envs = data["sb3_values"].shape
    config = kppo.Config(
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=num_envs * num_steps,
        gamma=float(data["gamma"]),
        gae_lambda=float(data["gae_lambda"]),
        normalize_obs=True,
        normalize_reward=True,
        clip_obs=float(data["clip_obs"]),
        clip_reward=float(data["clip_reward"]),
        norm_epsilon=float(data["epsilon"]),
    )
    spaces = gym.make(ENV_IDS[task])
    vector = gym.vector.SyncVectorEnv(
        [lambda i=i: Replay(data, i, spaces) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    vec_env = gym_vec_env(vector, num_envs)
    agent = make_agent(agent_spec(config), vec_env.flat_obs_dim, vec_env.action_space)
    set_weights(agent, data)
    settings = rollout_settings(config)
    finish = tf.function(lambda *a: finish_rollout(agent, settings, *a), jit_compile=True, autograph=False)
    obs = vec_env.reset(seed=0)
    state = HostRolloutState(
        obs,
        tf.zeros([num_envs]),
        normalization.update_moments_np(normalization.to_numpy(normalization.initial_stats([obs.shape[1]])), obs),
        normalization.initial_stats(()),
        np.zeros(num_envs),
        np.zeros(num_envs, np.int32),
    )
    close = dict(rtol=1e-5, atol=1e-5)
    for r in range(rollouts):
        state, rollout = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([r, 7]))
        traj, steps = rollout.trajectory, slice(r * num_steps, (r + 1) * num_steps)
        np.testing.assert_allclose(traj.obs.numpy(), data["sb3_obs"][r], **close)
        np.testing.assert_allclose(traj.reward.numpy(), data["scaled_reward"][steps], **close)
        np.testing.assert_allclose(traj.value.numpy(), data["sb3_values"][r], **close)
        np.testing.assert_allclose(rollout.advantages.numpy(), data["sb3_advantages"][r], **close)
        np.testing.assert_allclose(rollout.returns.numpy(), data["sb3_returns"][r], **close)
        np.testing.assert_allclose(state.obs_stats.mean, data["obs_rms_mean"][r], **close)
        np.testing.assert_allclose(state.obs_stats.var, data["obs_rms_var"][r], **close)
        assert float(state.obs_stats.count) == pytest.approx(data["obs_rms_count"][r], rel=1e-6)
        assert float(state.return_stats.var) == pytest.approx(data["ret_rms_var"][r], rel=1e-5)
        # SB3's actions under kppo's distribution: SB3's log-probabilities
        obs_flat = data["sb3_obs"][r].reshape(num_steps * num_envs, -1)
        actions = data["sb3_actions"][r].reshape((num_steps * num_envs, *agent.dist.action_shape))
        log_prob = agent.dist.log_prob(agent.actor(obs_flat), actions.astype(agent.dist.action_dtype.as_numpy_dtype))
        np.testing.assert_allclose(log_prob.numpy().reshape(num_steps, num_envs), data["sb3_log_probs"][r], **close)
