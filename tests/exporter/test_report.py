"""`kppo.exporter.report`: every format's artifact, loaded from the file written, plays the float policy's seeded
episodes in its own interpreter (LiteRT, onnxruntime, TensorFlow); a float32 artifact plays them exactly; a masked
artifact takes the env's masks and a recurrent one carries its state through whole episodes; TFLite Micro's arena
is measured for .tflite files only."""

import pytest

import kppo
from kppo.exporter.artifact import resolve_source
from kppo.exporter.report import make_report, summary


@pytest.fixture(scope="module")
def cartpole():
    """A model as it is built (exporting needs no training)."""
    return kppo.PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[16]), seed=0)


@pytest.mark.parametrize(("fmt", "name"), [("tflite", "p.tflite"), ("onnx", "p.onnx"), ("saved_model", "p_sm")])
def test_every_format_plays_the_float_policys_episodes(cartpole, fmt, name, tmp_path):
    exported = kppo.export(cartpole, tmp_path / name, format=fmt)
    report = make_report(exported.path, resolve_source(cartpole)[0], exported.metadata, "CartPole-v1", episodes=3)
    loop = report["closed_loop"]
    assert loop["artifact"]["returns"] == loop["float"]["returns"] and loop["agreement"]["equal"] == 1.0
    assert loop["agreement"]["steps"] == sum(loop["artifact"]["returns"])  # CartPole: a reward of 1 per step
    assert (report["arena_bytes"] is None) == (fmt != "tflite")
    if fmt == "tflite":  # TFLite Micro plays the same episodes
        assert report["tflite_micro"]["closed_loop"]["artifact"]["returns"] == loop["float"]["returns"]
    assert report["latency"]["runtime"] == {"tflite": "LiteRT", "onnx": "onnxruntime", "saved_model": "TensorFlow"}[fmt]
    assert "episodes of CartPole-v1" in summary(report)


def test_an_env_with_other_spaces_gives_no_closed_loop(cartpole, tmp_path):
    exported = kppo.export(cartpole, tmp_path / "p.tflite")
    report = make_report(exported.path, resolve_source(cartpole)[0], exported.metadata, "Pendulum-v1", episodes=2)
    assert report["closed_loop"] is None and "'Pendulum-v1' is no gymnasium env" in report["closed_loop_note"]
    assert report["arena_bytes"] > 0  # the rest of the report is there


def test_masked_and_recurrent_artifacts_play_with_masks_and_state(tmp_path):
    masked = kppo.MaskablePPO("MlpPolicy", "Taxi-v4", n_steps=32, batch_size=32, seed=0)
    exported = kppo.export(masked, tmp_path / "m.tflite")
    report = make_report(exported.path, resolve_source(masked)[0], exported.metadata, "Taxi-v4", episodes=2)
    assert report["closed_loop"]["agreement"] == {"equal": 1.0, "steps": 400}  # 2 episodes of 200 steps
    recurrent = kppo.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", policy_kwargs=dict(lstm_hidden_size=8), seed=0)
    exported = kppo.export(recurrent, tmp_path / "r.tflite")
    report = make_report(exported.path, resolve_source(recurrent)[0], exported.metadata, "CartPole-v1", episodes=2)
    loop = report["closed_loop"]
    assert loop["artifact"]["returns"] == loop["float"]["returns"] and loop["agreement"]["equal"] == 1.0
    assert report["tflite_micro"]["equal_vs_litert"] == 1.0  # the state LiteRT carried, replayed in TFLite Micro
    micro = report["tflite_micro"]["closed_loop"]  # and its own episodes, its own state carried
    assert micro["artifact"]["returns"] == loop["float"]["returns"] and micro["agreement"]["equal"] == 1.0
