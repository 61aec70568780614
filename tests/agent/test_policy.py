"""`kppo.Policy`: SB3's `predict` on top of `get_action`, acting in numpy from a snapshot of the actor; the same
actions as the TensorFlow path (`get_action_flat`, `step_flat`), the RNG contract of stochastic actions."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo.core import normalization
from kppo._tf import tf
from kppo.agent.agent import make_agent, make_policy

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([1.0, 3.0], np.float32))
HEADS = {  # name: (action space, Config changes)
    "categorical": (gym.spaces.Discrete(5, start=-2), {}),
    "multi-categorical": (gym.spaces.MultiDiscrete([2, 3]), {}),
    "bernoulli": (gym.spaces.MultiBinary(3), {}),
    "gaussian": (BOX, {"log_std_init": -0.5}),
    "gaussian-squashed": (BOX, {"squash": True}),
    "gsde": (BOX, {"use_sde": True, "full_std": False}),
    "recurrent": (gym.spaces.Discrete(3), {"recurrent": "lstm", "lstm_hidden_size": 8}),
}


def _perturbed(agent):
    """Non-zero biases: every term of the forward pass is checked."""
    rng = np.random.default_rng(1)
    for variable in agent.actor.trainable_variables:
        variable.assign(variable + rng.normal(0, 0.3, variable.shape).astype(np.float32))
    return agent


def _policy(space=DISCRETE, normalize=False, masks=False, **changes):
    config = kppo.Config(num_hidden_units=8, normalize_obs=normalize, action_masks=masks, **changes)
    agent = _perturbed(make_agent(agent_spec(config), 4, space))
    stats = normalization.initial_stats([4])
    if normalize:
        obs = np.random.default_rng(3).normal(2, 3, (16, 4)).astype(np.float32)
        stats = normalization.update_moments_np(normalization.to_numpy(stats), obs)
    return make_policy(agent, stats, agent_spec(config), OBS, space)


def _obs(n=64, seed=0):
    return np.random.default_rng(seed).normal(0, 2, (n, 4)).astype(np.float32)


def _no_tensorflow(policy, monkeypatch):
    """Makes every compiled TensorFlow call of `policy` fail: what follows acts in numpy only."""

    def fail(*args, **kwargs):
        raise AssertionError("a TensorFlow call")

    for name in ("_compiled_get_action", "_compiled_step", "_compiled_actor"):
        monkeypatch.setattr(policy, name, fail)


def _tf_actions(policy, obs, starts=None, masks=None):
    """The TensorFlow path's deterministic actions (a recurrent policy: stepped through `obs` as a sequence)."""
    if policy.lstm is None:
        return policy.get_action_flat(obs, None, masks)
    h = c = np.zeros((1, policy.lstm.units), np.float32)
    actions = []
    for t, row in enumerate(obs):
        action, h, c, _ = policy.step_flat(row[None], h, c, starts[t : t + 1], None, None)
        actions.append(action[0])
    return np.stack(actions)


def _numpy_actions(policy, obs, starts=None):
    if policy.lstm is None:
        return policy.predict(obs, deterministic=True)[0]
    state, actions = None, []
    for t, row in enumerate(obs):
        action, state = policy.predict(row, state, starts[t : t + 1], deterministic=True)
        actions.append(action)
    return np.stack(actions)


@pytest.mark.parametrize("head", HEADS)
def test_deterministic_numpy_actions_are_the_tensorflow_actions(head, monkeypatch):
    space, changes = HEADS[head]
    policy = _policy(space, normalize=True, **changes)
    obs, starts = _obs(), np.arange(64) % 10 == 0  # a recurrent policy restarts its memory every 10 steps
    want = _tf_actions(policy, obs, starts)
    _no_tensorflow(policy, monkeypatch)
    got = _numpy_actions(policy, obs, starts)
    assert got.dtype == want.dtype and got.shape == want.shape
    if isinstance(space, gym.spaces.Box):  # float32 rounding of two matmul orders
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * float(np.max(space.high - space.low)))
    else:
        np.testing.assert_array_equal(got, want)


def test_a_policy_normalizes_with_its_configs_clip_and_epsilon_in_both_paths(monkeypatch):
    policy = _policy(BOX, normalize=True, clip_obs=0.3, norm_epsilon=0.5)
    assert policy.obs_scaling.clip == pytest.approx(0.3) and policy.obs_scaling.epsilon == pytest.approx(0.5)
    obs = _obs(seed=4) * 10
    scaled = policy.normalize(tf.constant(obs)).numpy()
    mean, var = policy.obs_scaling.mean, policy.obs_scaling.var
    np.testing.assert_allclose(scaled, np.clip((obs - mean) / np.sqrt(var + 0.5), -0.3, 0.3), rtol=1e-5, atol=1e-6)
    want = _tf_actions(policy, obs)
    _no_tensorflow(policy, monkeypatch)
    np.testing.assert_allclose(_numpy_actions(policy, obs), want, rtol=0, atol=1e-5)
    other = _policy(BOX, normalize=True)
    assert not np.allclose(_tf_actions(other, obs), want, atol=1e-3)  # the constants change the actions


def test_deterministic_predict_is_get_action_and_has_no_state():
    policy = _policy()
    obs = _obs(6)
    action, state = policy.predict(obs, deterministic=True)
    assert state is None
    np.testing.assert_array_equal(action, policy.get_action(obs))
    single, _ = policy.predict(obs[0], state=None, episode_start=np.array([True]), deterministic=True)
    assert single == action[0] and np.shape(single) == ()


def test_masked_actions_equal_the_tensorflow_path_and_respect_the_mask(monkeypatch):
    policy = _policy(gym.spaces.MultiDiscrete([3, 2]), masks=True)
    obs = _obs(200)
    masks = np.random.default_rng(5).random((200, 5)) < 0.6
    masks[:, 0] = masks[:, 3] = True  # at least one action per dimension
    want = policy.get_action_flat(obs, None, masks)
    _no_tensorflow(policy, monkeypatch)
    np.testing.assert_array_equal(policy.predict(obs, deterministic=True, action_masks=masks)[0], want)
    drawn = policy.predict(obs, action_masks=masks)[0]
    assert masks[np.arange(200), drawn[:, 0]].all() and masks[np.arange(200), 3 + drawn[:, 1]].all()


def test_stochastic_predict_draws_new_keys_and_repeats_from_a_fresh_policy():
    obs = np.zeros((256, 4), np.float32)
    first, second = _policy(), _policy()
    a1, a2 = first.predict(obs)[0], first.predict(obs)[0]
    assert not np.array_equal(a1, a2)  # the second call draws with another key
    np.testing.assert_array_equal(second.predict(obs)[0], a1)  # same seed, same first call
    assert set(np.unique(a1)) <= {0, 1, 2}


def test_the_rng_contract_keys_seeds_and_generators():
    """The n-th stochastic `predict` draws from default_rng([seed, n]); an int seed s is the key [s, 0]."""
    policy, obs = _policy(BOX), _obs(32)
    policy.seed = 7
    first = policy.predict(obs)[0]
    np.testing.assert_array_equal(first, policy.get_action(obs, rng=np.array([7, 1])))
    np.testing.assert_array_equal(first, policy.get_action(obs, rng=np.random.default_rng([7, 1])))
    np.testing.assert_array_equal(policy.get_action(obs, rng=3), policy.get_action(obs, rng=np.array([3, 0])))
    assert policy.predict_calls == 1
    with pytest.raises(ValueError, match=r"rng: expected an int seed or a key of shape \[2\]"):
        policy.get_action(obs, rng=np.zeros(3))


def test_numpy_draws_follow_the_tensorflow_distribution():
    """Same distribution, other random numbers: action frequencies over 6000 draws agree within 3%."""
    policy = _policy(gym.spaces.Discrete(4))
    obs = np.repeat(_obs(1), 6000, axis=0)
    numpy_counts = np.bincount(policy.get_action(obs, rng=1), minlength=4) / 6000
    tf_counts = np.bincount(policy.get_action_flat(obs, rng=1), minlength=4) / 6000
    np.testing.assert_allclose(numpy_counts, tf_counts, atol=0.03)


def test_the_snapshot_is_kept_until_refresh():
    policy, obs = _policy(BOX), _obs(8)
    before = policy.predict(obs, deterministic=True)[0]
    policy.actor.head.bias.assign(policy.actor.head.bias + 0.5)
    np.testing.assert_array_equal(policy.predict(obs, deterministic=True)[0], before)  # the snapshot
    moved = policy.get_action_flat(obs)  # TensorFlow reads the variables as they are
    policy.refresh()
    np.testing.assert_allclose(policy.predict(obs, deterministic=True)[0], moved, atol=1e-5)
    assert not np.allclose(moved, before)
