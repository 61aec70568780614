"""int8 calibration data in `kppo.export`: recorded observations or the policy's own episodes, never the
normalization statistics unless asked (`calibrate_on_statistics=True`); recorded observations read from a .npz file
(`load_observations`) as the policy's input rows, Dict and image spaces included."""

import numpy as np
import pytest

import kppo
from kppo.exporter.calibration import load_observations, record_observations
from tests.helpers.image_envs import BrightHalfDictEnv, BrightHalfEnv
from tests.helpers.sb3_reference import SAVED


@pytest.fixture(scope="module")
def sb3_model():
    model = kppo.PPO.load(SAVED / "pendulum_vecnorm.zip")
    model.use_vec_normalize(SAVED / "pendulum_vecnorm.pkl")
    return model


def test_int8_without_data_or_an_env_is_refused_unless_the_statistics_are_asked_for(sb3_model, tmp_path):
    with pytest.raises(ValueError) as refused:
        kppo.export(sb3_model, tmp_path / "p.tflite", quantize="int8")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("quantize='int8': expected calibration data")
    assert all(name in message for name in ("representative_obs", "calibration_env", "calibrate_on_statistics=True"))
    assert not (tmp_path / "p.tflite").exists()
    exported = kppo.export(sb3_model, tmp_path / "p.tflite", quantize="int8", calibrate_on_statistics=True)
    assert exported.metadata["calibration"]["source"] == "normalization statistics"


def test_a_calibration_env_with_other_spaces_is_refused_not_replaced(sb3_model, tmp_path):
    for env in ("CartPole-v1", "NoSuchEnv-v0"):
        with pytest.raises(
            ValueError, match=rf"^calibration_env: expected a gymnasium env with the policy's spaces .*'{env}'"
        ):
            kppo.export(sb3_model, tmp_path / "p.tflite", quantize="int8", calibration_env=env)


def test_an_npz_of_dict_observations_reads_one_array_per_key(tmp_path):
    model = kppo.PPO("MultiInputPolicy", kppo.make_vec_env(BrightHalfDictEnv, n_envs=1), seed=0)
    policy = model.kppo_policy
    env = BrightHalfDictEnv()
    observations = [env.reset(seed=0)[0]] + [env.step(0)[0] for _ in range(4)]
    np.savez(tmp_path / "log.npz", **{key: np.stack([o[key] for o in observations]) for key in ("image", "state")})
    rows = load_observations(tmp_path / "log.npz", policy)
    np.testing.assert_array_equal(rows, np.stack([policy.input_row(o) for o in observations]))
    np.savez(tmp_path / "half.npz", image=np.stack([o["image"] for o in observations]))
    with pytest.raises(
        ValueError, match=r"^half\.npz: expected the array\(s\) \['image', 'state'\], got arrays \['image'\]$"
    ):
        load_observations(tmp_path / "half.npz", policy)


def test_an_npz_of_images_reads_its_only_array_as_bytes(tmp_path):
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(BrightHalfEnv, n_envs=1), seed=0)
    policy = model.kppo_policy
    frames = record_observations(policy, BrightHalfEnv, 30)
    np.savez(tmp_path / "frames.npz", frames)  # saved as arr_0: the file's only array
    rows = load_observations(tmp_path / "frames.npz", policy)
    assert rows.dtype == np.uint8 and np.array_equal(rows, frames)
    np.savez(tmp_path / "scaled.npz", obs=frames / 255.0)  # [0, 1] floats would read as black
    with pytest.raises(ValueError, match=r"^scaled\.npz: obs: expected uint8 images \(bytes 0-255\), got float64$"):
        load_observations(tmp_path / "scaled.npz", policy)
