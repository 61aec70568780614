"""ONNX export: the TFLite artifact's `action` function converted by tf2onnx and run by onnxruntime equals the Python
policy (normalization, clipping, squashing, scaling, an image's bytes, the LSTM state and action masks baked in), for
kppo policies and SB3 zips, with the artifact's metadata in `metadata_props`; a missing extra and an op ONNX lacks
are one line. Agents are built untrained (or read from the recorded SB3 zips): conversion does not need training."""

import functools
import hashlib
import json
import sys

import gymnasium as gym
import numpy as np
import pytest

from kppo.training.runners.settings import agent_spec
import kppo
from kppo._tf import tf
from kppo.agent.agent import build_agent, make_policy
from kppo.cli.main import main
from kppo.core.types import Moments
from kppo.exporter.calibration import record_observations
from kppo.exporter.endpoint import Endpoint
from kppo.exporter.onnx import MissingExtraError, OnnxRunner, onnx_metadata, to_onnx
from kppo.exporter.parity import measure_parity, parity_observations, random_images
from tests.helpers.image_envs import BrightHalfDictEnv, BrightHalfEnv
from tests.helpers.masked_envs import MaskedChoiceEnv
from tests.helpers.sb3_reference import SAVED

ort = pytest.importorskip("onnxruntime")

OBS = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-3.0, 0.0], np.float32), np.array([0.5, 4.0], np.float32))  # asymmetric bounds


def _runner(path, policy) -> OnnxRunner:
    from kppo.exporter.inputs import artifact_inputs

    return OnnxRunner(path.read_bytes(), artifact_inputs(policy))


@pytest.fixture(scope="module")
def squashed():
    """A squashed Box policy whose normalization binds: statistics far from 0/1 and clip_obs=3."""
    config = kppo.Config(squash=True, normalize_obs=True, clip_obs=3.0, num_hidden_units=16, seed=0)
    agent = build_agent(agent_spec(config), OBS, ACT)
    stats = Moments(np.float32([1.0, -2.0, 0.5]), np.float32([0.25, 4.0, 0.01]), np.float32(100.0))
    return make_policy(agent, stats, agent_spec(config), OBS, ACT)


def test_a_squashed_box_policy_has_its_normalization_clip_and_scaling_in_the_onnx_file(squashed, tmp_path):
    exported = kppo.export(squashed, tmp_path / "p.onnx", format="onnx", batch_size=None)
    metadata = exported.metadata
    assert metadata["format"] == "onnx" and metadata["parity"]["max_error"] <= 1e-5
    assert {"Sub", "Mul", "Max", "Min", "Tanh", "MatMul"} <= set(metadata["onnx_ops"])
    obs = parity_observations(squashed, 2000, seed=7)  # a third near the clip region (10-15 std)
    obs[:200] = np.random.default_rng(1).uniform(-100, 100, size=(200, 3))  # far out of range
    parity = measure_parity(_runner(exported.path, squashed), squashed, obs)
    assert parity["max_error"] <= 1e-5 and parity["non_finite"] == 0
    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    (obs_input,), (action,) = session.get_inputs(), session.get_outputs()
    assert (obs_input.name, obs_input.type, action.name, action.type) == (
        "obs",
        "tensor(float)",
        "action",
        "tensor(float)",
    )
    # the same metadata as the .metadata.json beside it, less the file's own size and SHA-256
    beside = json.loads(exported.metadata_path.read_text())
    content = exported.path.read_bytes()
    assert beside["sha256"] == hashlib.sha256(content).hexdigest() and beside["size_bytes"] == len(content)
    inside = onnx_metadata(content)
    assert inside == {k: v for k, v in beside.items() if k not in ("sha256", "size_bytes")}
    assert session.get_modelmeta().custom_metadata_map["normalization"] == json.dumps(beside["normalization"])
    assert inside["normalization"]["clip"] == 3.0 and inside["versions"]["onnxruntime"] == ort.__version__


def test_an_sb3_zip_exports_to_onnx_from_the_cli_and_equals_sb3s_actions(tmp_path, capsys):
    """VecNormalize's statistics with SB3's clip_obs=0.8 binding, from `kppo export --format onnx`."""
    data = np.load(SAVED / "pendulum_vecnorm_clipped.npz")
    out = tmp_path / "sb3.onnx"
    zip_path, pkl = SAVED / "pendulum_vecnorm_clipped.zip", SAVED / "pendulum_vecnorm_clipped.pkl"
    assert main(["export", str(zip_path), "--vecnormalize", str(pkl), "--format", "onnx", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out} (")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = np.concatenate([session.run(None, {"obs": row[None]})[0] for row in data["obs"].astype(np.float32)])
    want = data["actions"].astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("layout", ["hwc", "chw"])
def test_an_image_policy_takes_uint8_bytes_in_the_envs_layout(layout, tmp_path):
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(lambda: BrightHalfEnv(12, 2, layout), n_envs=1), seed=0)
    policy = model.kppo_policy
    exported = kppo.export(model, tmp_path / "cnn.onnx", format="onnx")
    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    (image,) = session.get_inputs()
    assert (image.type, image.shape) == ("tensor(uint8)", [1, *policy.input_shape])
    assert exported.metadata["input"]["layout"] == layout.upper() and "Conv" in exported.metadata["onnx_ops"]
    frames = np.concatenate(
        [
            record_observations(policy, lambda: BrightHalfEnv(12, 2, layout), 40, seed=3),
            random_images(policy.input_shape, 40, np.random.default_rng(0)),
        ]
    )
    got = np.concatenate([session.run(None, {"obs": frame[None]})[0] for frame in frames])
    np.testing.assert_array_equal(got, policy.get_action(frames))


def test_an_sb3_cnn_zip_equals_sb3s_actions_on_its_recorded_frames(tmp_path):
    model = kppo.PPO.load(SAVED / "cnn.zip")
    data = np.load(SAVED / "cnn.npz")
    exported = kppo.export(model, tmp_path / "cnn.onnx", format="onnx", batch_size=None)
    frames = data["obs"].transpose(0, 3, 1, 2)  # the CHW frames SB3's policy read (VecTransposeImage)
    got = OnnxRunner(exported.path.read_bytes(), _inputs(model))(frames)
    np.testing.assert_array_equal(got, data["actions"])


def _inputs(model):
    from kppo.exporter.inputs import artifact_inputs

    return artifact_inputs(model.kppo_policy)


def test_an_lstm_carries_its_state_as_inputs_and_outputs_over_whole_episodes(tmp_path):
    """sb3-contrib's recorded sequence (episode starts zero the state) and closed-loop CartPole episodes: the ONNX
    artifact stepped with its own state outputs acts as `predict` with the state carried, every step."""
    model = kppo.RecurrentPPO.load(SAVED / "lstm.zip")
    exported = kppo.export(model, tmp_path / "lstm.onnx", format="onnx")
    assert exported.metadata["parity"]["state_max_error"] < 1e-5 and exported.metadata["state"]["shape"] == [1, 8]
    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs", "state_h", "state_c"]
    assert [o.name for o in session.get_outputs()] == ["action", "next_state_h", "next_state_c"]
    assert exported.metadata["state"]["output_names"] == ["next_state_h", "next_state_c"]
    data = np.load(SAVED / "lstm.npz")
    h = c = np.zeros((1, 8), np.float32)
    actions = []
    for obs, start in zip(data["obs"], data["episode_starts"]):
        if start:
            h = c = np.zeros((1, 8), np.float32)
        action, h, c = session.run(None, {"obs": obs[None], "state_h": h, "state_c": c})
        actions.append(int(action[0]))
    np.testing.assert_array_equal(actions, data["actions"])
    env = gym.make("CartPole-v1")
    for episode in range(3):
        obs, _ = env.reset(seed=episode)
        h = c = np.zeros((1, 8), np.float32)
        state, start, done, steps = None, True, False, 0
        while not done:
            want, state = model.predict(obs, state=state, episode_start=np.array([start]), deterministic=True)
            got, h, c = session.run(None, {"obs": obs[None].astype(np.float32), "state_h": h, "state_c": c})
            assert int(got[0]) == int(np.ravel(want)[0]), (episode, steps)
            np.testing.assert_allclose(h[0], np.ravel(state[0]), atol=1e-5)
            obs, _, terminated, truncated, _ = env.step(int(got[0]))
            start, done, steps = False, terminated or truncated, steps + 1
        assert steps >= 8


def test_a_masked_policy_takes_the_mask_and_equals_sb3_contribs_actions(tmp_path):
    model = kppo.MaskablePPO.load(SAVED / "maskable.zip")
    data = np.load(SAVED / "maskable.npz")
    exported = kppo.export(model, tmp_path / "masked.onnx", format="onnx", batch_size=None)
    assert exported.metadata["action_mask"]["shape"] == [None, 6] and exported.metadata["parity"]["max_error"] == 0
    runner = OnnxRunner(exported.path.read_bytes(), _inputs(model))
    assert runner.masked
    np.testing.assert_array_equal(runner(data["obs"], data["action_masks"]), data["actions"])
    only = np.zeros((len(data["obs"]), 6), np.float32)
    only[:, 4] = 1.0  # one action allowed: that one, whatever the logits
    np.testing.assert_array_equal(runner(data["obs"], only), 4)
    with pytest.raises(ValueError, match=r"^masks: expected a mask per row for this artifact, got None$"):
        runner(data["obs"])


def test_a_missing_extra_is_one_line_naming_it(squashed, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # an import of it fails, as when it is not installed
    with pytest.raises(
        MissingExtraError, match=r"^format='onnx': needs tf2onnx \(the optional extra\): pip install kppo\[onnx\]$"
    ):
        kppo.export(squashed, tmp_path / "p.onnx", format="onnx")
    assert not (tmp_path / "p.onnx").exists()
    zip_path = SAVED / "cartpole.zip"
    assert main(["export", str(zip_path), "--format", "onnx", "--out", str(tmp_path / "c.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install kppo[onnx]" in err


def test_an_op_onnx_cannot_express_and_quantization_are_one_line_refusals(squashed, tmp_path):
    spec = [tf.TensorSpec([1, 3], tf.float32, name="obs")]
    endpoint = Endpoint(lambda obs: tf.math.lgamma(obs), spec, [], None, lambda tensors: tensors[0])
    with pytest.raises(
        ValueError, match=r"^format='onnx': tf2onnx has no ONNX form .* \['Lgamma'\] .*export format='tflite'"
    ):
        to_onnx(endpoint)
    with pytest.raises(ValueError, match=r"^quantize: only for format='tflite', got 'int8' with format='onnx'$"):
        kppo.export(squashed, tmp_path / "p.onnx", format="onnx", quantize="int8")


OTHER_KINDS = {
    "discrete-obs": lambda: kppo.PPO("MlpPolicy", "FrozenLake-v1", seed=0),  # the integer in, one-hot inside
    "multidiscrete-masked": lambda: kppo.MaskablePPO(
        "MlpPolicy", functools.partial(MaskedChoiceEnv, nvec=[3, 4]), n_steps=64, batch_size=64, seed=0
    ),
    "gsde": lambda: kppo.PPO.load(SAVED / "gsde.zip"),
    "dict-image": lambda: kppo.PPO("MultiInputPolicy", kppo.make_vec_env(BrightHalfDictEnv, n_envs=1), seed=0),
}


@pytest.mark.parametrize("kind", list(OTHER_KINDS))
def test_the_other_policy_kinds_pass_the_onnxruntime_check(kind, tmp_path):
    """The export's own check (1,000 observations, random masks for a masked policy) passed, with the TFLite
    artifact's inputs: a Dict holding an image takes one input per key, each its dtype."""
    model = OTHER_KINDS[kind]()
    exported = kppo.export(model, tmp_path / f"{kind}.onnx", format="onnx")
    assert exported.metadata["parity"]["max_error"] <= 1e-5 and exported.metadata["parity"]["non_finite"] == 0
    session = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    inputs = {i.name: i.type for i in session.get_inputs()}
    assert inputs == {item["name"]: TYPES[item["dtype"]] for item in exported.metadata["inputs"]} | (
        {"action_mask": "tensor(float)"} if "action_mask" in exported.metadata else {}
    )
    if kind == "dict-image":
        assert inputs == {"obs_image": "tensor(uint8)", "obs_state": "tensor(float)"}


TYPES = {"float32": "tensor(float)", "int32": "tensor(int32)", "uint8": "tensor(uint8)"}
