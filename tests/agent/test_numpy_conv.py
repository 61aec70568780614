"""The convolutional towers in numpy (`kppo.agent.numpy_conv`) against the Keras towers they copy: SmallCNN and
NatureCNN, float and uint8 images, HWC and CHW layouts; which batches act in numpy; and a host rollout of a CNN agent
whose acting features give the update exactly the log-probabilities and values TensorFlow computes."""

import itertools

import gymnasium as gym
import numpy as np
import pytest

from kppo._tf import tf
from kppo.agent.extractors import ConvTower, Preprocessed, extractor_factory
from kppo.agent.numpy_actor import frozen_extractor
from kppo.agent.numpy_conv import NUMPY_MAX_MACS, acting_extractor, numpy_tower, one_blas_thread, tower_macs

MINATAR = gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32)
ATARI = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
CHW = gym.spaces.Box(0, 255, (3, 40, 40), np.uint8)


def _layer(name: str, space, normalize: bool = True) -> Preprocessed:
    layer = extractor_factory(name, space, normalize_images=normalize, seed=4)()
    layer(tf.zeros([1, int(np.prod(space.shape))], tf.float32))  # builds it
    return layer


def _flat_obs(space, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if space.dtype == np.uint8:
        return rng.integers(0, 256, (n, int(np.prod(space.shape))), dtype=np.uint8)
    return (rng.random((n, int(np.prod(space.shape)))) < 0.3).astype(np.float32)


@pytest.mark.parametrize(
    "name, space, normalize",
    [("small_cnn", MINATAR, False), ("nature_cnn", ATARI, True), ("nature_cnn", CHW, True)],
    ids=["small-float-hwc", "nature-uint8-hwc", "nature-uint8-chw"],
)
def test_the_numpy_tower_equals_the_keras_tower(name, space, normalize):
    layer = _layer(name, space, normalize)
    obs = _flat_obs(space, 5)
    expected = layer(tf.constant(obs)).numpy()
    forward = numpy_tower(layer)
    assert forward is not None
    with one_blas_thread():
        got = forward(obs)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert np.abs(got).max() > 0  # the comparison saw live features, not ReLU's zeros


def test_the_numpy_tower_equals_a_direct_convolution_with_strides_chw_and_uint8():
    """im2col against a loop over output pixels: two convolutions (3x3 stride 2, 2x2 stride 1), a CHW uint8 input
    divided by 255, then the Dense layer."""
    rng = np.random.default_rng(0)
    space = gym.spaces.Box(0, 255, (2, 9, 9), np.uint8)  # CHW: 9 -> 4 (3x3, stride 2) -> 3 (2x2)
    tower = ConvTower(space.shape, ((4, 3, 2), (3, 2, 1)), 5, "test")
    layer = Preprocessed(tower, space, True)
    layer(tf.zeros([1, 162], tf.uint8))
    convs = [
        (rng.normal(size=(3, 3, 2, 4)), rng.normal(size=4), 2),
        (rng.normal(size=(2, 2, 4, 3)), rng.normal(size=3), 1),
    ]
    linear = (rng.normal(size=(3 * 3 * 3, 5)), rng.normal(size=5))
    for conv, (kernel, bias, _) in zip(tower.convs, convs):
        conv.set_weights([kernel, bias])
    tower.linear.set_weights(list(linear))
    obs = rng.integers(0, 256, (3, 162), dtype=np.uint8)
    x = obs.reshape(3, 2, 9, 9).transpose(0, 2, 3, 1) / 255.0
    for kernel, bias, stride in convs:
        k = kernel.shape[0]
        size = (x.shape[1] - k) // stride + 1
        out = np.zeros((x.shape[0], size, size, kernel.shape[3]))
        for i, j in itertools.product(range(size), range(size)):
            patch = x[:, i * stride : i * stride + k, j * stride : j * stride + k, :]
            out[:, i, j] = np.einsum("bhwc,hwco->bo", patch, kernel) + bias
        x = np.maximum(out, 0.0)
    expected = np.maximum(x.reshape(3, -1) @ linear[0] + linear[1], 0.0)
    np.testing.assert_allclose(numpy_tower(layer)(obs), expected, rtol=1e-4, atol=1e-4)


def test_the_macs_count_is_the_towers_arithmetic():
    # SmallCNN on 10x10x4: 8x8 outputs x 3x3x4 taps x 16 filters, then 1,024 -> 128
    assert tower_macs(_layer("small_cnn", MINATAR, False).extractor) == 8 * 8 * 36 * 16 + 1024 * 128
    # NatureCNN on 84x84x4: 20x20x(8x8x4)x32 + 9x9x(4x4x32)x64 + 7x7x(3x3x64)x64 + 3136x512
    nature = 20 * 20 * 256 * 32 + 9 * 9 * 512 * 64 + 7 * 7 * 576 * 64 + 3136 * 512
    assert tower_macs(_layer("nature_cnn", ATARI).extractor) == nature


def test_small_batches_act_in_numpy_and_large_ones_through_the_compiled_call():
    layer = _layer("small_cnn", MINATAR, False)
    calls = []

    def compiled(obs):
        calls.append(len(obs))
        return layer(tf.constant(obs)).numpy()

    act, in_numpy = acting_extractor(layer, compiled)
    largest = NUMPY_MAX_MACS // tower_macs(layer.extractor)
    assert in_numpy and 32 <= largest < 64  # MinAtar's usual 8-32 envs in numpy, 64 envs compiled
    act(_flat_obs(MINATAR, 8))
    act(_flat_obs(MINATAR, largest))
    assert calls == []
    act(_flat_obs(MINATAR, largest + 1))
    assert calls == [largest + 1]


def test_nature_cnn_and_dict_extractors_always_use_the_compiled_call():
    compiled = lambda obs: obs  # noqa: E731
    assert acting_extractor(_layer("nature_cnn", ATARI), compiled) == (compiled, False)  # 9.4M MACs a frame
    space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (12, 12, 1), np.uint8), "v": gym.spaces.Box(-1, 1, (2,))})
    combined = extractor_factory("combined", space)()
    assert numpy_tower(combined) is None
    assert acting_extractor(combined, compiled) == (compiled, False)


def test_the_frozen_compiled_extractor_equals_the_layer_at_its_snapshot_for_every_batch_shape():
    layer = _layer("nature_cnn", CHW)
    frozen = frozen_extractor(layer)
    compiled = tf.function(layer, autograph=False)
    for n in (8, 1, 8, 3):  # a shape seen before reuses its concrete function
        obs = _flat_obs(CHW, n, seed=n)
        got = frozen(obs)
        assert got.dtype == np.float32 and got.shape == (n, 512)
        np.testing.assert_allclose(got, layer(tf.constant(obs)).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got, compiled(tf.constant(obs)).numpy())  # the layer compiled: the same bits
    obs = _flat_obs(CHW, 8)
    before = frozen(obs)
    for variable in layer.trainable_variables:  # training after the snapshot
        variable.assign(variable * 1.5)
    np.testing.assert_array_equal(frozen(obs), before)
    assert not np.array_equal(frozen_extractor(layer)(obs), before)  # a new snapshot reads the new weights
