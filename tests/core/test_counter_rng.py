"""`kppo.core.counter_rng`: one key gives the same draws in TF kernels, under XLA, inside `tf.vectorized_map` and in
numpy (where TensorFlow's stateless ops do not), and the draws have the distributions they claim."""

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core import counter_rng
from tests.helpers.sampling import fits_cdf, fits_frequencies, gumbel_cdf, normal_cdf, uniform_cdf

KEY = tf.constant([3, -7], tf.int32)  # a negative word: where TensorFlow's own split differs under XLA


def _draws(key):
    return {
        "split": counter_rng.split(key, 3),
        "fold_in": counter_rng.fold_in(key, 5),
        "uniform": counter_rng.uniform(key, [4, 8]),
        "uniform64": counter_rng.uniform(key, [5], -1.0, 1.0, tf.float64),
        "uniform_dynamic": counter_rng.uniform(key, tf.shape(tf.zeros([3, 5]))),
        "uniform_int": counter_rng.uniform_int(key, [9], 0, 3),
        "uniform_int32": counter_rng.uniform_int(key, [9]),
        "scaled": counter_rng.uniform(key, [64], -0.05, 0.05),
        "normal": counter_rng.normal(key, [256]),
        "gumbel": counter_rng.gumbel(key, [256]),
    }


#: Draws cut from integer bits alone are exact everywhere; the rest apply float arithmetic that XLA may fuse
#: (multiply-add) or evaluate with its own log and cos: equal to float32 rounding.
EXACT = {"split", "fold_in", "uniform", "uniform64", "uniform_dynamic", "uniform_int", "uniform_int32"}


def test_every_draw_is_the_same_eagerly_in_a_graph_and_under_xla():
    eager = _draws(KEY)
    graph = tf.function(_draws, autograph=False)(KEY)
    xla = tf.function(_draws, jit_compile=True, autograph=False)(KEY)
    for name, value in eager.items():
        np.testing.assert_array_equal(graph[name].numpy(), value.numpy(), err_msg=name)
        if name in EXACT:
            np.testing.assert_array_equal(xla[name].numpy(), value.numpy(), err_msg=name)
        else:
            np.testing.assert_allclose(xla[name].numpy(), value.numpy(), rtol=1e-6, atol=2e-6, err_msg=name)


def test_tensorflows_own_stateless_ops_differ_under_xla_which_is_why_this_module_exists():
    def draw(key):
        return tf.random.stateless_uniform([16], seed=key), tf.random.experimental.stateless_split(key, 2)

    eager, xla = draw(KEY), tf.function(draw, jit_compile=True)(KEY)
    assert not np.array_equal(eager[0].numpy(), xla[0].numpy())
    assert not np.array_equal(eager[1].numpy(), xla[1].numpy())


def test_vectorized_map_over_per_member_keys_draws_each_members_numbers():
    keys = tf.stack([KEY, KEY + 1, KEY * 3])

    def members(keys):
        return tf.vectorized_map(lambda k: counter_rng.uniform(counter_rng.split(k, 2)[1], [4]), keys)

    one_by_one = np.stack([counter_rng.uniform(counter_rng.split(k, 2)[1], [4]).numpy() for k in tf.unstack(keys)])
    np.testing.assert_array_equal(members(keys).numpy(), one_by_one)
    np.testing.assert_array_equal(tf.function(members, jit_compile=True)(keys).numpy(), one_by_one)


def test_the_numpy_twin_gives_the_same_keys():
    np.testing.assert_array_equal(counter_rng.split_np([3, -7], 5), counter_rng.split(KEY, 5).numpy())


def test_keys_children_folds_and_draws_are_distinct_streams():
    children = counter_rng.split(KEY, 64).numpy()
    folds = np.stack([counter_rng.fold_in(KEY, i).numpy() for i in range(64)])
    words = np.concatenate([children, folds, [KEY.numpy()]])
    assert len({tuple(w) for w in words}) == len(words)
    assert not np.array_equal(counter_rng.uniform(KEY, [8]).numpy(), counter_rng.uniform(children[0], [8]).numpy())
    # the same key and count give the same numbers, and a longer stream starts with the shorter one
    np.testing.assert_array_equal(counter_rng.uniform(KEY, [8]).numpy(), counter_rng.uniform(KEY, [16]).numpy()[:8])


N = 200_000


@pytest.mark.parametrize(
    "name, draw, reference",
    [
        ("uniform", lambda: counter_rng.uniform(KEY, [N], -2.0, 3.0), uniform_cdf(-2.0, 3.0)),
        ("normal", lambda: counter_rng.normal(KEY, [N]), normal_cdf()),
        ("gumbel", lambda: counter_rng.gumbel(KEY, [N]), gumbel_cdf),
    ],
)
def test_continuous_draws_follow_their_distribution(name, draw, reference):
    assert fits_cdf(draw().numpy(), reference), name


def test_integer_draws_are_uniform_over_their_range():
    assert fits_frequencies(counter_rng.uniform_int(KEY, [N], 2, 9).numpy() - 2, np.full(7, 1 / 7))
    full = counter_rng.uniform_int(KEY, [N]).numpy()
    assert full.min() < -(2**30) and full.max() > 2**30  # the whole int32 range


def test_bad_integer_bounds_are_named_in_one_line():
    with pytest.raises(ValueError, match=r"^uniform_int: expected minval < maxval or both None, got 3, 3$"):
        counter_rng.uniform_int(KEY, [2], 3, 3)
