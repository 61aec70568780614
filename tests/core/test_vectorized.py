"""`kppo.core.vectorized`: the sorting network is `tf.argsort` (ties included, with and without XLA; the population's
shuffle under `tf.vectorized_map` is in tests/update/test_ppo.py), the clip is `tf.clip_by_global_norm` (bit for bit
under XLA)."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.vectorized import argsort_network, clip_by_global_norm, narrow_matmul


@pytest.mark.parametrize("shape", [(3, 1000), (2, 5, 7), (4, 2048), (1, 2), (1,)])
def test_the_sorting_network_gives_tf_argsorts_permutations_ties_included(shape):
    values = tf.constant(np.random.default_rng(0).integers(0, 5, size=shape).astype(np.float32) / 8)  # many ties
    expected = tf.argsort(values, axis=-1).numpy()
    for jit in (False, True):
        np.testing.assert_array_equal(tf.function(argsort_network, jit_compile=jit)(values).numpy(), expected)


def test_clip_by_global_norm_is_tfs():
    rng = np.random.default_rng(1)
    grads = [tf.constant(rng.normal(size=shape), tf.float32) for shape in [(4, 64), (64,), (64, 64), (64, 2)]]
    for clip_norm in (0.5, 1e3):
        for jit in (False, True):
            mine = tf.function(lambda g: clip_by_global_norm(g, clip_norm), jit_compile=jit)(grads)  # noqa: B023
            theirs = tf.function(lambda g: tf.clip_by_global_norm(g, clip_norm), jit_compile=jit)(grads)  # noqa: B023
            if jit:  # XLA lowers L2Loss to the same sum: bit for bit
                for a, b in zip(tf.nest.flatten(mine), tf.nest.flatten(theirs)):
                    np.testing.assert_array_equal(a.numpy(), b.numpy())
            else:  # TF's L2Loss kernel sums in another order
                for a, b in zip(tf.nest.flatten(mine), tf.nest.flatten(theirs)):
                    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    infinite = [tf.constant([np.inf, 1.0])]
    assert np.isnan(clip_by_global_norm(infinite, 0.5)[0][0]).all()  # as TF's: an infinite norm gives NaN
    assert np.isnan(tf.clip_by_global_norm(infinite, 0.5)[0][0]).all()


@pytest.mark.parametrize("columns", [1, 2, 6])
def test_the_narrow_matmul_is_a_matmul_and_its_gradients_are_the_matmuls(columns):
    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=(3, 512, 64)), tf.float32)  # 3 members' minibatches
    kernel = tf.constant(rng.normal(size=(3, 64, columns)), tf.float32)
    dy = tf.constant(rng.normal(size=(3, 512, columns)), tf.float32)

    def product_and_grads(matmul):
        def member(elems):
            x_, kernel_ = elems
            with tf.GradientTape() as tape:
                tape.watch([x_, kernel_])
                y = matmul(x_, kernel_)
            return (y, *tape.gradient(y, [x_, kernel_], output_gradients=dy[0]))

        return tf.vectorized_map(member, (x, kernel))

    for jit in (False, True):
        mine = tf.function(lambda: product_and_grads(narrow_matmul), jit_compile=jit)()
        theirs = tf.function(lambda: product_and_grads(tf.matmul), jit_compile=jit)()
        np.testing.assert_array_equal(mine[0].numpy(), theirs[0].numpy())  # the same product
        for a, b in zip(mine[1:], theirs[1:]):  # the gradients: summed in another order
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-4)
