"""The agent bundle (`kppo.agent.agent`): construction from a Config, its policy, and loading a saved agent."""

import shutil
from pathlib import Path

import gymnasium as gym
import keras
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.agent import checkpoint
from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import make_agent, make_policy
from kppo.training.agents import load_agent
from kppo.config.options import Config
from kppo.core.optimizers import OptimizerSpec, make_optimizer

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)
ACT = gym.spaces.Box(-2, 2, (2,), np.float32)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_make_agent_is_a_function_of_the_config_seed():
    config = kppo.Config(num_hidden_units=8, seed=3)
    a, b, c = (
        make_agent(agent_spec(config), 3, ACT),
        make_agent(agent_spec(config), 3, ACT),
        make_agent(agent_spec(config.replace(seed=4)), 3, ACT),
    )
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.variables, b.variables))
    assert not all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.variables, c.variables))
    assert len(a.variables) == len(a.actor.trainable_variables) + len(a.critic.trainable_variables)
    assert a.optimizer.built and float(a.optimizer.learning_rate.numpy()) == pytest.approx(config.learning_rate)


def test_a_saved_agent_loads_with_its_statistics_and_acts_the_same(tmp_path):
    config = kppo.Config(num_hidden_units=8, normalize_obs=True)
    agent = make_agent(agent_spec(config), 3, ACT)
    stats = normalization.update_moments(normalization.initial_stats([3]), tf.constant([[1.0, 2.0, 3.0], [0, 0, 1.0]]))
    checkpoint.save(tmp_path / "agent", config.to_yaml(), agent, stats, normalization.initial_stats(()), OBS, ACT)
    saved = load_agent(tmp_path / "agent")
    assert saved.config == config and saved.observation_space == OBS and saved.action_space == ACT
    np.testing.assert_allclose(saved.obs_stats.mean.numpy(), stats.mean.numpy())
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    want = make_policy(agent, stats, agent_spec(config), OBS, ACT).get_action(obs)
    np.testing.assert_array_equal(saved.policy.get_action(obs), want)


def test_loading_something_else_is_a_one_line_error(tmp_path):
    with pytest.raises(ValueError, match="expected a kppo agent directory"):
        load_agent(tmp_path)


def test_a_recurrent_agent_saved_with_one_bias_per_lstm_cell_loads_and_acts_as_it_did(tmp_path):
    """tests/fixtures/legacy: a RecurrentPPO saved by kppo before its two-bias LSTM cells (record_one_bias_recurrent.py,
    run with that kppo) loads, acts exactly as it did then, keeps Adam's moments and steps, and trains on."""
    legacy = FIXTURES / "legacy"
    recorded = np.load(legacy / "one_bias_recurrent.npz")
    model = kppo.RecurrentPPO.load(legacy / "one_bias_recurrent")
    state = None
    for step, obs in enumerate(recorded["obs"]):
        action, state = model.predict(obs, state=state, deterministic=True)
        np.testing.assert_array_equal(action, recorded["actions"][step])
        np.testing.assert_allclose(state[0][0], recorded["h"][step], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(state[1][0], recorded["c"][step], rtol=1e-6, atol=1e-7)
    agent, optimizer = model.agent, model.agent.optimizer
    old_names = [str(name) for name in recorded["names"]]
    for variable in agent.variables:
        index = optimizer._get_variable_index(variable)
        moments = optimizer._momentums[index].numpy(), optimizer._velocities[index].numpy()
        if variable.path.endswith("recurrent_bias"):  # torch's second bias starts at zero, its moments too
            assert not np.any(variable.numpy()) and not np.any(moments[0]) and not np.any(moments[1])
            continue
        k = old_names.index(variable.path.replace("input_bias", "bias"))
        np.testing.assert_array_equal(moments[0], recorded[f"m{k}"])
        np.testing.assert_array_equal(moments[1], recorded[f"v{k}"])
    assert int(optimizer.iterations.numpy()) == int(recorded["steps"])
    model.set_env(gym.make("CartPole-v1"))
    model.learn(32)  # trains on as a two-bias agent
    assert int(optimizer.iterations.numpy()) > int(recorded["steps"])
    model.save(tmp_path / "again")
    np.testing.assert_array_equal(
        kppo.RecurrentPPO.load(tmp_path / "again").predict(recorded["obs"][0], deterministic=True)[0],
        model.predict(recorded["obs"][0], deterministic=True)[0],
    )


def test_a_recurrent_agent_that_fits_neither_cell_layout_gets_the_usual_one_line_error(tmp_path):
    agent_dir = tmp_path / "agent"
    shutil.copytree(FIXTURES / "legacy" / "one_bias_recurrent", agent_dir)
    config = kppo.Config.from_yaml(agent_dir / "config.yaml")
    config.replace(lstm_hidden_size=16).to_yaml(agent_dir / "config.yaml")
    with pytest.raises(
        ValueError,
        match=r"^weights: could not restore .* into this network \(Received incompatible "
        r"tensor with shape \(8, 8\)",
    ):
        load_agent(agent_dir)


# --- SB3's network options: empty heads, features extractors, torch's optimizers (kppo.sb3.arguments) ---


class _Features(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(5, activation="relu")

    def call(self, obs):
        return self.dense(obs)


def test_an_empty_actor_head_reads_the_observations():
    config = Config(actor_hidden_units=(), critic_hidden_units=(8,), num_envs=2, num_steps=8)
    agent = make_agent(agent_spec(config), 4, gym.spaces.Box(-1, 1, (2,), np.float32))
    assert sorted(tuple(v.shape) for v in agent.actor.trainable_variables) == [(2,), (2,), (4, 2)]
    assert agent.critic(tf.zeros([3, 4])).shape == (3,)


@pytest.mark.parametrize("share, weights", [(True, 2 + 4 + 4), (False, 2 + 4 + 2 + 4)])
def test_a_features_extractor_is_shared_or_one_per_network(share, weights):
    config = Config(num_hidden_layers=1, num_hidden_units=8, num_envs=2, num_steps=8)
    agent = make_agent(
        agent_spec(config), 4, gym.spaces.Discrete(3), features_extractor=_Features, share_features_extractor=share
    )
    assert (agent.actor.extractor is agent.critic.extractor) == share
    assert len(agent.variables) == weights  # a shared extractor's kernel and bias count once
    assert agent.actor(tf.zeros([2, 4])).shape == (2, 3)


@pytest.mark.parametrize("name", ["rmsprop", "rmsprop_tf", "sgd"])
def test_the_configured_optimizer_is_built_with_its_slots(name):
    config = Config(optimizer=name, optimizer_momentum=0.9, num_envs=2, num_steps=8, adam_style="torch")
    agent = make_agent(agent_spec(config), 4, gym.spaces.Discrete(2))
    assert type(agent.optimizer).__name__ == ("TorchSGD" if name == "sgd" else "TorchRMSprop")
    assert agent.optimizer.momentum == 0.9 and getattr(agent.optimizer, "tf_like", False) == (name == "rmsprop_tf")


def test_rmsprop_tf_like_first_step():
    # v0 = 1, alpha = 0.99, eps = 1e-5, g = 0.1: v1 = 0.99 + 0.01 * 0.01 = 0.9901; step = lr g / sqrt(v1 + eps)
    variable = keras.Variable(np.zeros(1, np.float32))
    optimizer = make_optimizer("torch", 0.5, OptimizerSpec("rmsprop_tf", eps=1e-5, alpha=0.99))
    optimizer.build([variable])
    optimizer.apply_gradients([(np.array([0.1], np.float32), variable)])
    np.testing.assert_allclose(variable.numpy(), [-0.5 * 0.1 / np.sqrt(0.9901 + 1e-5)], rtol=1e-6)
