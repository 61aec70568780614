import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.gae import compute_gae


def _gae(variant, rewards, values, terminated, truncated, final_values, last_value, gamma, lam):
    fn = variant(lambda *a: compute_gae(*a, gamma, lam))
    args = [
        tf.constant(rewards, tf.float32),
        tf.constant(values, tf.float32),
        tf.constant(terminated, tf.bool),
        tf.constant(truncated, tf.bool),
        tf.constant(final_values, tf.float32),
        tf.constant(last_value, tf.float32),
    ]
    adv, ret = fn(*args)
    return adv.numpy(), ret.numpy()


def _column(x):
    return np.asarray(x, np.float64)[:, None]  # [T] -> [T, B=1]


# STYLE.md §8.1: 3 steps, gamma = lambda = 0.5, rewards [1, 0, 2], values [1, 1, 1], bootstrap value 2.
REWARDS, VALUES, LAST = [1, 0, 2], [1, 1, 1], [2.0]


def test_no_episode_end(variant):
    # deltas: 1 + .5*1 - 1 = .5; 0 + .5*1 - 1 = -.5; 2 + .5*2 - 1 = 2
    # A2 = 2; A1 = -.5 + .25*2 = 0; A0 = .5 + .25*0 = .5; returns = A + 1
    adv, ret = _gae(
        variant,
        _column(REWARDS),
        _column(VALUES),
        _column([0, 0, 0]),
        _column([0, 0, 0]),
        _column([9, 9, 9]),
        LAST,
        0.5,
        0.5,
    )
    np.testing.assert_allclose(adv[:, 0], [0.5, 0.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [1.5, 1.0, 3.0], atol=1e-6)


def test_terminated_cuts_bootstrap_and_trace(variant):
    # terminated at step 1: delta1 = 0 - 1 = -1 (no future), A1 = -1; A0 = .5 + .25*(-1) = .25
    adv, _ = _gae(
        variant,
        _column(REWARDS),
        _column(VALUES),
        _column([0, 1, 0]),
        _column([0, 0, 0]),
        _column([9, 9, 9]),
        LAST,
        0.5,
        0.5,
    )
    np.testing.assert_allclose(adv[:, 0], [0.25, -1.0, 2.0], atol=1e-6)


def test_truncated_bootstraps_from_final_observation(variant):
    # truncated at step 2 with V(final obs) = 4 (the reset obs' value 2 is ignored): delta2 = 2 + .5*4 - 1 = 3
    # A1 = -.5 + .25*3 = .25; A0 = .5 + .25*.25 = .5625
    adv, _ = _gae(
        variant,
        _column(REWARDS),
        _column(VALUES),
        _column([0, 0, 0]),
        _column([0, 0, 1]),
        _column([9, 9, 4]),
        LAST,
        0.5,
        0.5,
    )
    np.testing.assert_allclose(adv[:, 0], [0.5625, 0.25, 3.0], atol=1e-6)


def _naive_gae(rewards, values, terminated, truncated, final_values, last_value, gamma, lam):
    T, B = rewards.shape
    adv = np.zeros((T, B))
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if terminated[t, b]:
                next_value, running = 0.0, 0.0
            elif truncated[t, b]:
                next_value, running = final_values[t, b], 0.0
            else:
                next_value = values[t + 1, b] if t + 1 < T else last_value[b]
            delta = rewards[t, b] + gamma * next_value - values[t, b]
            running = delta + gamma * lam * running
            adv[t, b] = running
    return adv, adv + values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_naive_loop(variant, seed):
    rng = np.random.default_rng(seed)
    T, B = 37, 5
    rewards, values, final_values = (rng.normal(size=(T, B)) for _ in range(3))
    terminated = rng.random((T, B)) < 0.1
    truncated = (rng.random((T, B)) < 0.1) & ~terminated
    last_value = rng.normal(size=B)
    adv, ret = _gae(variant, rewards, values, terminated, truncated, final_values, last_value, 0.97, 0.9)
    want_adv, want_ret = _naive_gae(rewards, values, terminated, truncated, final_values, last_value, 0.97, 0.9)
    np.testing.assert_allclose(adv, want_adv, atol=1e-5)
    np.testing.assert_allclose(ret, want_ret, atol=1e-5)
