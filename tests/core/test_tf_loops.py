"""`kppo.core.tf_loops.scan` equals a Python loop, eagerly and under tf.function / XLA."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core import tf_loops as loops
from kppo.core.tf_loops import scan


def _body(carry, x):
    total, count = carry
    return (total + x, count + 1), {"running": total + x, "twice": 2.0 * x}


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_scan_equals_a_python_loop(mode):
    xs = tf.constant(np.random.default_rng(0).normal(size=(7, 3)), tf.float32)
    carry = (tf.zeros([3]), tf.constant(0))
    run = {
        "eager": scan,
        "function": tf.function(scan, autograph=False),
        "xla": tf.function(scan, jit_compile=True, autograph=False),
    }[mode]
    (total, count), ys = run(_body, carry, xs)
    want, running = np.zeros(3, np.float32), []
    for x in xs.numpy():
        want = want + x
        running.append(want)
    np.testing.assert_allclose(total.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(ys["running"].numpy(), running, rtol=1e-6)
    np.testing.assert_allclose(ys["twice"].numpy(), 2 * xs.numpy())
    assert int(count) == 7


def test_scan_over_indices_and_bad_lengths():
    _, ys = scan(lambda c, i: (c, i * i), tf.constant(0), length=4)
    np.testing.assert_array_equal(ys.numpy(), [0, 1, 4, 9])
    with pytest.raises(ValueError, match="expected a static number of steps >= 1, got 0"):
        scan(lambda c, i: (c, i), tf.constant(0), length=0)


@pytest.mark.parametrize("tied", [False, True])
def test_vectorizing_converts_a_scan_once_and_changes_no_value(pfor_conversions, tied):
    members = tf.constant([[1.0, -0.0, np.nan], [2.0, 3.0, -4.0]])

    def member(x):
        def body(carry, t):  # the carry starts from zeros shared by every member and becomes per-member
            carry = carry + x * t
            return carry, carry * 2.0

        if not tied:
            return loops.scan(body, -tf.zeros([3]), tf.range(4, dtype=tf.float32))
        with loops.vectorizing(x[0]):
            return loops.scan(body, -tf.zeros([3]), tf.range(4, dtype=tf.float32))

    carry, ys = tf.function(lambda xs: tf.vectorized_map(member, xs), autograph=False)(members)
    expected = [
        loops.scan(lambda c, t, x=x: (c + x * t, (c + x * t) * 2.0), -tf.zeros([3]), tf.range(4, dtype=tf.float32))
        for x in members
    ]
    np.testing.assert_array_equal(carry.numpy(), np.stack([e[0] for e in expected]))
    np.testing.assert_array_equal(ys.numpy(), np.stack([e[1] for e in expected]))
    assert len(pfor_conversions) == (
        2 if tied else 5
    )  # tied: the condition and the body once; untied: the body 3 times


def test_vectorizing_keeps_every_value_bit_for_bit_and_ends_with_its_block():
    values = (tf.constant([-0.0, np.nan, np.inf]), tf.constant([True, False]), tf.zeros([0, 3]))
    with loops.vectorizing(tf.constant(7)):
        counter, tied = loops.tie_to_members((tf.constant(0), values))
    assert int(counter) == 0
    for before, after in zip(values, tied):
        assert after.dtype == before.dtype and after.shape == before.shape
        np.testing.assert_array_equal(
            np.signbit(after.numpy()) if after.dtype == tf.float32 else after.numpy(),
            np.signbit(before.numpy()) if before.dtype == tf.float32 else before.numpy(),
        )
    assert np.isnan(tied[0].numpy()[1])
    assert loops._vectorized.anchor is None
