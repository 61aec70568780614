"""`Rebound`: a function traced on one set of variables, called on another, computes what its own trace computes."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.rebinding import Rebound, rebinding_supported


def test_the_pinned_tensorflow_supports_rebinding():
    assert rebinding_supported()


def _step_on(variables):
    """A traced step that reads and assigns `variables` (a weight and a counter), as an update does."""
    weight, count = variables

    @tf.function(autograph=False)
    def step(x, n):
        def body(i, total):
            weight.assign(weight * 0.5 + x)
            count.assign_add(1)
            return i + 1, total + tf.reduce_sum(weight)

        return tf.while_loop(lambda i, _: i < n, body, (tf.constant(0), tf.constant(0.0)))[1]

    return step


def _variables(start):
    return [tf.Variable(np.full([3], start, np.float32)), tf.Variable(0, dtype=tf.int64)]


def test_a_rebound_call_computes_what_a_trace_on_the_new_variables_computes_and_leaves_the_owners_alone():
    owner, mine, reference = _variables(1.0), _variables(7.0), _variables(7.0)
    traced = _step_on(owner)
    traced(tf.constant([0.0, 1.0, 2.0]), tf.constant(1))  # traced and run on the owner's variables
    owned = [v.numpy() for v in owner]
    rebound = Rebound(traced, owner, mine, lambda: _step_on(mine))
    x = tf.constant([0.25, -1.0, 3.0])
    assert rebound(x, tf.constant(3)).numpy() == _step_on(reference)(x, tf.constant(3)).numpy()
    for got, want in zip(mine, reference):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in zip(owner, owned):
        np.testing.assert_array_equal(got.numpy(), want)
    assert traced.experimental_get_tracing_count() == 1  # the call reused the owner's trace


def test_a_capture_outside_the_owner_falls_back_to_a_function_traced_on_the_new_variables():
    owner, mine, other = _variables(1.0), _variables(2.0), tf.Variable(5.0)
    traced = tf.function(lambda x: owner[0] * x + other, autograph=False)
    traced(tf.constant(1.0))
    made = []

    def fallback():
        made.append(tf.function(lambda x: mine[0] * x + other, autograph=False))
        return made[-1]

    rebound = Rebound(traced, owner, mine, fallback)  # `other` is not the owner's: the program cannot be rebound
    np.testing.assert_array_equal(rebound(tf.constant(2.0)).numpy(), [9.0, 9.0, 9.0])
    np.testing.assert_array_equal(rebound(tf.constant(1.0)).numpy(), [7.0, 7.0, 7.0])
    assert len(made) == 1  # made once, then kept


def test_variables_of_other_shapes_are_refused_in_one_line():
    owner = _variables(1.0)
    other = [tf.Variable(np.zeros([4], np.float32)), tf.Variable(0, dtype=tf.int64)]
    assert not Rebound.fits(owner, other) and not Rebound.fits(owner, owner[:1]) and Rebound.fits(owner, owner)
    with pytest.raises(ValueError, match=r"^variables: expected 2 of the shapes and dtypes") as err:
        Rebound(_step_on(owner), owner, other, lambda: _step_on(other))
    assert "\n" not in str(err.value)
