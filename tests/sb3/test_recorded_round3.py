"""More models Stable-Baselines3 2.9.2 / sb3-contrib 2.9.2 saved (`tests/fixtures/sb3/saved`, made by
`record_sb3_round3.py` in the peer venv), read by kppo without torch and compared with what SB3 computed: a CnnPolicy
fed HWC frames (SB3's VecTransposeImage), sb3-contrib's CnnLstmPolicy fed HWC frames, a reward-only VecNormalize
(norm_obs=False), a VecNormalize pickled with `training=True` that goes on counting, and an ELU network behind
`VecNormalize(clip_obs=3)` whose clip binds. Deterministic actions, values and log-probabilities equal SB3's to float32
rounding (`test_sb3_saves.py`'s tolerance), and the float32 artifacts return SB3's actions."""

import numpy as np
import pytest

import kppo
from kppo.exporter.runner import TFLiteRunner
from tests.helpers.sb3_reference import SAVED

#: float32 rounding of the values, log-probabilities and Box actions (|error| <= TOL * max(1, |SB3's|))
TOL = 1e-5


def _data(case: str) -> dict[str, np.ndarray]:
    return dict(np.load(SAVED / f"{case}.npz"))


def _close(got, want, tol: float = TOL) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=0, atol=tol * max(1.0, np.abs(want).max()))


def _all_log_probs(model, obs: np.ndarray, n: int) -> np.ndarray:
    """[N, n]: the log-probability of each of the `n` actions at `obs` (`policy.evaluate_actions`)."""
    rows = len(obs)
    return np.stack(
        [np.asarray(model.policy.evaluate_actions(obs, np.full(rows, k))[1]).reshape(rows) for k in range(n)], 1
    )


# --- CnnPolicy on HWC frames ----------------------------------------------------------------------------------------


def test_a_cnn_policy_trained_on_hwc_frames_predicts_sb3s_actions_from_hwc_and_chw_frames():
    """SB3 wrapped the (36, 44, 3) env in VecTransposeImage: the saved space is CHW, and SB3's `predict` takes the
    env's HWC frames too (it transposes them). kppo's `predict`, values and log-probabilities, from either layout."""
    data = _data("cnn_hwc")
    model = kppo.PPO.load(SAVED / "cnn_hwc.zip")
    hwc = data["obs"]
    assert hwc.shape[1:] == (36, 44, 3)
    for obs in (hwc, hwc.transpose(0, 3, 1, 2)):
        actions, _ = model.predict(obs, deterministic=True)
        np.testing.assert_array_equal(np.reshape(actions, -1), data["actions"])
        _close(model.policy.predict_values(obs), data["values"])
        _close(_all_log_probs(model, obs, 3), data["log_probs"])


def test_a_cnn_policy_trained_on_hwc_frames_predicts_one_hwc_frame():
    data = _data("cnn_hwc")
    model = kppo.PPO.load(SAVED / "cnn_hwc.zip")
    for frame, want in zip(data["obs"][:4], data["actions"][:4]):
        action, _ = model.predict(frame, deterministic=True)
        assert int(np.ravel(action)[0]) == int(want)


def test_the_float32_artifact_of_the_hwc_cnn_returns_sb3s_actions(tmp_path):
    """Fed what the saved model's observation space holds (CHW, after SB3's VecTransposeImage), as
    `test_sb3_saves.py` feeds `cnn.zip`'s artifact."""
    data = _data("cnn_hwc")
    model = kppo.PPO.load(SAVED / "cnn_hwc.zip")
    exported = kppo.export(model, tmp_path / "f32.tflite", batch_size=None, representative_obs=None)
    got = np.asarray(TFLiteRunner(exported.path)(data["obs"].transpose(0, 3, 1, 2)))
    np.testing.assert_array_equal(got.reshape(-1), data["actions"])


# --- the recurrent CNN (cnn_lstm.zip, sb3-contrib's CnnLstmPolicy) on HWC frames -------------------------------------


def test_a_recurrent_cnn_predicts_sb3s_actions_and_states_from_hwc_frames():
    """`cnn_lstm.npz` recorded the frames CHW; `record_sb3_round3.py` checks that sb3-contrib's `predict` gives the
    same actions from the HWC frames (its `obs_to_tensor` transposes them), so kppo must too."""
    data = _data("cnn_lstm")
    model = kppo.RecurrentPPO.load(SAVED / "cnn_lstm.zip")
    actions, state, states = [], None, []
    for obs, start in zip(data["obs"], data["episode_starts"]):
        action, state = model.predict(
            obs.transpose(1, 2, 0)[None], state=state, episode_start=np.array([start]), deterministic=True
        )
        actions.append(int(np.ravel(action)[0]))
        states.append(state)
    np.testing.assert_array_equal(actions, data["actions"])
    for k, name in enumerate(("state_h", "state_c")):
        _close(np.stack([s[k] for s in states]), data[name])


# --- VecNormalize(norm_obs=False): rewards only ----------------------------------------------------------------------


def test_a_reward_only_vec_normalize_pkl_loads_with_its_settings_and_reward_scale():
    data = _data("pendulum_reward_only")
    wrapper = kppo.VecNormalize.load(SAVED / "pendulum_reward_only.pkl", kppo.make_vec_env("Pendulum-v1", n_envs=1))
    assert (wrapper.norm_obs, wrapper.norm_reward) == (False, True)
    assert wrapper.clip_reward == pytest.approx(float(data["clip_reward"]))
    assert wrapper.epsilon == pytest.approx(float(data["epsilon"]))
    np.testing.assert_allclose(wrapper.ret_rms.var, data["ret_rms_var"], rtol=1e-6)
    assert wrapper.ret_rms.count == pytest.approx(float(data["ret_rms_count"]))
    _close(wrapper.normalize_reward(data["rewards"]), data["normalized_rewards"])
    np.testing.assert_array_equal(wrapper.normalize_obs(data["obs"]), data["obs"])
    wrapper.close()


def test_a_reward_only_vec_normalize_leaves_the_policy_on_raw_observations():
    """The model with the wrapper as its env, and the model with the pickle frozen in (`use_vec_normalize`): SB3's
    actions, values and log-probabilities from the raw observations."""
    data = _data("pendulum_reward_only")
    wrapper = kppo.VecNormalize.load(SAVED / "pendulum_reward_only.pkl", kppo.make_vec_env("Pendulum-v1", n_envs=1))
    with_env = kppo.PPO.load(SAVED / "pendulum_reward_only.zip", env=wrapper)
    frozen = kppo.PPO.load(SAVED / "pendulum_reward_only.zip")
    frozen.use_vec_normalize(SAVED / "pendulum_reward_only.pkl")
    for model in (with_env, frozen):
        _close(model.predict(data["obs"], deterministic=True)[0], data["actions"])
        values, log_prob, _ = model.policy.evaluate_actions(data["obs"], data["mean_actions"])
        _close(values, data["values"])
        _close(log_prob, data["log_probs"])
    with_env.env.close()


def test_the_float32_artifact_of_a_reward_only_vec_normalize_model_takes_raw_observations(tmp_path):
    data = _data("pendulum_reward_only")
    model = kppo.PPO.load(SAVED / "pendulum_reward_only.zip")
    model.use_vec_normalize(SAVED / "pendulum_reward_only.pkl")
    raw = data["obs"].astype(np.float32)
    exported = kppo.export(model, tmp_path / "f32.tflite", batch_size=None, representative_obs=raw)
    _close(np.asarray(TFLiteRunner(exported.path)(raw)), data["actions"])


# --- VecNormalize pickled with training=True ------------------------------------------------------------------------


def test_a_vec_normalize_pickled_while_training_loads_training_with_its_statistics():
    data = _data("pendulum_vecnorm_training")
    wrapper = kppo.VecNormalize.load(
        SAVED / "pendulum_vecnorm_training.pkl", kppo.make_vec_env("Pendulum-v1", n_envs=1)
    )
    assert wrapper.training is True and wrapper.norm_obs and wrapper.norm_reward
    np.testing.assert_allclose(wrapper.obs_rms.mean, data["obs_rms_mean"], rtol=1e-6)
    np.testing.assert_allclose(wrapper.obs_rms.var, data["obs_rms_var"], rtol=1e-6)
    assert wrapper.obs_rms.count == pytest.approx(float(data["obs_rms_count"]))
    np.testing.assert_allclose(wrapper.ret_rms.var, data["ret_rms_var"], rtol=1e-6)
    _close(wrapper.normalize_obs(data["obs"]), data["normalized_obs"])
    model = kppo.PPO.load(SAVED / "pendulum_vecnorm_training.zip", env=wrapper)
    _close(model.predict(data["obs"], deterministic=True)[0], data["actions"])
    values, log_prob, _ = model.policy.evaluate_actions(data["obs"], data["mean_actions"])
    _close(values, data["values"])
    _close(log_prob, data["log_probs"])
    model.env.close()


def test_a_vec_normalize_pickled_while_training_goes_on_counting_as_sb3s():
    """SB3's `VecNormalize.load` over `make_vec_env("Pendulum-v1", n_envs=1, seed=11)`, reset, 16 steps: kppo's
    wrapper returns the same observations and rewards and ends with the same statistics."""
    data = _data("pendulum_vecnorm_training")
    wrapper = kppo.VecNormalize.load(
        SAVED / "pendulum_vecnorm_training.pkl", kppo.make_vec_env("Pendulum-v1", n_envs=1, seed=11)
    )
    obs = wrapper.reset()
    _close(wrapper.get_original_obs(), data["cont_raw_obs"][0])
    _close(obs, data["cont_obs"][0])
    for t, action in enumerate(data["cont_actions"]):
        obs, reward, _, _ = wrapper.step(action)
        _close(wrapper.get_original_obs(), data["cont_raw_obs"][t + 1])
        _close(obs, data["cont_obs"][t + 1])
        _close(wrapper.get_original_reward(), data["cont_raw_rewards"][t])
        _close(reward, data["cont_rewards"][t])
    np.testing.assert_allclose(wrapper.obs_rms.mean, data["cont_obs_rms_mean"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(wrapper.obs_rms.var, data["cont_obs_rms_var"], rtol=1e-5)
    assert wrapper.obs_rms.count == pytest.approx(float(data["cont_obs_rms_count"]))
    np.testing.assert_allclose(wrapper.ret_rms.var, data["cont_ret_rms_var"], rtol=1e-5)
    assert wrapper.ret_rms.count == pytest.approx(float(data["cont_ret_rms_count"]))
    wrapper.close()


# --- an ELU network behind VecNormalize(clip_obs=3) -----------------------------------------------------------------


def test_an_elu_network_behind_clip_obs_3_equals_sb3():
    """The clip binds on the recorded observations (drawn from CartPole's space): kppo's normalization, actions,
    values and both actions' log-probabilities from the raw observations."""
    data = _data("elu_clip3")
    assert (np.abs(data["normalized_obs"]) == 3.0).any()
    wrapper = kppo.VecNormalize.load(SAVED / "elu_clip3.pkl", kppo.make_vec_env("CartPole-v1", n_envs=1))
    assert wrapper.clip_obs == pytest.approx(3.0)
    _close(wrapper.normalize_obs(data["obs"]), data["normalized_obs"])
    model = kppo.PPO.load(SAVED / "elu_clip3.zip", env=wrapper)
    assert model.config.clip_obs == pytest.approx(3.0)
    actions, _ = model.predict(data["obs"], deterministic=True)
    np.testing.assert_array_equal(np.reshape(actions, -1), data["actions"])
    _close(model.policy.predict_values(data["obs"]), data["values"])
    _close(_all_log_probs(model, data["obs"], 2), data["log_probs"])
    model.env.close()


def test_the_float32_artifact_of_the_elu_clip_obs_3_model_takes_raw_observations(tmp_path):
    data = _data("elu_clip3")
    model = kppo.PPO.load(SAVED / "elu_clip3.zip")
    model.use_vec_normalize(SAVED / "elu_clip3.pkl")
    raw = data["obs"].astype(np.float32)
    exported = kppo.export(model, tmp_path / "f32.tflite", batch_size=None, representative_obs=raw)
    got = np.asarray(TFLiteRunner(exported.path)(raw)).reshape(-1)
    np.testing.assert_array_equal(got, data["actions"])
