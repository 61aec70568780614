"""kppo.vec_envs.vec_transpose: VecTransposeImage against numpy's transpose of the same observations (stacked
frames, terminal observations, Dict image keys), its skip flag and its one-line refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from kppo.gym_envs.make import gym_vec_env as make_gym_vec_env
from kppo.vec_envs.vec_frame_stack import VecFrameStack
from kppo.vec_envs.vec_transpose import VecTransposeImage
from tests.vec_envs.test_vec_frame_stack import _counters


def test_transpose_image_gives_channels_first_observations_and_terminal_observations():
    space = gym.spaces.Box(0, 255, (6, 5, 1), np.uint8)
    transposed, stacked = VecTransposeImage(VecFrameStack(_counters(space), 3)), VecFrameStack(_counters(space), 3)
    assert transposed.observation_space == gym.spaces.Box(0, 255, (3, 6, 5), np.uint8)
    np.testing.assert_array_equal(transposed.reset(), stacked.reset().transpose(0, 3, 1, 2))
    ends = 0
    for _ in range(15):
        obs, _, dones, infos = transposed.step(np.zeros(2, np.int64))
        reference, _, _, reference_infos = stacked.step(np.zeros(2, np.int64))
        np.testing.assert_array_equal(obs, reference.transpose(0, 3, 1, 2))
        for i in np.flatnonzero(dones):
            ends += 1
            expected = reference_infos[i]["terminal_observation"].transpose(2, 0, 1)
            np.testing.assert_array_equal(infos[i]["terminal_observation"], expected)
    assert ends >= 4
    with make_gym_vec_env(VecTransposeImage(VecFrameStack(_counters(space), 3))) as gym_env:
        assert gym_env.observation_space.shape == (3, 6, 5)  # what kppo.PPO trains on


def test_transpose_image_of_a_dict_transposes_its_images_only():
    space = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (6, 5, 2), np.uint8), "vector": gym.spaces.Box(-1, 1, (3,), np.float32)}
    )
    transposed, plain = VecTransposeImage(_counters(space)), _counters(space)
    assert transposed.image_space_keys == ["image"] and transposed.observation_space["image"].shape == (2, 6, 5)
    obs, reference = transposed.reset(), plain.reset()
    np.testing.assert_array_equal(obs["image"], reference["image"].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(obs["vector"], reference["vector"])


def test_transpose_image_skip_and_refusals():
    space = gym.spaces.Box(0, 255, (6, 5, 1), np.uint8)
    skipped = VecTransposeImage(_counters(space), skip=True)
    assert skipped.observation_space.shape == (6, 5, 1) and skipped.transpose_observations(1) == 1
    with pytest.raises(ValueError, match=r"^observation_space: expected channels last \(HxWxC\) to transpose"):
        VecTransposeImage(_counters(gym.spaces.Box(0, 255, (1, 6, 5), np.uint8)))
    with pytest.raises(ValueError, match=r"^observation_space: expected an image or a Dict observation space"):
        VecTransposeImage(_counters(gym.spaces.Box(-1, 1, (4,), np.float32)))
