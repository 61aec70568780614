"""Features extractors against SB3's definitions: NatureCNN's layers and initialization, one set of weights for the
HWC and CHW layouts, SB3's preprocessing (/255 of uint8 images only), CombinedExtractor's layout, and the one-line
errors for images the CNNs cannot read."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo._tf import tf
from kppo.agent.agent import make_agent
from kppo.agent.extractors import NatureCNN, Preprocessed, SmallCNN, any_cnn, extractor_factory
from kppo.core.errors import ArgumentError

ATARI = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)


def _images(shape, n=3, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def test_nature_cnn_has_sb3s_layers():
    tower = NatureCNN(ATARI)
    tower(tf.zeros([1, 84, 84, 4]))
    shapes = [tuple(v.shape) for v in tower.trainable_variables]
    # SB3: Conv2d(4, 32, 8, 4), Conv2d(32, 64, 4, 2), Conv2d(64, 64, 3, 1), Linear(3136, 512); Keras kernels HWIO
    assert shapes == [(8, 8, 4, 32), (32,), (4, 4, 32, 64), (64,), (3, 3, 64, 64), (64,), (3136, 512), (512,)]
    assert tower(tf.zeros([2, 84, 84, 4])).shape == (2, 512)


def test_orthogonal_init_has_gain_sqrt2_and_zero_biases_as_sb3():
    tower = NatureCNN(ATARI, seed=3)
    tower(tf.zeros([1, 84, 84, 4]))
    for layer in [*tower.convs, tower.linear]:
        kernel = layer.kernel.numpy().reshape(-1, layer.kernel.shape[-1])  # [fan_in, out], fan_in >= out here
        np.testing.assert_allclose(kernel.T @ kernel, 2.0 * np.eye(kernel.shape[1]), atol=1e-4)
        assert not layer.bias.numpy().any()


def test_torch_default_init_draws_kernels_and_biases_from_u_of_one_over_sqrt_fan_in():
    tower = SmallCNN(
        gym.spaces.Box(0, 1, (10, 10, 4), np.float32), kernel_init="torch_default", bias_init="torch_default"
    )
    tower(tf.zeros([1, 10, 10, 4]))
    conv = tower.convs[0]
    bound = 1.0 / np.sqrt(3 * 3 * 4)
    for values in (conv.kernel.numpy(), conv.bias.numpy()):
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound


def test_chw_images_read_with_the_same_weights_as_hwc():
    hwc = NatureCNN((40, 40, 3), seed=1)
    chw = NatureCNN((3, 40, 40), seed=1)
    images = _images((40, 40, 3)).astype(np.float32) / 255.0
    hwc(tf.constant(images))
    chw(tf.constant(images.transpose(0, 3, 1, 2)))
    chw.set_weights(hwc.get_weights())
    np.testing.assert_array_equal(hwc(tf.constant(images)).numpy(), chw(tf.constant(images.transpose(0, 3, 1, 2))))


def test_preprocessing_divides_uint8_images_by_255_and_reshapes_flat_rows():
    layer = extractor_factory("nature_cnn", ATARI, seed=2)()
    images = _images((84, 84, 4))
    flat = layer(tf.constant(images.reshape(3, -1))).numpy()
    direct = layer.extractor(tf.constant(images.astype(np.float32) / 255.0)).numpy()
    np.testing.assert_allclose(flat, direct, rtol=1e-6, atol=1e-6)
    raw = extractor_factory("nature_cnn", gym.spaces.Box(0, 1, (84, 84, 4), np.float32), normalize_images=False)()
    assert not raw.parts[0][2]  # float images are read as they are


def test_any_cnn_picks_small_cnn_under_36_pixels():
    assert isinstance(any_cnn((36, 36, 1)), NatureCNN)
    assert isinstance(any_cnn((35, 80, 1)), SmallCNN)
    assert isinstance(any_cnn((4, 10, 10)), SmallCNN)  # CHW


def test_combined_extractor_convolves_image_keys_and_flattens_the_rest_in_key_order():
    space = gym.spaces.Dict(image=gym.spaces.Box(0, 255, (12, 12, 2), np.uint8), state=gym.spaces.Box(-1, 1, (5,)))
    layer = extractor_factory("combined", space, dict(cnn_output_dim=7))()
    images, state = _images((12, 12, 2), 2), np.arange(10, dtype=np.float32).reshape(2, 5)
    flat = np.concatenate([images.reshape(2, -1), state], axis=1)  # kppo's flat rows: the Dict's key order
    out = layer(tf.constant(flat)).numpy()
    assert out.shape == (2, 7 + 5)
    np.testing.assert_array_equal(out[:, 7:], state)
    cnn = layer.extractor.cnns["image"]
    np.testing.assert_allclose(out[:, :7], cnn(tf.constant(images / 255.0, tf.float32)).numpy(), rtol=1e-6)


def test_an_mlp_on_images_reads_them_divided_by_255_as_sb3s_mlp_policy():
    config = kppo.Config(num_envs=2, num_steps=8)
    space = gym.spaces.Box(0, 255, (4, 4, 1), np.uint8)
    agent = make_agent(agent_spec(config), 16, gym.spaces.Discrete(2), observation_space=space)
    assert isinstance(agent.actor.extractor, Preprocessed) and agent.actor.extractor.parts[0][2]
    assert agent.actor.hidden[0].kernel.shape == (16, 64)


def test_a_config_names_the_extractor_so_a_saved_cnn_agent_is_rebuilt(tmp_path):
    from kppo.agent import checkpoint
    from kppo.training.agents import load_agent
    from kppo.core.normalization import initial_stats

    config = kppo.Config(num_envs=2, num_steps=8, features_extractor="cnn", actor_hidden_units=(), seed=5)
    space = gym.spaces.Box(0, 255, (12, 12, 3), np.uint8)
    agent = make_agent(agent_spec(config), 432, gym.spaces.Discrete(3), observation_space=space)
    stats = initial_stats([432])
    checkpoint.save(tmp_path, config.to_yaml(), agent, stats, initial_stats([]), space, gym.spaces.Discrete(3))
    loaded = load_agent(tmp_path)
    obs = tf.constant(_images((12, 12, 3)).reshape(3, -1))
    np.testing.assert_array_equal(agent.actor(obs).numpy(), loaded.agent.actor(obs).numpy())
    assert isinstance(loaded.agent.actor.extractor.extractor, SmallCNN)


@pytest.mark.parametrize(
    "name, space, message",
    [
        ("nature_cnn", gym.spaces.Box(0, 255, (10, 10, 4), np.uint8), "at least 36x36 pixels for NatureCNN"),
        ("cnn", gym.spaces.Box(0, 255, (84, 3, 84), np.uint8), "channels are its smallest dimension"),
        ("cnn", gym.spaces.Box(0, 1, (84, 84, 3), np.float32), "expected a uint8 image Box in \\[0, 255\\]"),
        ("small_cnn", gym.spaces.Box(-1, 1, (8,), np.float32), "expected an image Box \\(H, W, C\\)"),
        ("combined", ATARI, "expected a Dict observation space for 'combined'"),
        ("resnet", ATARI, "features_extractor: expected one of"),
    ],
)
def test_images_the_extractors_cannot_read_get_one_line_errors(name, space, message):
    with pytest.raises(ArgumentError, match=message) as err:
        extractor_factory(name, space)
    assert "\n" not in str(err.value)
