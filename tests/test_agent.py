"""The agent bundle (`kppo.agent`): construction from a Config, its policy, and loading a saved agent."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import checkpoint, normalization
from kppo._tf import tf
from kppo.agent import load_agent, make_agent, make_policy

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(-2, 2, (2,), np.float32)


def test_make_agent_is_a_function_of_the_config_seed():
    config = kppo.Config(num_hidden_units=8, seed=3)
    a, b, c = make_agent(config, 3, ACT), make_agent(config, 3, ACT), make_agent(config.replace(seed=4), 3, ACT)
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.variables, b.variables))
    assert not all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.variables, c.variables))
    assert len(a.variables) == len(a.actor.trainable_variables) + len(a.critic.trainable_variables)
    assert a.optimizer.built and float(a.optimizer.learning_rate.numpy()) == pytest.approx(config.learning_rate)


def test_a_saved_agent_loads_with_its_statistics_and_acts_the_same(tmp_path):
    config = kppo.Config(num_hidden_units=8, normalize_obs=True)
    agent = make_agent(config, 3, ACT)
    stats = normalization.update_moments(normalization.initial_stats([3]), tf.constant([[1.0, 2.0, 3.0], [0, 0, 1.0]]))
    checkpoint.save(tmp_path / "agent", config, agent, stats, normalization.initial_stats(()), OBS, ACT)
    saved = load_agent(tmp_path / "agent")
    assert saved.config == config and saved.observation_space == OBS and saved.action_space == ACT
    np.testing.assert_allclose(saved.obs_stats.mean.numpy(), stats.mean.numpy())
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    want = make_policy(agent, stats, True, OBS, ACT).get_action(obs)
    np.testing.assert_array_equal(saved.policy.get_action(obs), want)


def test_loading_something_else_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="expected a kppo agent directory"):
        load_agent(tmp_path)
