"""kppo.PPO("CnnPolicy" | "MultiInputPolicy") as SB3 users write it: a tiny image task learns in seconds, images stay
uint8 in the rollout, the same seed gives the same weights, saved models (with kppo's or a user's Keras extractor)
load back and act the same."""

import gymnasium as gym
import keras
import numpy as np
import pytest

import kppo
from kppo.agent.extractors import NatureCNN, SmallCNN
from kppo.core.errors import ArgumentTypeError
from tests.helpers.image_envs import BrightHalfDictEnv, BrightHalfEnv

SETTINGS = dict(n_steps=64, batch_size=64, n_epochs=4, learning_rate=1e-3, seed=0)


def _weights(model) -> list:
    return [v.numpy() for v in model.agent.variables]


def test_a_cnn_policy_learns_a_tiny_image_task_in_seconds():
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(BrightHalfEnv, n_envs=4, seed=0), **SETTINGS)
    assert isinstance(model.agent.actor.extractor.extractor, SmallCNN)  # 12x12: under NatureCNN's 36 pixels
    assert model.agent.actor.extractor is model.agent.critic.extractor  # SB3's share_features_extractor=True
    assert model.agent.actor.hidden == [] and model.agent.critic.hidden == []  # CnnPolicy: net_arch=[]
    model.learn(6_000)
    assert model.rollout_buffer.observations.dtype == np.uint8  # the rollout kept the image bytes
    mean, _ = kppo.evaluate_policy(model, model.get_env(), n_eval_episodes=8)
    assert mean >= 18.0  # of 20; a random policy gets 10


def test_the_same_seed_gives_the_same_weights_and_chw_images_train_too():
    def run(layout):
        env = kppo.make_vec_env(BrightHalfEnv, n_envs=2, seed=1, env_kwargs=dict(layout=layout, size=36))
        model = kppo.PPO("CnnPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=3)
        model.learn(32)
        return model

    first, second, chw = run("hwc"), run("hwc"), run("chw")
    assert isinstance(first.agent.actor.extractor.extractor, NatureCNN)
    assert all(np.array_equal(a, b) for a, b in zip(_weights(first), _weights(second)))
    assert chw.agent.actor.extractor.extractor.channels_first


def test_multi_input_policy_convolves_the_image_and_reads_the_vector():
    model = kppo.PPO("MultiInputPolicy", kppo.make_vec_env(BrightHalfDictEnv, n_envs=2, seed=0), **SETTINGS)
    extractor = model.agent.actor.extractor.extractor
    assert list(extractor.cnns) == ["image"] and model.agent.actor.hidden[0].kernel.shape == (
        256 + 3,
        64,
    )  # SB3: cnn_output_dim=256
    model.learn(128)
    obs = model.get_env().reset()
    assert model.predict(obs, deterministic=True)[0].shape == (2,)


class TinyCNN(keras.layers.Layer):
    """A user's extractor as SB3 users write theirs: `__init__(observation_space, features_dim)`."""

    def __init__(self, observation_space, features_dim=8):
        super().__init__()
        self.conv = keras.layers.Conv2D(4, 3, activation="relu")
        self.dense = keras.layers.Dense(features_dim, activation="relu")

    def call(self, images):
        x = self.conv(images)
        return self.dense(keras.ops.reshape(x, (keras.ops.shape(x)[0], -1)))


def test_saved_cnn_models_load_back_and_a_users_extractor_comes_back_through_custom_objects(tmp_path):
    kppo_cnn = kppo.PPO("CnnPolicy", kppo.make_vec_env(BrightHalfEnv, n_envs=2, seed=0), **SETTINGS)
    kwargs = dict(features_extractor_class=TinyCNN, features_extractor_kwargs=dict(features_dim=6))
    mine = kppo.PPO("CnnPolicy", kppo.make_vec_env(BrightHalfEnv, n_envs=2, seed=0), policy_kwargs=kwargs, **SETTINGS)
    assert mine.agent.actor.head.kernel.shape == (6, 2)
    obs = kppo_cnn.get_env().reset()
    for name, model in (("kppo", kppo_cnn), ("mine", mine)):
        model.learn(64)
        model.save(tmp_path / name)
    loaded = kppo.PPO.load(tmp_path / "kppo.zip")
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], kppo_cnn.predict(obs, True)[0])
    with pytest.raises(ArgumentTypeError, match=r"custom_objects: expected \{'features_extractor_class': TinyCNN\}"):
        kppo.PPO.load(tmp_path / "mine.zip")
    back = kppo.PPO.load(tmp_path / "mine.zip", custom_objects={"features_extractor_class": TinyCNN})
    assert all(np.array_equal(a, b) for a, b in zip(_weights(back), _weights(mine)))


def test_cnn_policy_under_vec_normalize_needs_normalize_images_false_as_in_sb3():
    """SB3's test_image_like_input: VecNormalize(norm_obs=True) makes the images float32, and NatureCNN asserts
    unless normalize_images=False."""
    env = kppo.VecNormalize(kppo.make_vec_env(BrightHalfEnv, n_envs=1))
    assert env.observation_space.dtype == np.float32
    with pytest.raises(AssertionError, match=r"^You should use NatureCNN only with images not with Box\(-10\.0, 10\.0"):
        kppo.PPO("CnnPolicy", env)
    kppo.PPO("CnnPolicy", env, n_steps=16, batch_size=16, policy_kwargs=dict(normalize_images=False)).learn(16)


def test_a_float_image_needs_normalize_images_false_as_in_sb3():
    class FloatImages(BrightHalfEnv):
        def __init__(self):
            super().__init__(size=12)
            self.observation_space = gym.spaces.Box(0, 1, (12, 12, 1), np.float32)

        def image(self):
            return super().image().astype(np.float32) / 255.0

    with pytest.raises(AssertionError, match=r"expected a uint8 image Box in \[0, 255\] .*normalize_images=False"):
        kppo.PPO("CnnPolicy", kppo.make_vec_env(FloatImages, n_envs=1))
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(FloatImages, n_envs=1), policy_kwargs=dict(normalize_images=False))
    assert not model.agent.actor.extractor.parts[0][2]
