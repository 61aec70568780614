"""A Dict observation holding an image exports with one input per key (`kppo.exporter.inputs`): the image's uint8
bytes, a Box key's float32 values, an integer key's int32; each key's preprocessing inside (the /255, the
normalization, the one-hot). Run by LiteRT, by the TF-free kit (`Controller.act(dict)`) and by TFLite Micro."""

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
from kppo.exporter.inputs import artifact_inputs, split_rows
from kppo.exporter.runner import TFLiteRunner

ROOT = Path(__file__).resolve().parents[2]
BLOCK_TF = "import sys\nfor name in ('tensorflow', 'keras', 'kppo'):\n    sys.modules[name] = None\n"
SPACE = gym.spaces.Dict(
    {
        "camera": gym.spaces.Box(0, 255, (12, 12, 1), np.uint8),
        "speed": gym.spaces.Box(-3, 3, (2,), np.float32),
        "gear": gym.spaces.Discrete(3, start=1),
    }
)


class Dashboard(gym.Env):
    """Random dashboards; the reward asks for the brighter half of the camera, flipped when speed[0] > 0."""

    observation_space, action_space = SPACE, gym.spaces.Discrete(2)

    def _obs(self):
        obs = SPACE.sample()
        obs["camera"][:, 6:] //= 3 if self.np_random.random() < 0.5 else 1
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        SPACE.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 20, {}


@pytest.fixture(scope="module")
def model():
    """A MultiInputPolicy (CombinedExtractor: SmallCNN on the camera, the other keys flat) with VecNormalize."""
    venv = kppo.VecNormalize(kppo.make_vec_env(Dashboard, n_envs=2, seed=0))
    return kppo.PPO("MultiInputPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0).learn(64)


@pytest.fixture(scope="module")
def observations(model):
    """Dict observations of the policy's own episodes, and their flat input rows."""
    env, policy = Dashboard(), model._get_policy()
    obs, _ = env.reset(seed=7)
    dicts = [obs] + [env.step(0)[0] for _ in range(99)]
    return dicts, np.stack([policy.input_row(o) for o in dicts])


@pytest.fixture(scope="module")
def float32_artifact(model, tmp_path_factory):
    """The model's float32 TFLite artifact, exported once for the tests that read or run it."""
    return export(model, tmp_path_factory.mktemp("dict") / "d.tflite")


def test_one_input_per_key_in_the_dicts_order_with_its_own_dtype(model, float32_artifact):
    exported = float32_artifact
    assert exported.metadata["inputs"] == [
        {"name": "obs_camera", "key": "camera", "shape": [1, 12, 12, 1], "dtype": "uint8", "layout": "HWC"},
        {"name": "obs_gear", "key": "gear", "shape": [1, 1], "dtype": "int32"},
        {"name": "obs_speed", "key": "speed", "shape": [1, 2], "dtype": "float32"},
    ]
    assert "input" not in exported.metadata and exported.metadata["normalization"]["enabled"]
    runner = TFLiteRunner(exported.path, artifact_inputs(model._get_policy())).runner
    got = {
        name: (np.dtype(d["dtype"]).name, [int(x) for x in d["shape"]])
        for name, d in runner.get_input_details().items()
    }
    assert got == {
        "obs_camera": ("uint8", [1, 12, 12, 1]),
        "obs_gear": ("int32", [1, 1]),
        "obs_speed": ("float32", [1, 2]),
    }


def test_float32_and_saved_model_artifacts_equal_the_policy(model, observations, tmp_path):
    dicts, rows = observations
    policy = model._get_policy()
    want = policy.get_action({key: np.stack([d[key] for d in dicts]) for key in SPACE.keys()})
    exported = export(model, tmp_path / "d.tflite", representative_obs=rows)
    assert exported.metadata["parity"]["max_error"] == 0.0
    runner = TFLiteRunner(exported.path, artifact_inputs(policy))
    np.testing.assert_array_equal(runner(rows), want)
    saved = export(model, tmp_path / "sm", format="saved_model", batch_size=None)
    loaded = tf.saved_model.load(str(saved.path))
    inputs = [tf.constant(x) for x in split_rows(artifact_inputs(policy), rows)]
    np.testing.assert_array_equal(loaded.action(*inputs).numpy(), want)
    assert loaded.value(*inputs).shape[0] == len(rows)


def test_int8_and_the_kit_and_tflite_micro_take_the_dict(model, observations, float32_artifact, tmp_path):
    dicts, _ = observations
    want = model._get_policy().get_action({key: np.stack([d[key] for d in dicts]) for key in SPACE.keys()})
    int8 = export(model, tmp_path / "int8.tflite", quantize="int8", calibration_env=Dashboard)
    paths = [str(float32_artifact.path), str(int8.path)]
    literal = json.dumps([{k: np.asarray(v).tolist() for k, v in d.items()} for d in dicts])
    got = _kit(
        "import json\nimport numpy as np\nfrom kppo_runtime.micro_check import check\n"
        "from kppo_runtime.runtime import Controller\n"
        f"paths, dicts = {paths}, json.loads({literal!r})\n"
        "dicts = [{'camera': np.asarray(d['camera'], np.uint8), 'speed': np.asarray(d['speed'], np.float32), "
        "'gear': d['gear']} for d in dicts]\n"
        "acts = [[Controller(p).act(d) for d in dicts] for p in paths]\n"
        "c, errors = Controller(paths[0]), []\n"
        "for bad in ({'camera': dicts[0]['camera'] / 255.0, 'speed': dicts[0]['speed'], 'gear': 1}, "
        "{'camera': dicts[0]['camera']}, {**dicts[0], 'speed': np.zeros(3)}):\n"
        "    try:\n        c.act(bad)\n    except ValueError as e:\n        errors.append(str(e))\n"
        "print(json.dumps({'acts': acts, 'errors': errors, 'micro': [check(p, 100) for p in paths]}))\n"
    )
    np.testing.assert_array_equal(got["acts"][0], want)
    assert np.mean(np.asarray(got["acts"][1]) == want) >= 0.9  # int8 of a barely trained policy's near-ties
    assert got["errors"] == [
        "obs['camera']: expected a uint8 image of shape (12, 12, 1) (HWC), got float64 of shape (12, 12, 1)",
        "obs: expected a dict with keys ['camera', 'gear', 'speed'], got ['camera']",
        "obs['speed']: expected 2 values once flattened, got 3",
    ]
    for micro in got["micro"]:
        assert micro["action_mismatch_vs_litert"] == 0.0 and 0 < micro["arena_bytes"] <= 64 * 1024


def _kit(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_keys_that_give_the_same_input_name_are_one_line_errors(tmp_path):
    space = gym.spaces.Dict({"a b": SPACE["camera"], "a_b": SPACE["speed"]})

    class Clash(gym.Env):
        observation_space, action_space = space, gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return space.sample(), {}

        def step(self, action):
            return space.sample(), 0.0, False, True, {}

    model = kppo.PPO("MultiInputPolicy", Clash, n_steps=32, batch_size=32, seed=0)
    with pytest.raises(ValueError, match=r"^observation_space: expected Dict keys that give distinct artifact input "):
        export(model, tmp_path / "c.tflite")


def test_calibration_records_dict_rows(model):
    rows = record_observations(model._get_policy(), Dashboard, 50, seed=1)
    assert rows.shape == (50, 12 * 12 + 1 + 2) and np.all(rows[:, :144] == np.round(rows[:, :144]))
