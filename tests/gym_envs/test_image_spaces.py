"""SB3's image-space rule (`kppo.gym_envs.spaces.is_image_space`), the one every image path reads."""

import numpy as np
import pytest
from gymnasium import spaces

from kppo.gym_envs.spaces import is_image_space


@pytest.mark.parametrize(
    "space, kwargs, want",
    [
        (spaces.Box(0, 255, (10, 10, 3), np.uint8), {}, True),
        (spaces.Box(0, 255, (3, 10, 10), np.uint8), {"check_channels": True}, True),  # channels first
        (spaces.Box(0, 255, (10, 10, 5), np.uint8), {}, True),  # SB3's CNNs take any channel count
        (spaces.Box(0, 255, (10, 10, 5), np.uint8), {"check_channels": True}, False),  # 1, 3 or 4 only
        (spaces.Box(0, 255, (10, 10, 3)), {}, False),  # float32
        (spaces.Box(0, 255, (10, 10), np.uint8), {}, False),  # 2-D
        (spaces.Box(0, 10, (10, 10, 3), np.uint8), {}, False),  # bounds
        (spaces.Box(0, 1, (10, 10, 3), np.float32), {"normalized_image": True}, True),  # already scaled
        (spaces.Box(0, 1, (10, 10), np.float32), {"normalized_image": True}, False),
        (spaces.Discrete(10), {}, False),
    ],
)
def test_is_image_space_is_sb3s_rule_with_its_keywords(space, kwargs, want):
    """SB3's `is_image_space(space, check_channels=False, normalized_image=False)`, its test_cnn.py's cases."""
    assert is_image_space(space, **kwargs) is want
