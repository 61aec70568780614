import numpy as np
import pytest

from kppo.core import losses
from kppo._tf import tf


def t(x):
    return tf.constant(x, tf.float32)


def test_ratio_one_gives_minus_mean_advantage(variant):
    adv = t([1.0, -2.0, 3.0, 0.5])
    logp = t([-0.3, -1.2, -0.7, -2.0])
    loss = variant(lambda a, b, c: losses.policy_loss(a, b, c, 0.2))(logp, logp, adv)
    assert loss.numpy() == pytest.approx(-np.mean([1.0, -2.0, 3.0, 0.5]), abs=1e-6)


@pytest.mark.parametrize(
    "ratio, advantage, clipped",
    [
        (1.1, 1.0, False),  # inside [0.8, 1.2]
        (1.3, 1.0, True),  # above 1 + eps with A > 0: clipped, no gradient
        (1.3, -1.0, False),  # above with A < 0: the unclipped (smaller) term is kept
        (0.7, -1.0, True),  # below 1 - eps with A < 0: clipped
        (0.7, 1.0, False),  # below with A > 0: unclipped kept
    ],
)
def test_clipping_is_active_exactly_outside_the_trust_region(ratio, advantage, clipped):
    old = t([0.0])
    logp = tf.Variable([np.log(ratio)], dtype=tf.float32)
    with tf.GradientTape() as tape:
        loss = losses.policy_loss(logp, old, t([advantage]), 0.2)
    grad = tape.gradient(loss, logp).numpy()[0]
    bound = min(max(ratio, 0.8), 1.2)
    expected = -min(ratio * advantage, bound * advantage)
    assert loss.numpy() == pytest.approx(expected, rel=1e-5)
    # d(-r A)/d logp = -r A when unclipped, 0 when the clipped term is selected
    assert grad == pytest.approx(0.0 if clipped else -ratio * advantage, abs=1e-5)


def test_value_loss_plain_and_clipped():
    values, old, returns = t([2.0, 0.0]), t([1.0, 1.0]), t([3.0, -1.0])
    # plain: ((3-2)^2 + (-1-0)^2) / 2 = 1
    assert losses.value_loss(values, old, returns, None).numpy() == pytest.approx(1.0)
    # clip 0.5: predictions 1 + clip(1, .5) = 1.5 and 1 + clip(-1, .5) = 0.5 -> errors 1.5 and 1.5
    # SB3 ("clipped"): (1.5^2 + 1.5^2) / 2 = 2.25; "max": (max(1, 2.25) + max(1, 2.25)) / 2 = 2.25
    assert losses.value_loss(values, old, returns, 0.5, "clipped").numpy() == pytest.approx(2.25)
    assert losses.value_loss(values, old, returns, 0.5, "max").numpy() == pytest.approx(2.25)


def test_value_clip_modes_differ_when_the_clipped_prediction_is_closer():
    # v = 3 moved past the return 2.5 from old 2; clip 0.2 -> v_clip = 2.2
    # "clipped": (2.5 - 2.2)^2 = 0.09, no gradient; "max": max(0.25, 0.09) = 0.25, gradient 2 * (3 - 2.5) = 1
    values = tf.Variable([3.0])
    for mode, want_loss, want_grad in [("clipped", 0.09, 0.0), ("max", 0.25, 1.0)]:
        with tf.GradientTape() as tape:
            loss = losses.value_loss(values, t([2.0]), t([2.5]), 0.2, mode)
        assert loss.numpy() == pytest.approx(want_loss, rel=1e-5)
        assert tape.gradient(loss, values).numpy()[0] == pytest.approx(want_grad, abs=1e-6)


def test_entropy_bonus_lowers_the_loss():
    args = dict(clip_range=0.2, clip_range_vf=None, vf_coef=0.5)
    z = t([0.0, 0.0])
    low, _ = losses.ppo_loss(z, t([0.1, 0.1]), z, z, z, z, z, ent_coef=0.1, **args)
    high, info = losses.ppo_loss(z, t([1.0, 1.0]), z, z, z, z, z, ent_coef=0.1, **args)
    assert high.numpy() == pytest.approx(low.numpy() - 0.1 * 0.9)
    assert info.entropy.numpy() == pytest.approx(1.0)


def test_ppo_loss_combines_terms():
    logp, old = t([np.log(1.5), 0.0]), t([0.0, 0.0])
    adv, values, old_values, returns, entropy = (
        t([1.0, -1.0]),
        t([1.0, 2.0]),
        t([1.0, 2.0]),
        t([2.0, 2.0]),
        t([0.5, 0.7]),
    )
    total, info = losses.ppo_loss(
        logp,
        entropy,
        values,
        old,
        old_values,
        adv,
        returns,
        clip_range=0.2,
        clip_range_vf=None,
        ent_coef=0.01,
        vf_coef=0.5,
    )
    # policy: -mean(min(1.5, 1.2) * 1, min(1 * -1, 1 * -1)) = -(1.2 - 1) / 2 = -0.1; value: (1 + 0) / 2 = 0.5
    assert info.policy_loss.numpy() == pytest.approx(-0.1, abs=1e-6)
    assert info.value_loss.numpy() == pytest.approx(0.5)
    assert total.numpy() == pytest.approx(-0.1 + 0.5 * 0.5 - 0.01 * 0.6, abs=1e-6)
    assert info.clip_fraction.numpy() == pytest.approx(0.5)


def test_approx_kl_and_explained_variance():
    old = t([0.0, 0.0])
    assert losses.approx_kl(old, old).numpy() == 0.0
    logp = t([0.1, -0.1])
    want = np.mean([np.exp(0.1) - 1 - 0.1, np.exp(-0.1) - 1 + 0.1])
    assert losses.approx_kl(logp, old).numpy() == pytest.approx(want, rel=1e-5)
    returns = t([1.0, 2.0, 3.0])
    assert losses.explained_variance(returns, returns).numpy() == pytest.approx(1.0)
    assert losses.explained_variance(t([2.0, 2.0, 2.0]), returns).numpy() == pytest.approx(0.0)
    assert np.isnan(losses.explained_variance(returns, t([1.0, 1.0, 1.0])).numpy())


def test_normalize_advantages():
    out = losses.normalize_advantages(t([1.0, 2.0, 3.0, 6.0])).numpy()
    assert out.mean() == pytest.approx(0.0, abs=1e-6)
    assert out.std() == pytest.approx(1.0, abs=1e-6)
