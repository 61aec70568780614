"""What the CNN parity tests share: `tests/fixtures/sb3/cnn.npz` (made by `record_sb3_cnn.py` under SB3), the env it
was recorded on, and SB3's NatureCNN / CnnPolicy weights (torch names and layouts) put into kppo's layers.

Torch -> Keras: a Conv2d weight [out, in, kh, kw] is a Conv2D kernel [kh, kw, in, out]; a Linear weight [out, in]
is a Dense kernel [in, out]. NatureCNN's Linear reads the last feature map flattened in torch's CHW order, kppo's in
HWC order (TensorFlow's convolutions are NHWC), so its rows are permuted: Keras row h * W * C + w * C + c is torch
column c * H * W + h * W + w. The fixture's 36x44 images leave a 64x1x2 map, so the order matters there."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np

from tests.helpers.sb3_reference import load

#: The recorded images (HWC) and SB3's view of them (CHW, `VecTransposeImage`).
SHAPE_HWC = (36, 44, 3)
SHAPE_CHW = (3, 36, 44)
#: NatureCNN's convolutions (kernel, stride), as torch's `cnn.0`, `cnn.2`, `cnn.4`.
CONVS = ((8, 4), (4, 2), (3, 1))


def cnn_data() -> dict[str, np.ndarray]:
    """The arrays of `tests/fixtures/sb3/cnn.npz`."""
    return load("cnn")


class BlockImageEnv(gym.Env):
    """`record_sb3_cnn.py`'s env (a copy: the recorder does not import the tests): random images of 4x4 blocks from
    the env's own seeded RNG, Box(0, 255, (36, 44, 3), uint8), Discrete(3); reward 1 when the action is the brightest
    channel; terminates when pixel (0, 0, 0) < 16, truncates after 20 steps."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, SHAPE_HWC, np.uint8)
        self.action_space = gym.spaces.Discrete(3)
        self._rng = np.random.default_rng(0)
        self._t = 0
        self._obs = self._image()

    def _image(self) -> np.ndarray:
        h, w, c = SHAPE_HWC
        blocks = self._rng.integers(0, 256, (h // 4, w // 4, c), dtype=np.uint8)
        return np.repeat(np.repeat(blocks, 4, axis=0), 4, axis=1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        self._obs = self._image()
        return self._obs.copy(), {}

    def step(self, action):
        reward = float(int(action) == int(np.argmax(self._obs.reshape(-1, SHAPE_HWC[2]).mean(0))))
        self._t += 1
        self._obs = self._image()
        terminated = bool(self._obs[0, 0, 0] < 16)
        truncated = self._t >= 20 and not terminated
        return self._obs.copy(), reward, terminated, truncated, {}


def feature_map(image_hwc: tuple[int, int, int]) -> tuple[int, int]:
    """NatureCNN's last feature map (height, width) on images (H, W, C)."""
    h, w = image_hwc[:2]
    for kernel, stride in CONVS:
        h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    return h, w


def conv_kernel(weight: np.ndarray) -> np.ndarray:
    """torch Conv2d weight [out, in, kh, kw] -> Keras Conv2D kernel [kh, kw, in, out]."""
    return np.ascontiguousarray(weight.transpose(2, 3, 1, 0))


def linear_kernel(weight: np.ndarray, height: int, width: int, permute: bool = True) -> np.ndarray:
    """torch Linear weight [out, C * H * W] reading a CHW-flattened map -> Keras kernel [H * W * C, out] reading the
    HWC-flattened map (`permute=False`: the plain transpose, which is wrong unless H = W = 1)."""
    if not permute:
        return np.ascontiguousarray(weight.T)
    out = weight.shape[0]
    channels = weight.shape[1] // (height * width)
    return np.ascontiguousarray(weight.reshape(out, channels, height, width).transpose(2, 3, 1, 0).reshape(-1, out))


def tower_pairs(tower, data: dict[str, np.ndarray], prefix: str, permute: bool = True) -> Iterator[tuple]:
    """(Keras variable, SB3's value in Keras layout) for a ConvTower (`.convs`, `.linear`) from the NatureCNN whose
    torch names start with `prefix` (e.g. "shared.features_extractor")."""
    for i, conv in zip((0, 2, 4), tower.convs):
        yield conv.kernel, conv_kernel(data[f"{prefix}.cnn.{i}.weight"])
        yield conv.bias, data[f"{prefix}.cnn.{i}.bias"]
    height, width = feature_map(SHAPE_HWC)
    yield tower.linear.kernel, linear_kernel(data[f"{prefix}.linear.0.weight"], height, width, permute)
    yield tower.linear.bias, data[f"{prefix}.linear.0.bias"]


def agent_pairs(agent, data: dict[str, np.ndarray], prefix: str) -> list[tuple]:
    """(Keras variable, SB3's value) for every weight of a kppo CnnPolicy agent from SB3's CnnPolicy whose names start
    with `prefix` ("shared", "separate", "after"): the actor's NatureCNN from `features_extractor` (shared) or
    `pi_features_extractor`, the critic's from `vf_features_extractor` unless shared, the heads from `action_net` and
    `value_net` (CnnPolicy's net_arch is [], so there are no hidden layers)."""
    actor, critic = agent.actor, agent.critic
    assert not actor.hidden and not critic.hidden, "SB3's CnnPolicy has no hidden layers"
    shared = critic.extractor is actor.extractor
    if shared:
        towers = [(actor.extractor.extractor, f"{prefix}.features_extractor")]
    else:
        towers = [
            (actor.extractor.extractor, f"{prefix}.pi_features_extractor"),
            (critic.extractor.extractor, f"{prefix}.vf_features_extractor"),
        ]
    pairs = [pair for tower, name in towers for pair in tower_pairs(tower, data, name)]
    pairs += [
        (actor.head.kernel, data[f"{prefix}.action_net.weight"].T),
        (actor.head.bias, data[f"{prefix}.action_net.bias"]),
        (critic.head.kernel, data[f"{prefix}.value_net.weight"].T),
        (critic.head.bias, data[f"{prefix}.value_net.bias"]),
    ]
    return pairs


def assign(pairs) -> None:
    """Assigns each pair's value to its variable (shapes must agree)."""
    for variable, value in pairs:
        assert tuple(variable.shape) == value.shape, (variable.path, tuple(variable.shape), value.shape)
        variable.assign(value)
