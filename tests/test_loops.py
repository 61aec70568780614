"""`kppo.loops.scan` equals a Python loop, eagerly and under tf.function / XLA."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.loops import scan


def _body(carry, x):
    total, count = carry
    return (total + x, count + 1), {"running": total + x, "twice": 2.0 * x}


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_scan_equals_a_python_loop(mode):
    xs = tf.constant(np.random.default_rng(0).normal(size=(7, 3)), tf.float32)
    carry = (tf.zeros([3]), tf.constant(0))
    run = {"eager": scan, "function": tf.function(scan, autograph=False),
           "xla": tf.function(scan, jit_compile=True, autograph=False)}[mode]
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
