"""`kppo.Policy`: SB3's `predict` on top of `get_action`."""

import gymnasium as gym
import numpy as np

import kppo
from kppo.core import normalization
from kppo.agent.agent import make_agent, make_policy

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)


DISCRETE = gym.spaces.Discrete(3)


def _policy(space=DISCRETE):
    agent = make_agent(kppo.Config(num_hidden_units=8), 4, space)
    return make_policy(agent, normalization.initial_stats([4]), False, OBS, space)


def test_deterministic_predict_is_get_action_and_has_no_state():
    policy = _policy()
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    action, state = policy.predict(obs, deterministic=True)
    assert state is None
    np.testing.assert_array_equal(action, policy.get_action(obs))
    single, _ = policy.predict(obs[0], state=None, episode_start=np.array([True]), deterministic=True)
    assert single == action[0]


def test_stochastic_predict_draws_new_keys_and_repeats_from_a_fresh_policy():
    obs = np.zeros((256, 4), np.float32)
    first, second = _policy(), _policy()
    a1, a2 = first.predict(obs)[0], first.predict(obs)[0]
    assert not np.array_equal(a1, a2)  # the second call draws with another key
    np.testing.assert_array_equal(second.predict(obs)[0], a1)  # same seed, same first call
    assert set(np.unique(a1)) <= {0, 1, 2}
