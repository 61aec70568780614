"""`kppo.VecNormalize`: SB3's normalization wrapper, with the statistics kept (and saved, frozen, exported) by the
model."""

import numpy as np
import pytest

import kppo
from kppo import PPO, VecNormalize, make_vec_env

FAST = dict(n_steps=32, batch_size=32, n_epochs=1, seed=0, policy_kwargs=dict(net_arch=[16]))


def _model(**wrapper):
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), **wrapper)
    return PPO("MlpPolicy", env, **FAST), env


def test_an_sb3_vecnormalize_program_normalizes_inside_the_model():
    model, env = _model(norm_obs=True, norm_reward=True)
    model.learn(128)
    assert model.config.normalize_obs and model.config.normalize_reward and model.get_env() is env
    # the model's statistics: 1e-4 + the reset observations of 2 envs + 2 per step; returns: 2 per step
    assert env.obs_rms.count == pytest.approx(1e-4 + 2 + 128) and env.ret_rms.count == pytest.approx(1e-4 + 128)
    env.seed(1)
    obs = env.reset()  # SB3's VecEnv API: the observations alone
    assert np.abs(obs).max() <= 8.0 + 1e-6  # raw Pendulum observations pass through (the model normalizes)
    np.testing.assert_allclose(
        env.normalize_obs(obs), np.clip((obs - env.obs_rms.mean) / np.sqrt(env.obs_rms.var + 1e-8), -10, 10)
    )
    mean, _ = kppo.evaluate_policy(model, env, n_eval_episodes=2, warn=False)
    assert np.isfinite(mean)


def test_norm_flags_carry_over_and_off_means_off():
    model, _ = _model(norm_obs=True, norm_reward=False)
    assert model.config.normalize_obs and not model.config.normalize_reward
    plain = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), **FAST)
    assert not plain.config.normalize_obs and not plain.config.normalize_reward


def test_save_and_load_round_trip_the_statistics_into_a_loaded_model(tmp_path):
    model, env = _model()
    model.learn(128)
    model.save(tmp_path / "model")
    env.save(tmp_path / "vecnormalize.json")
    loaded_env = VecNormalize.load(tmp_path / "vecnormalize.json", make_vec_env("Pendulum-v1", n_envs=2, seed=3))
    np.testing.assert_allclose(loaded_env.obs_rms.mean, env.obs_rms.mean, rtol=1e-6)
    assert loaded_env.norm_obs and loaded_env.norm_reward and loaded_env.training
    loaded_env.training, loaded_env.norm_reward = False, False  # what SB3 users do before evaluating
    restored = PPO.load(tmp_path / "model", env=loaded_env)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        restored.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0]
    )
    with pytest.raises(ValueError, match=r"VecNormalize.training: expected True while learning"):
        restored.learn(64)


def test_exports_bake_the_statistics_in(tmp_path):
    model, env = _model()
    model.learn(64)
    exported = kppo.export(model, tmp_path / "policy.tflite")
    assert exported.metadata["normalization"]["enabled"]
    np.testing.assert_allclose(exported.metadata["normalization"]["mean"], env.obs_rms.mean, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(clip_obs=5.0), "clip_obs: kppo normalizes with 10, got 5.0"),
        (dict(clip_reward=1.0), "clip_reward: kppo normalizes with 10, got 1.0"),
        (dict(epsilon=1e-4), "epsilon: kppo normalizes with 1e-08, got 0.0001"),
        (dict(norm_obs_keys=["a"]), "norm_obs_keys: kppo normalizes every observation key"),
    ],
)
def test_settings_kppo_does_not_support_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), **kwargs)


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^venv: expected a VecEnv .* or a gymnasium VectorEnv, got str$"):
        VecNormalize("Pendulum-v1")
    with pytest.raises(ValueError, match=r"VecNormalize.gamma: kppo scales rewards with PPO's gamma \(0.99\), got 0.9"):
        PPO("MlpPolicy", VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), gamma=0.9), **FAST)
    bad = tmp_path / "stats.pkl"
    bad.write_bytes(b"\x80\x04not json")
    with pytest.raises(ValueError, match=r"load_path: expected a JSON file written by VecNormalize.save"):
        VecNormalize.load(bad, make_vec_env("Pendulum-v1", n_envs=1, seed=0))
