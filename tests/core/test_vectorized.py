"""`kppo.core.vectorized`: the sorting network is `tf.argsort` (ties included, with and without XLA; the population's
shuffle under `tf.vectorized_map` is in tests/update/test_ppo.py), the clip is `tf.clip_by_global_norm` (bit for bit
under XLA)."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.vectorized import argsort_network, clip_by_global_norm


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
