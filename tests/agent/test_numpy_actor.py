"""Acting in numpy (`kppo.agent.numpy_actor`): the numpy actor computes what the Keras actor computes, for every
activation and every kind of head, and its snapshot does not follow later training."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.core import normalization
from kppo.agent.agent import make_agent, make_policy
from kppo.config.options import ACTIVATIONS
from kppo.agent.numpy_actor import actor_params, key_rng, make_numpy_actor, snapshot

BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32))
HEADS = {  # name: (action space, Config changes)
    "categorical": (gym.spaces.Discrete(3), {}),
    "multi-categorical": (gym.spaces.MultiDiscrete([2, 3]), {}),
    "bernoulli": (gym.spaces.MultiBinary(3), {}),
    "gaussian": (BOX, {"log_std_init": -0.5}),
    "gaussian-std-head": (BOX, {"state_independent_std": False}),
    "gsde": (BOX, {"use_sde": True, "full_std": False}),
}


def _agent(space, activation="tanh", **changes):
    config = kppo.Config(num_hidden_units=16, activation=activation, kernel_init="glorot_uniform", **changes)
    agent = make_agent(agent_spec(config), 5, space)
    for variable in agent.actor.trainable_variables:  # non-zero biases and log-stds, so every term is checked
        variable.assign(variable + np.random.default_rng(1).normal(0, 0.3, variable.shape).astype(np.float32))
    return agent


def _params_close(host, keras_params):
    host, keras_params = (x if isinstance(x, tuple) else (x,) for x in (host, keras_params))
    assert len(host) == len(keras_params)
    for got, want in zip(host, keras_params):
        want = np.asarray(want)
        np.testing.assert_allclose(np.broadcast_to(got, want.shape), want, rtol=1e-5, atol=2e-6)


FORWARD_CASES = {
    **{f"{a}-gaussian": (a, BOX, {}) for a in ACTIVATIONS},
    **{f"tanh-{head}": ("tanh", *HEADS[head]) for head in HEADS},
}


@pytest.mark.parametrize("case", FORWARD_CASES)
def test_the_numpy_forward_pass_equals_the_keras_actor_for_every_activation_and_head(case):
    activation, space, changes = FORWARD_CASES[case]
    agent = _agent(space, activation, **changes)
    obs = np.random.default_rng(0).normal(0, 2, (32, 5)).astype(np.float32)
    _params_close(actor_params(snapshot(agent.actor), obs), agent.actor(obs))


@pytest.mark.parametrize("head", HEADS)
def test_deterministic_actions_equal_the_policy_with_normalization(head):
    space, changes = HEADS[head]
    agent = _agent(space, **changes)
    obs = np.random.default_rng(2).normal(3, 2, (16, 5)).astype(np.float32)
    stats = normalization.update_moments_np(normalization.to_numpy(normalization.initial_stats([5])), obs[:8])
    policy = make_policy(
        agent,
        stats,
        agent_spec(kppo.Config(normalize_obs=True)),
        gym.spaces.Box(-np.inf, np.inf, (5,), np.float32),
        space,
    )
    want = policy.predict(obs, deterministic=True)[0]
    got, _ = make_numpy_actor(agent.actor, agent.dist, True).deterministic_env_action(stats, obs)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def test_a_snapshot_does_not_follow_later_training():
    agent = _agent(gym.spaces.Discrete(3))
    weights = snapshot(agent.actor)
    before = weights.head[0].copy()
    agent.actor.head.kernel.assign(agent.actor.head.kernel + 1.0)
    np.testing.assert_array_equal(weights.head[0], before)


def test_keys_give_the_host_rollouts_generator():
    """`key_rng` (what `Policy` samples with) and the host rollout's `rollout_rng` turn a key into the same draws."""
    from kppo.rollout.gymnasium import rollout_rng

    for key in ([0, 1], [-3, 2**31 - 1]):
        np.testing.assert_array_equal(key_rng(np.array(key, np.int32)).random(4), rollout_rng(key).random(4))
    np.testing.assert_array_equal(key_rng(5).random(2), key_rng([5, 0]).random(2))


@pytest.mark.parametrize("head", ["categorical", "gaussian"])
def test_env_action_draws_with_the_generator_and_is_the_mode_without_one(head):
    space, changes = HEADS[head]
    agent = _agent(space, **changes)
    actor, obs = make_numpy_actor(agent.actor, agent.dist, False), np.zeros((4, 5), np.float32)
    stats = normalization.to_numpy(normalization.initial_stats([5]))
    drawn = [actor.env_action(stats, obs, rng=np.random.default_rng(9))[0] for _ in range(2)]
    np.testing.assert_array_equal(drawn[0], drawn[1])
    mode, _ = actor.deterministic_env_action(stats, obs)
    np.testing.assert_array_equal(actor.env_action(stats, obs)[0], mode)
