"""Image policies export with a uint8 image input ([1, H, W, C], or the env's [1, C, H, W]): the /255 and the layout
inside the artifact, run by the real LiteRT interpreter and by TFLite Micro; int8 from the uint8 input on."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.exporter.artifact import export
from kppo.exporter.calibration import record_observations
from kppo.exporter.parity import random_images
from kppo.exporter.runner import TFLiteRunner

ROOT = Path(__file__).resolve().parents[2]
BLOCK_TF = "import sys\nfor name in ('tensorflow', 'keras', 'kppo'):\n    sys.modules[name] = None\n"


class BrightSide(gym.Env):
    """Reward 1 when the action names the brighter half of a noisy image (every frame differs)."""

    def __init__(self, size=12, channels=2, channels_first=False):
        shape = (channels, size, size) if channels_first else (size, size, channels)
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.size, self.channels, self.channels_first = size, channels, channels_first

    def _obs(self):
        rng, half = self.np_random, self.size // 2
        image = rng.integers(0, 90, (self.size, self.size, self.channels))
        columns = slice(half, None) if self.side else slice(0, half)
        image[:, columns] += rng.integers(60, 166, image[:, columns].shape)
        image = image.astype(np.uint8)
        return np.moveaxis(image, -1, 0) if self.channels_first else image

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.side)
        self.t, self.side = self.t + 1, int(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= 20, {}


def _chw_env():
    return BrightSide(size=10, channels=3, channels_first=True)


@pytest.fixture(scope="module")
def trained():
    """A SmallCNN policy that learned the task (every action decided by a clear logit margin)."""
    model = kppo.PPO(
        "CnnPolicy",
        kppo.make_vec_env(BrightSide, n_envs=4, seed=0),
        n_steps=64,
        batch_size=64,
        n_epochs=4,
        learning_rate=1e-3,
        seed=0,
    )
    return model.learn(3000)


@pytest.fixture(scope="module")
def frames(trained):
    """The trained policy's own frames (other episodes than the calibration's)."""
    return record_observations(trained._get_policy(), BrightSide, 600, seed=500)


@pytest.fixture(scope="module")
def artifacts(trained, tmp_path_factory):
    """The trained policy's float32 and int8 TFLite artifacts (int8 calibrated on its own episodes)."""
    folder = tmp_path_factory.mktemp("images")
    return {q: export(trained, folder / f"{q}.tflite", quantize=q, calibration_env=BrightSide) for q in (None, "int8")}


def _input(path):
    runner = TFLiteRunner(path)
    details = runner.interpreter.get_input_details()[0]
    return runner, (np.dtype(details["dtype"]).name, [int(d) for d in details["shape"]], details["quantization"])


def test_float32_artifacts_take_uint8_images_and_match_the_policy(trained, frames, artifacts, tmp_path):
    policy = trained._get_policy()
    assert policy.input_shape == (12, 12, 2) and policy.input_dtype == np.uint8 and frames.dtype == np.uint8
    exported = artifacts[None]
    assert exported.metadata["input"]["shape"] == [1, 12, 12, 2] and exported.metadata["input"]["dtype"] == "uint8"
    assert exported.metadata["input"]["layout"] == "HWC" and exported.metadata["parity"]["max_error"] == 0.0
    runner, details = _input(exported.path)
    assert details == ("uint8", [1, 12, 12, 2], (1.0, 0))  # the bytes as they are
    assert "CAST" not in exported.metadata["tflite_ops"]  # TFLite Micro's CAST takes no uint8: DEQUANTIZE reads it
    want = policy.get_action(frames)
    np.testing.assert_array_equal(runner(frames), want)
    np.testing.assert_array_equal(policy.get_action_flat(policy.encode(frames)), want)
    saved = export(trained, tmp_path / "sm", format="saved_model", batch_size=None)
    loaded = tf.saved_model.load(str(saved.path))
    np.testing.assert_array_equal(loaded.action(tf.constant(frames)).numpy(), want)
    assert loaded.value(tf.constant(frames[:3])).shape[0] == 3


def test_a_fixed_batch_of_images(trained, frames, tmp_path):
    exported = export(trained, tmp_path / "b4.tflite", batch_size=4)
    runner, details = _input(exported.path)
    assert details[1] == [4, 12, 12, 2] and exported.metadata["input"]["shape"] == [4, 12, 12, 2]
    np.testing.assert_array_equal(runner(frames[:8]), trained._get_policy().get_action(frames[:8]))


@pytest.mark.parametrize("quantize", ["float16", "dynamic"])
def test_float16_and_dynamic_image_artifacts_take_uint8(trained, frames, quantize, tmp_path):
    exported = export(trained, tmp_path / f"{quantize}.tflite", quantize=quantize)
    runner, details = _input(exported.path)
    assert details == ("uint8", [1, 12, 12, 2], (1.0, 0))
    assert np.mean(runner(frames) == trained._get_policy().get_action(frames)) >= 0.99


def test_int8_quantizes_from_the_uint8_input_and_picks_the_float_action(trained, frames, artifacts):
    """Full int8 from the bytes on: uint8 (scale 1, zero point 0) -> QUANTIZE -> int8 CNN; calibrated on the policy's
    own episodes, the calibrated range exactly [0, 255] (measured: 100% of on-policy frames agree)."""
    exported = artifacts["int8"]
    assert exported.metadata["calibration"] == {"source": "policy rollouts in BrightSide", "observations": 2000}
    runner, details = _input(exported.path)
    assert details == ("uint8", [1, 12, 12, 2], (1.0, 0))
    ops = runner.interpreter._get_ops_details()
    assert ops[0]["op_name"] == "QUANTIZE" and {"CONV_2D", "FULLY_CONNECTED", "ARG_MAX"} <= set(
        exported.metadata["tflite_ops"]
    )
    conv = next(op for op in ops if op["op_name"] == "CONV_2D")
    conv_input = runner.interpreter.get_tensor_details()[conv["inputs"][0]]
    # the bytes exactly: the /255 as an int8 op (scale 1/255), or folded into the first convolution (scale 1)
    assert conv_input["dtype"] == np.int8 and np.isclose(conv_input["quantization"][0], [1 / 255, 1.0]).any()
    want = trained._get_policy().get_action(frames)
    assert np.mean(runner(frames) == want) >= 0.99


def test_a_channels_first_env_keeps_its_layout(tmp_path):
    """A CHW space: the artifact takes [1, C, H, W] and transposes inside (untrained: learning does not matter)."""
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(_chw_env, n_envs=1, seed=0), n_steps=64, batch_size=64, seed=0)
    policy = model._get_policy()
    assert policy.input_shape == (3, 10, 10)
    obs = np.concatenate(
        [record_observations(policy, _chw_env, 300, seed=1), random_images((3, 10, 10), 300, np.random.default_rng(2))]
    )
    want = policy.get_action(obs)
    for quantize in (None, "int8"):
        exported = export(model, tmp_path / f"chw_{quantize}.tflite", quantize=quantize, representative_obs=obs)
        runner, details = _input(exported.path)
        assert details == ("uint8", [1, 3, 10, 10], (1.0, 0)) and exported.metadata["input"]["layout"] == "CHW"
        assert "TRANSPOSE" in exported.metadata["tflite_ops"]
        agree = np.mean(runner(obs) == want)
        assert agree == 1.0 if quantize is None else agree >= 0.9  # int8 of an untrained policy's near-ties
    code = (
        f"import json\nfrom kppo_runtime.micro_check import check\nprint(json.dumps(check({str(exported.path)!r}, 50)))"
    )
    micro = _kit(code)
    assert micro["action_mismatch_vs_litert"] == 0.0 and 0 < micro["arena_bytes"] <= 16 * 1024  # TFLM's TRANSPOSE too


def _kit(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_kit_and_tflite_micro_run_image_artifacts(trained, frames, artifacts, tmp_path):
    paths = [str(artifacts[q].path) for q in (None, "int8")]
    np.save(tmp_path / "frames.npy", frames[:100])
    got = _kit(
        "import json\nimport numpy as np\nfrom kppo_runtime.micro_check import check\n"
        "from kppo_runtime.runtime import Controller\n"
        f"paths, frames = {paths}, np.load({str(tmp_path / 'frames.npy')!r})\n"
        "acts = [[Controller(p).act(f) for f in frames] for p in paths]\n"
        "print(json.dumps({'acts': acts, 'micro': [check(p, 100) for p in paths]}))\n"
    )
    want = trained._get_policy().get_action(frames[:100])
    np.testing.assert_array_equal(got["acts"][0], want)
    assert np.mean(np.asarray(got["acts"][1]) == want) >= 0.99
    for micro in got["micro"]:  # measured: 15,484 bytes (float32), 7,058 (int8)
        assert 0 < micro["arena_bytes"] <= 32 * 1024 and micro["action_mismatch_vs_litert"] == 0.0
        assert micro["micro_invoke_us"] > 0


def test_bad_images_are_one_line_errors(trained, frames, artifacts):
    exported = artifacts[None]
    runner = TFLiteRunner(exported.path)
    with pytest.raises(ValueError, match=r"^obs: expected uint8 images \(bytes 0-255\), got float32$"):
        runner(frames.astype(np.float32) / 255.0)
    with pytest.raises(ValueError, match=r"^obs: expected images \[N, 12, 12, 2\], got shape \(4, 2, 12, 12\)$"):
        runner(np.moveaxis(frames[:4], -1, 1))
    with pytest.raises(ValueError, match=r"^obs: expected an image of shape \(12, 12, 2\), got shape \(12, 12\)$"):
        trained._get_policy().input_row(frames[0, :, :, 0])
    got = _kit(
        "import json\nimport numpy as np\nfrom kppo_runtime.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        "errors = []\n"
        "for bad in (np.zeros((12, 12, 2), np.float32), np.zeros((2, 12, 12), np.uint8)):\n"
        "    try:\n        c.act(bad)\n    except ValueError as e:\n        errors.append(str(e))\n"
        "print(json.dumps(errors))\n"
    )
    assert got == [
        "obs: expected a uint8 image of shape (12, 12, 2) (HWC), got float32",
        "obs: expected a uint8 image of shape (12, 12, 2) (HWC), got shape (2, 12, 12)",
    ]


class MaskedBrightSide(BrightSide):
    """BrightSide with a third action, never allowed (`action_masks`)."""

    def __init__(self):
        super().__init__()
        self.action_space = gym.spaces.Discrete(3)

    def action_masks(self):
        return np.array([True, True, False])


def test_a_masked_image_policy_keeps_a_float32_mask_input(tmp_path):
    model = kppo.MaskablePPO("CnnPolicy", kppo.make_vec_env(MaskedBrightSide, n_envs=2, seed=0), n_steps=32, seed=0)
    frames = random_images((12, 12, 2), 50, np.random.default_rng(0))
    for quantize in (None, "int8"):
        exported = export(model, tmp_path / f"m_{quantize}.tflite", quantize=quantize, representative_obs=frames)
        runner = TFLiteRunner(exported.path)
        inputs = {
            d["name"]: (np.dtype(d["dtype"]).name, d["quantization"]) for d in runner.interpreter.get_input_details()
        }
        assert inputs == {"action_obs:0": ("uint8", (1.0, 0)), "action_action_mask:0": ("float32", (0.0, 0))}
        only = np.tile(np.float32([0, 0, 1]), (len(frames), 1))
        np.testing.assert_array_equal(runner(frames, only), 2)
