"""Small image tasks for fast tests: a CNN policy learns them in seconds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class BrightHalfEnv(gym.Env):
    """A uint8 image, one half bright (255) and the other dark, the bright side redrawn every step; reward 1 when the
    action names the bright half (0: left, 1: right). 20 steps an episode, truncated. `layout` "hwc" or "chw"."""

    def __init__(self, size: int = 12, channels: int = 1, layout: str = "hwc"):
        shape = (size, size, channels) if layout == "hwc" else (channels, size, size)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.size, self.channels, self.layout, self.side, self.t = size, channels, layout, 0, 0

    def image(self) -> np.ndarray:
        img = np.zeros((self.size, self.size, self.channels), np.uint8)
        half = self.size // 2
        if self.side:
            img[:, half:] = 255
        else:
            img[:, :half] = 255
        return img if self.layout == "hwc" else img.transpose(2, 0, 1)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self.image(), {}

    def step(self, action):
        reward = float(int(action) == self.side)
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self.image(), reward, False, self.t >= 20, {}


class BrightHalfDictEnv(BrightHalfEnv):
    """`BrightHalfEnv` as a Dict: the image and a constant vector (a MultiInputPolicy task)."""

    def __init__(self, size: int = 12):
        super().__init__(size)
        image = self.observation_space
        self.observation_space = gym.spaces.Dict(image=image, state=gym.spaces.Box(-1, 1, (3,), np.float32))

    def image(self):
        return {"image": super().image(), "state": np.full(3, 0.5, np.float32)}
