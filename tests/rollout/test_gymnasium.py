"""The host rollout (`kppo.rollout.gymnasium`): SB3's per-step locals and stopping a rollout from the step hook."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.gym_envs.make import gym_vec_env
from kppo.rollout.gymnasium import HostRolloutState, RolloutStopped, collect_host_rollout
from kppo.rollout.finish import finish_rollout
from kppo.training.runners.settings import rollout_settings


class Counter(gym.Env):
    """obs = [t]; reward t; truncated after 3 steps by TimeLimit."""

    observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"where": "reset"}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), float(self.t), False, False, {"t": self.t}


def _parts(normalize_obs=False):
    config = kppo.Config(
        num_envs=2, num_steps=4, total_timesteps=8, eval_freq=1, num_hidden_units=8, normalize_obs=normalize_obs
    )
    vec_env = gym_vec_env(lambda: gym.wrappers.TimeLimit(Counter(), 3), 2, seed=0)
    agent = make_agent(agent_spec(config), 1, vec_env.action_space)
    settings = rollout_settings(config)
    finish = lambda *a: finish_rollout(agent, settings, *a)  # noqa: E731
    obs = vec_env.reset(seed=0)
    stats = normalization.to_numpy(normalization.initial_stats([1]))
    if normalize_obs:
        stats = normalization.update_moments_np(stats, obs)
    state = HostRolloutState(
        obs,
        tf.zeros([2]),
        stats,
        normalization.initial_stats(()),
        np.zeros(2),
        np.zeros(2, np.int32),
        vec_env.reset_raw_obs,
        0.0,
    )
    return vec_env, (agent, settings), finish, state


def test_the_step_hook_sees_sb3_locals_with_monitor_episodes_and_terminal_observations():
    vec_env, parts, finish, state = _parts()
    seen = []
    collect_host_rollout(
        vec_env, *parts, finish, state, tf.constant([0, 1]), lambda record: seen.append(record.sb3_locals()) or True
    )
    assert [s["n_steps"] for s in seen] == [0, 1, 2, 3]
    np.testing.assert_array_equal(seen[0]["obs"], [[0.0], [0.0]])
    np.testing.assert_array_equal(seen[1]["obs"], seen[0]["new_obs"])
    np.testing.assert_array_equal(seen[2]["dones"], [True, True])  # TimeLimit ends both episodes at step 3
    info = seen[2]["infos"][0]
    # Monitor's episode: rewards 1 + 2 + 3 over 3 steps; the final obs [3], not the reset obs [0] in new_obs
    assert info["episode"]["r"] == 6.0 and info["episode"]["l"] == 3 and info["episode"]["t"] >= 0
    np.testing.assert_array_equal(info["terminal_observation"], [3.0])
    np.testing.assert_array_equal(seen[2]["new_obs"][0], [0.0])
    assert info["TimeLimit.truncated"] and info["t"] == 3  # the env's own entries are kept
    assert "episode" not in seen[1]["infos"][0] and seen[1]["infos"][0]["t"] == 2
    assert seen[0]["actions"].shape == (2,) and seen[0]["rewards"].dtype == np.float32


@pytest.mark.parametrize("normalize_obs", [False, True])
def test_a_false_from_the_step_hook_stops_at_once_with_the_state_at_that_step(normalize_obs):
    vec_env, parts, finish, state = _parts(normalize_obs)
    calls = []
    with pytest.raises(RolloutStopped) as stop:
        collect_host_rollout(
            vec_env,
            *parts,
            finish,
            state,
            tf.constant([0, 1]),
            lambda record: calls.append(record.n_steps) or len(calls) < 2,
        )
    assert calls == [0, 1]
    stopped = stop.value.state
    np.testing.assert_array_equal(stopped.obs, [[2.0], [2.0]])  # the obs after the second step
    np.testing.assert_array_equal(stopped.episode_length, [2, 2])
    # the state's obs is counted in its statistics: reset obs + 2 steps of 2 envs (+1e-4 pseudo-count)
    expected = 1e-4 + 2 + 4 if normalize_obs else 1e-4
    assert float(stopped.obs_stats.count) == pytest.approx(expected)


@pytest.mark.parametrize("jit_update", [False, True])
def test_the_first_minibatch_of_the_update_sees_a_probability_ratio_of_exactly_one(jit_update):
    """Actions are drawn in numpy, log-probabilities computed after the rollout by the networks the update uses."""
    from kppo.update.ppo import flatten, minibatch_indices

    config = kppo.Config(
        num_envs=4, num_steps=32, total_timesteps=128, num_minibatches=4, normalize_obs=True, normalize_reward=True
    )
    vec_env = gym_vec_env("Pendulum-v1", 4, seed=0)
    agent = make_agent(agent_spec(config), vec_env.flat_obs_dim, vec_env.action_space)
    settings = rollout_settings(config)
    finish = tf.function(lambda *a: finish_rollout(agent, settings, *a), jit_compile=True, autograph=False)
    obs = vec_env.reset(seed=0)
    state = HostRolloutState(
        obs,
        tf.zeros([4]),
        normalization.update_moments_np(normalization.to_numpy(normalization.initial_stats([3])), obs),
        normalization.initial_stats(()),
        np.zeros(4),
        np.zeros(4, np.int32),
    )
    _, rollout = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([3, 4]))
    batch = flatten(rollout)
    rows = minibatch_indices(tf.constant([5, 6]), 128, 1, 4)[0]

    @tf.function(autograph=False, jit_compile=jit_update)
    def log_ratio(obs, action, old_log_prob):  # as `kppo.update.ppo.minibatch_loss` computes it, in a graph
        return agent.dist.log_prob(agent.actor(obs), action) - old_log_prob

    got = log_ratio(tf.gather(batch.obs, rows), tf.gather(batch.action, rows), tf.gather(batch.log_prob, rows))
    np.testing.assert_array_equal(np.exp(got.numpy()), 1.0)


@pytest.mark.parametrize("source", ["method", "info"])
def test_a_masked_rollout_stores_the_env_masks_acts_only_within_them_and_the_update_sees_ratio_one(source):
    """Masks are read for each observation acted on (across auto-resets), never violated, kept in the rollout, and
    the update's masked log-probabilities equal those of the rollout: the masked action's log-prob is never used."""
    import functools

    from kppo.gym_envs.action_masks import MaskReader
    from kppo.update.ppo import flatten, minibatch_loss, UpdateSettings
    from tests.helpers.masked_envs import MaskedChoiceEnv

    config = kppo.Config(
        num_envs=3, num_steps=40, total_timesteps=120, num_minibatches=1, num_hidden_units=8, action_masks=True
    )
    vec_env = gym_vec_env(functools.partial(MaskedChoiceEnv, source=source, length=7), 3, seed=0)
    agent = make_agent(agent_spec(config), vec_env.flat_obs_dim, vec_env.action_space)
    settings = rollout_settings(config)
    reader = MaskReader(vec_env.vec_env, vec_env.action_space)
    seen = []  # the masks of the sub-envs when each step's observations were returned
    obs = vec_env.reset(seed=0)
    state = HostRolloutState(
        obs,
        tf.zeros([3]),
        normalization.to_numpy(normalization.initial_stats([6])),
        normalization.initial_stats(()),
        np.zeros(3),
        np.zeros(3, np.int32),
        action_mask=reader.reset(vec_env.reset_infos),
    )
    masks_now = lambda: np.stack([e.unwrapped._mask for e in vec_env.vec_env.envs])  # noqa: E731
    seen.append(masks_now())
    finish = lambda *a: finish_rollout(agent, settings, *a)  # noqa: E731
    _, rollout = collect_host_rollout(
        vec_env,
        agent,
        settings,
        finish,
        state,
        tf.constant([1, 2]),
        lambda record: seen.append(masks_now()) or True,
        reader,
    )
    traj = rollout.trajectory
    np.testing.assert_array_equal(traj.action_mask.numpy(), np.stack(seen[:40]))
    assert traj.truncated.numpy().any()  # auto-resets happened inside the rollout
    assert np.take_along_axis(traj.action_mask.numpy(), traj.action.numpy()[..., None], axis=2).all()
    assert sum(e.unwrapped.invalid_actions for e in vec_env.vec_env.envs) == 0
    batch = flatten(rollout)
    upd = UpdateSettings(1, 1, 0.2, None, "max", 0.0, 0.5, 0.5, True, None)
    _, info = minibatch_loss(agent, upd, batch)
    assert float(info.approx_kl) == 0.0 and float(info.clip_fraction) == 0.0
    unmasked = agent.dist.log_prob(agent.actor(batch.obs), batch.action).numpy()
    masked = agent.dist.log_prob(agent.dist.masked(agent.actor(batch.obs), batch.action_mask), batch.action).numpy()
    np.testing.assert_allclose(masked, batch.log_prob.numpy(), rtol=1e-6, atol=1e-6)
    assert (unmasked < masked - 1e-3).all()  # the stored log-probs are not the unmasked ones


def test_a_cnn_agents_rollout_gives_the_update_tensorflows_log_probs_and_values_from_its_acting_pass():
    from tests.helpers.image_envs import BrightHalfEnv

    config = kppo.Config(
        num_envs=2,
        num_steps=24,
        total_timesteps=48,
        features_extractor="cnn",
        actor_hidden_units=[],
        critic_hidden_units=[],
    )
    vec_env = gym_vec_env(BrightHalfEnv, 2, seed=0)
    space = BrightHalfEnv().observation_space
    agent = make_agent(agent_spec(config), 144, vec_env.action_space, observation_space=space)
    settings = rollout_settings(config)
    obs = vec_env.reset(seed=0)
    stats = normalization.to_numpy(normalization.initial_stats([144]))
    state = HostRolloutState(
        obs, tf.zeros([2]), stats, normalization.initial_stats(()), np.zeros(2), np.zeros(2, np.int32), None, 0.0
    )
    finals = {}

    def remember_finals(record):
        for i in np.flatnonzero(record.step.truncated):
            finals[(record.n_steps, int(i))] = record.step.final_obs[i]
        return True

    finish = lambda *a: finish_rollout(agent, settings, *a)  # noqa: E731
    _, rollout = collect_host_rollout(vec_env, agent, settings, finish, state, tf.constant([3, 4]), remember_finals)
    traj = rollout.trajectory
    assert traj.obs.dtype == tf.uint8 and sorted(finals) == [(19, 0), (19, 1)]  # both envs truncate at step 20
    flat_obs = tf.reshape(traj.obs, [48, 144])
    log_prob = agent.dist.log_prob(agent.actor(flat_obs), tf.reshape(traj.action, [48]))
    np.testing.assert_allclose(traj.log_prob.numpy().reshape(-1), log_prob.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(traj.value.numpy().reshape(-1), agent.critic(flat_obs).numpy(), rtol=1e-5, atol=1e-6)
    final_values = agent.critic(tf.constant(np.stack([finals[(19, 0)], finals[(19, 1)]]).reshape(2, 144))).numpy()
    np.testing.assert_allclose(traj.final_value.numpy()[19], final_values, rtol=1e-5, atol=1e-6)
    assert not np.delete(traj.final_value.numpy(), 19, axis=0).any()  # read only where truncated: zeros elsewhere
