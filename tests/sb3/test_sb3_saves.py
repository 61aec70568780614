"""Models Stable-Baselines3 2.9.2 / sb3-contrib 2.9.2 saved (`tests/fixtures/sb3/saved`, made by
`record_sb3_zips.py` in the peer venv) read by `kppo.PPO.load` without torch: kppo's deterministic actions and
values equal SB3's on the recorded observations to float32 rounding, per policy kind; SB3's `vec_normalize.pkl` goes
into the model; the exported float32 artifact takes raw observations and equals SB3's actions, int8 within a stated
error."""

import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.exporter.runner import TFLiteRunner
from tests.helpers.sb3_reference import SAVED, SAVED_CASES

#: case -> the kppo class that loads it
CASES = {case: getattr(kppo, name) for case, name in SAVED_CASES.items()}
#: float32 rounding of the values and Box actions (|error| <= TOL * max(1, |SB3's|))
TOL = 1e-5


def _data(case: str) -> dict[str, np.ndarray]:
    return dict(np.load(SAVED / f"{case}.npz"))


def _policy_obs(case: str, data: dict[str, np.ndarray]) -> np.ndarray:
    """The observations SB3's policy read: VecNormalize's output, or CHW images (SB3's VecTransposeImage)."""
    obs = data.get("normalized_obs", data["obs"])
    return obs.transpose(0, 3, 1, 2) if case == "cnn" else obs


def _close(got, want) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("case", [c for c in CASES if "lstm" not in c])
def test_deterministic_actions_and_values_equal_sb3s(case):
    model = CASES[case].load(SAVED / f"{case}.zip")
    assert model.sb3_version == "2.9.2"
    data = _data(case)
    obs = _policy_obs(case, data)
    masks = data.get("action_masks")
    actions, _ = model.predict(obs, deterministic=True, action_masks=masks)
    actions = np.asarray(actions).reshape(data["actions"].shape)
    if data["actions"].dtype.kind == "f":
        _close(actions, data["actions"])
    else:
        np.testing.assert_array_equal(actions, data["actions"])
    values = model.agent.critic(tf.constant(obs.reshape(len(obs), -1).astype(np.float32))).numpy()
    _close(values.reshape(-1), data["values"])


@pytest.mark.parametrize("case", ["lstm", "lstm_layers", "cnn_lstm"])
def test_recurrent_actions_and_values_equal_sb3s_with_the_state_carried(case):
    """One LSTM layer, two (`n_lstm_layers=2`: `predict`'s state is sb3-contrib's [2, 1, 8], layer by layer), and
    CnnLstmPolicy (a NatureCNN both LSTMs read, CHW uint8 images in, heads on the LSTMs)."""
    model = kppo.RecurrentPPO.load(SAVED / f"{case}.zip")
    data = _data(case)
    assert model.agent.lstm.num_layers == (2 if case == "lstm_layers" else 1)
    assert (model.policy_class, model.config.actor_hidden_units) == (
        ("CnnLstmPolicy", ()) if case == "cnn_lstm" else ("MlpLstmPolicy", (16,))
    )
    actions, state, states = [], None, []
    for obs, start in zip(data["obs"], data["episode_starts"]):
        action, state = model.predict(obs[None], state=state, episode_start=np.array([start]), deterministic=True)
        actions.append(int(np.ravel(action)[0]))
        states.append(state)
    np.testing.assert_array_equal(actions, data["actions"])
    if case != "lstm":  # recorded with the states predict returned
        for k, name in enumerate(("state_h", "state_c")):
            _close(np.stack([s[k] for s in states]), data[name])
    from kppo.agent.agent import act_step, initial_memory

    memory, values = initial_memory(model.agent, 1), []
    for obs, start in zip(data["obs"], data["episode_starts"]):
        flat = tf.constant(obs.reshape(1, -1).astype(np.float32))  # an image's bytes as 0.0-255.0, as kppo reads them
        _, value, memory = act_step(model.agent, flat, memory, tf.constant([bool(start)]))
        values.append(float(np.ravel(value)[0]))
    _close(values, data["values"])


@pytest.mark.parametrize("case", ["pendulum_vecnorm", "pendulum_vecnorm_clipped"])
def test_vec_normalize_pkl_goes_into_the_model_raw_observations_in(case):
    """Also with SB3's clip_obs / clip_reward / epsilon set (0.8, 2, 0.01 in the clipped case: the clip binds)."""
    data = _data(case)
    venv = kppo.make_vec_env("Pendulum-v1", n_envs=1)
    wrapper = kppo.VecNormalize.load(SAVED / f"{case}.pkl", venv)
    for name in ("clip_obs", "clip_reward", "epsilon"):  # the default case's file records no clip_reward (10)
        assert getattr(wrapper, name) == pytest.approx(float(data.get(name, 10.0)))
    np.testing.assert_allclose(wrapper.obs_rms.mean, data["obs_rms_mean"], rtol=1e-6)
    np.testing.assert_allclose(wrapper.obs_rms.var, data["obs_rms_var"], rtol=1e-6)
    assert wrapper.obs_rms.count == pytest.approx(float(data["obs_rms_count"]))
    model = kppo.PPO.load(SAVED / f"{case}.zip", env=wrapper)
    _close(model.predict(data["obs"], deterministic=True)[0], data["actions"])
    assert model.config.clip_obs == wrapper.clip_obs and model.config.norm_epsilon == wrapper.epsilon
    model.env.close()
    frozen = kppo.PPO.load(SAVED / f"{case}.zip")
    frozen.use_vec_normalize(SAVED / f"{case}.pkl")
    _close(frozen.predict(data["obs"], deterministic=True)[0], data["actions"])


# pendulum_vecnorm (VecNormalize's default clips): its float32 artifact is checked against SB3's actions through
# `kppo export --vecnormalize` in test_the_cli_exports_and_evaluates_sb3_saves; its int8 one takes the same path as
# the clipped case's, where the clip binds.
@pytest.mark.parametrize("case", ["pendulum_vecnorm_clipped", "cartpole"])
def test_the_exported_artifact_equals_sb3_from_raw_observations(case, tmp_path):
    """float32: SB3's actions to float32 rounding (VecNormalize baked in); int8: >= 99% of discrete actions, Box
    within 1% of the action range (measured: 1.3e-4 of 4)."""
    data = _data(case)
    model = kppo.PPO.load(SAVED / f"{case}.zip")
    if case.startswith("pendulum_vecnorm"):
        model.use_vec_normalize(SAVED / f"{case}.pkl")
    raw = data["obs"].astype(np.float32)
    for quantize in (None, "int8"):
        exported = kppo.export(
            model, tmp_path / f"{quantize}.tflite", quantize=quantize, batch_size=None, representative_obs=raw
        )
        got = np.asarray(TFLiteRunner(exported.path)(raw)).reshape(data["actions"].shape)
        if case == "cartpole":
            agreement = np.mean(got == data["actions"])
            assert agreement == 1.0 if quantize is None else agreement >= 0.99, agreement
        elif quantize is None:
            _close(got, data["actions"])
        else:
            assert np.abs(got - data["actions"]).max() <= 0.01 * 4.0


@pytest.mark.parametrize("case", ["gsde", "multidiscrete", "multibinary", "cnn", "maskable"])
def test_every_policy_kinds_float32_artifact_equals_sb3(case, tmp_path):
    """The other policy kinds' float32 artifacts, fed what SB3's policy read (the CNN's images CHW, as the saved
    model's observation space after SB3's VecTransposeImage; masks as the artifact's second input): SB3's
    deterministic actions, to float32 rounding for gSDE's Box."""
    data = _data(case)
    model = CASES[case].load(SAVED / f"{case}.zip")
    raw = _policy_obs(case, data) if case == "cnn" else data["obs"].astype(np.float32)
    exported = kppo.export(model, tmp_path / "f32.tflite", batch_size=None, representative_obs=None)
    runner = TFLiteRunner(exported.path)
    masks = data.get("action_masks")
    got = np.asarray(runner(raw) if masks is None else runner(raw, masks)).reshape(data["actions"].shape)
    if data["actions"].dtype.kind == "f":
        _close(got, data["actions"])
    else:
        np.testing.assert_array_equal(got, data["actions"])


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_an_sb3_contrib_cnn_lstm_save_exports_to_an_artifact_that_steps_as_sb3_did(quantize, tmp_path):
    """sb3-contrib's CnnLstmPolicy to a device: the artifact takes a CHW uint8 frame and the state, and stepped over
    the recorded sequence (the state carried, zeroed at episode starts, as the kit does) returns SB3's actions; the
    float32 state equals sb3-contrib's to float32 rounding (int8: >= 95% of actions, calibrated on these frames)."""
    data = _data("cnn_lstm")
    model = kppo.RecurrentPPO.load(SAVED / "cnn_lstm.zip")
    exported = kppo.export(model, tmp_path / "cnn_lstm.tflite", quantize=quantize, representative_obs=data["obs"])
    assert exported.metadata["inputs"][0]["shape"] == [1, 1, 36, 36] and exported.metadata["state"]["shape"] == [1, 8]
    runner, actions, states = TFLiteRunner(exported.path), [], []
    h = c = np.zeros((1, 8), np.float32)
    for obs, start in zip(data["obs"], data["episode_starts"]):
        if start:
            h = c = np.zeros((1, 8), np.float32)
        action, h, c = runner.step(obs[None], h, c)
        actions.append(int(np.ravel(action)[0]))
        states.append(h)
    agreement = np.mean(np.array(actions) == data["actions"])
    if quantize is None:
        assert agreement == 1.0
        _close(np.concatenate(states), data["state_h"].reshape(len(states), 8))
    else:
        assert agreement >= 0.95, agreement
        assert exported.metadata["parity"]["state_max_error"] < 0.2  # against kppo's float policy, 1,000 steps


def test_the_cli_exports_and_evaluates_sb3_saves(tmp_path, capsys):
    from kppo.cli.main import main

    out = tmp_path / "p.tflite"
    args = ["export", str(SAVED / "pendulum_vecnorm.zip"), "--vecnormalize", str(SAVED / "pendulum_vecnorm.pkl")]
    assert main([*args, "--out", str(out), "--batch-size", "0"]) == 0
    data = _data("pendulum_vecnorm")
    _close(np.asarray(TFLiteRunner(out)(data["obs"].astype(np.float32))).reshape(-1, 1), data["actions"])
    assert main(["eval", str(SAVED / "cartpole.zip"), "--env", "CartPole-v1", "--episodes", "1"]) == 0
    assert "CartPole-v1:" in capsys.readouterr().out
    assert main(["eval", str(SAVED / "cartpole.zip")]) == 2
    assert main(["export", str(SAVED / "dqn.zip")]) == 2
    err = capsys.readouterr().err
    assert "--env: expected a gymnasium id" in err and "holds a DQN model" in err


@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_the_weight_map_reads_nature_cnn_rows_and_separate_extractors(kind):
    """`tests/fixtures/sb3/cnn.npz` holds SB3 CnnPolicy state_dicts under torch names on 36x44x3 images (a 1x2 last
    feature map, so torch's CHW flatten and kppo's HWC differ), shared and separate: `sb3_pairs` maps both."""
    from kppo.sb3.saves.sb3_weights import assign_sb3_weights
    from tests.helpers.sb3_cnn import BlockImageEnv, cnn_data

    data = cnn_data()
    state_dict = {k[len(kind) + 1 :]: v for k, v in data.items() if k.startswith(f"{kind}.")}
    if kind == "shared":  # SB3's state_dict names the one extractor three times; the fixture keeps it once
        for alias in ("pi_features_extractor", "vf_features_extractor"):
            state_dict.update(
                {
                    k.replace("features_extractor", alias): v
                    for k, v in list(state_dict.items())
                    if k.startswith("features_extractor.")
                }
            )
    else:
        state_dict.update(
            {
                k.replace("pi_features_extractor", "features_extractor"): v
                for k, v in list(state_dict.items())
                if k.startswith("pi_features_extractor.")
            }
        )
    kwargs = None if kind == "shared" else dict(share_features_extractor=False)
    model = kppo.PPO("CnnPolicy", kppo.make_vec_env(BlockImageEnv, n_envs=1, seed=0), policy_kwargs=kwargs, seed=0)
    assign_sb3_weights(model.agent, state_dict, "cnn.npz")
    obs = tf.constant(data["obs_hwc"].reshape(len(data["obs_hwc"]), -1))
    _close(model.agent.actor(obs).numpy(), data[f"{kind}:logits"])
    _close(model.agent.critic(obs).numpy().reshape(-1), data[f"{kind}:values"])
    model.env.close()
