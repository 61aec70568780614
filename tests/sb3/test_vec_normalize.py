"""`kppo.VecNormalize`: SB3's normalization wrapper, with the statistics kept (and saved, frozen, exported) by the
model."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import PPO, VecNormalize, make_vec_env
from kppo._tf import tf

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


def test_clip_obs_clip_reward_and_epsilon_are_the_models_and_travel_with_its_files(tmp_path):
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), clip_obs=0.5, clip_reward=2)
    env.epsilon = 1e-3  # settable before a model takes the env, as SB3's attribute
    model = PPO("MlpPolicy", env, **FAST)
    assert (model.config.clip_obs, model.config.clip_reward, model.config.norm_epsilon) == (0.5, 2.0, 1e-3)
    model.learn(64)
    assert model.rollout_buffer.observations.max() == pytest.approx(0.5)  # the rollout's inputs are clipped
    assert np.abs(model.rollout_buffer.rewards).max() <= 2.0 + 1e-6
    obs = env.reset()
    np.testing.assert_allclose(
        env.normalize_obs(obs), np.clip((obs - env.obs_rms.mean) / np.sqrt(env.obs_rms.var + 1e-3), -0.5, 0.5)
    )
    env.clip_obs = 0.5  # the same value: nothing changes
    with pytest.raises(ValueError, match=r"^clip_obs: the model using this env was built with 0.5, got 3.0 \(set it"):
        env.clip_obs = 3.0
    model.save(tmp_path / "model")
    env.save(tmp_path / "vecnormalize.json")
    assert PPO.load(tmp_path / "model").config.clip_obs == 0.5
    loaded = VecNormalize.load(tmp_path / "vecnormalize.json", make_vec_env("Pendulum-v1", n_envs=2, seed=3))
    assert (loaded.clip_obs, loaded.clip_reward, loaded.epsilon) == (0.5, 2.0, 1e-3)
    exported = kppo.export(PPO.load(tmp_path / "model", env=loaded), tmp_path / "policy.tflite")
    assert exported.metadata["normalization"]["clip"] == 0.5 and exported.metadata["normalization"]["epsilon"] == 1e-3


@pytest.fixture(scope="module")
def trained():
    """`_model()` (norm_obs and norm_reward) after 128 steps, shared by the tests that only read it: (model, env)."""
    model, env = _model()
    model.learn(128)
    return model, env


def test_save_and_load_round_trip_the_statistics_into_a_loaded_model(tmp_path, trained):
    model, env = trained
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


def test_exports_bake_the_statistics_in(tmp_path, trained):
    model, env = trained
    exported = kppo.export(model, tmp_path / "policy.tflite")
    assert exported.metadata["normalization"]["enabled"]
    np.testing.assert_allclose(exported.metadata["normalization"]["mean"], env.obs_rms.mean, rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(clip_obs=-5.0), "^clip_obs: expected a positive finite number, got -5.0$"),
        (dict(clip_reward="1"), "^clip_reward: expected a positive finite number, got '1'$"),
        (dict(epsilon=float("nan")), "^epsilon: expected a positive finite number, got nan$"),
        (dict(clip_obs=True), "^clip_obs: expected a positive finite number, got True$"),
        (
            dict(norm_obs_keys=["a"]),
            r"^norm_obs_keys: expected None for a Box observation space \(the param is applicable only with Dict",
        ),
    ],
)
def test_settings_kppo_does_not_support_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), **kwargs)


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^venv: expected a VecEnv .* or a gymnasium VectorEnv, got str$"):
        VecNormalize("Pendulum-v1")
    with pytest.raises(ValueError, match=r"^gamma: expected a number in \[0, 1\], got 1.5$"):
        VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), gamma=1.5)
    bad = tmp_path / "stats.pkl"
    bad.write_bytes(b"\x80\x04not json")  # a pickle's first bytes: read as SB3's vec_normalize.pkl, refused as one
    with pytest.raises(ValueError, match=r"stats.pkl': expected a complete pickle, got bytes that are not one"):
        VecNormalize.load(bad, make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    bad.write_bytes(b"not json")
    with pytest.raises(ValueError, match=r"load_path: expected a JSON file written by kppo.VecNormalize.save or SB3"):
        VecNormalize.load(bad, make_vec_env("Pendulum-v1", n_envs=1, seed=0))


class Dashboard(gym.Env):
    """A camera frame, a speed vector and a gear: random every step."""

    observation_space = gym.spaces.Dict(
        {
            "camera": gym.spaces.Box(0, 255, (8, 8, 1), np.uint8),
            "gear": gym.spaces.Box(0.0, 50.0, (1,), np.float32),
            "speed": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, True, {}


def test_images_in_a_dict_are_never_standardized_and_norm_obs_keys_choose_the_rest(tmp_path):
    """The default: every key but the images; SB3's `norm_obs_keys` narrow it. The rollout's camera columns hold the
    raw bytes (the CNN divides them by 255), the others the normalized values; the exported artifact agrees."""
    for keys, normalized in ((None, ("gear", "speed")), (["speed"], ("speed",))):
        env = VecNormalize(make_vec_env(Dashboard, n_envs=2, seed=0), norm_reward=False, norm_obs_keys=keys)
        model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0).learn(32)
        assert model.config.normalize_obs_keys == (None if keys is None else tuple(keys))
        columns = model._get_policy().obs_scaling.columns  # camera 64, gear 1, speed 2: the Dict's key order
        np.testing.assert_array_equal(columns, [False] * 64 + [("gear" in normalized)] + [True, True])
        obs = model.rollout_buffer.observations.reshape(32, -1)
        assert np.all(obs[:, :64] == np.round(obs[:, :64])) and obs[:, :64].max() > 200  # bytes, not z-scores
        assert np.abs(obs[:, 64]).max() <= 10 if "gear" in normalized else obs[:, 64].max() > 10
        frame = Dashboard().reset(seed=3)[0]
        policy = model._get_policy()
        flat = policy._batched(frame)[0]
        mean, var = policy.obs_scaling.mean, policy.obs_scaling.var
        want = np.where(columns, np.clip((flat - mean) / np.sqrt(var + 1e-8), -10, 10), flat)
        np.testing.assert_allclose(policy.normalize(tf.constant(flat)).numpy(), want, rtol=1e-6, atol=1e-6)
        exported = kppo.export(model, tmp_path / f"{keys}.tflite")
        assert exported.metadata["parity"]["max_error"] == 0.0
        env.save(tmp_path / "vecnormalize.json")
        assert VecNormalize.load(tmp_path / "vecnormalize.json", make_vec_env(Dashboard, n_envs=1)).norm_obs_keys == (
            None if keys is None else tuple(keys)
        )
        model.save(tmp_path / "model")
        loaded = PPO.load(tmp_path / "model")
        np.testing.assert_array_equal(loaded._get_policy().obs_scaling.columns, columns)


def test_norm_obs_keys_name_keys_of_the_dict():
    env = VecNormalize(make_vec_env(Dashboard, n_envs=1, seed=0), norm_obs_keys=["sped"])
    with pytest.raises(ValueError, match=r"^normalize_obs_keys: expected keys of the observation space \['camera', "):
        PPO("MultiInputPolicy", env, n_steps=16, batch_size=16, seed=0)


def test_the_env_side_api_of_sb3s_vecnormalize():
    """SB3's RunningMeanStd before training (mean 0, var 1, count 1e-4), `normalize_reward` / the unnormalizers with
    SB3's formulas, and the raw observations and rewards of the last step through SB3's API."""
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    fresh = env.obs_rms
    assert fresh.mean.tolist() == [0.0] * 3 and fresh.var.tolist() == [1.0] * 3 and fresh.count == 1e-4
    assert env.ret_rms.count == 1e-4 and env.ret_rms.var == 1.0
    model = PPO("MlpPolicy", env, **FAST)
    model.learn(128)
    obs = env.reset()
    np.testing.assert_array_equal(env.get_original_obs(), obs)
    next_obs, rewards, _, _ = env.step(np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(env.get_original_obs(), next_obs)
    np.testing.assert_array_equal(env.get_original_reward(), rewards)
    scale = np.sqrt(env.ret_rms.var + 1e-8)
    np.testing.assert_allclose(env.normalize_reward(rewards), np.clip(rewards / scale, -10, 10))
    np.testing.assert_allclose(env.unnormalize_reward(env.normalize_reward(rewards)), rewards, rtol=1e-5)
    np.testing.assert_allclose(env.unnormalize_obs(env.normalize_obs(next_obs)), next_obs, rtol=1e-5, atol=1e-6)
    env.norm_reward = False
    np.testing.assert_array_equal(env.normalize_reward(rewards), rewards)


def test_a_wrapper_on_its_own_saves_and_loads_its_statistics_bit_for_bit_and_scales_rewards_to_float32(tmp_path):
    """SB3's test_vec_env and test_get_original: statistics gathered in float64 by the wrapper alone are those a
    load returns, every bit (SB3 pickles them; kppo writes JSON); a normalized reward is float32, the dtype of the
    raw one (SB3 casts what its float64 statistics give)."""
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), clip_obs=0.5, clip_reward=5.0)
    env.reset()
    for _ in range(20):
        _, rewards, _, _ = env.step(np.zeros((1, 1), np.float32))
    assert rewards.dtype == env.get_original_reward().dtype == np.float32
    env.save(tmp_path / "vec_normalize.json")
    loaded = VecNormalize.load(tmp_path / "vec_normalize.json", make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    for saved, read in ((env.obs_rms, loaded.obs_rms), (env.ret_rms, loaded.ret_rms)):
        assert read.mean.dtype == np.float64
        np.testing.assert_array_equal(read.mean, saved.mean)
        np.testing.assert_array_equal(read.var, saved.var)
        assert read.count == saved.count
    assert loaded.normalize_reward(np.ones(1, np.float32)).dtype == np.float32


def _sampling_env(observation_space: gym.spaces.Space, reward: float) -> type[gym.Env]:
    """An env class whose observations are samples of `observation_space` and whose reward is always `reward`."""

    class Sampling(gym.Env):
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), reward, False, False, {}

    Sampling.observation_space = observation_space
    return Sampling


_ImageDictEnv = _sampling_env(
    gym.spaces.Dict(
        {"img": gym.spaces.Box(0, 255, (12, 12, 1), np.uint8), "vec": gym.spaces.Box(-1, 1, (3,), np.float32)}
    ),
    0.0,
)


def test_a_normalized_image_key_is_a_float32_box_as_sb3s_vecnormalize():
    """SB3's VecNormalize (its issue 1214): a normalized image's space is Box(-clip_obs, clip_obs) float32."""
    env = VecNormalize(make_vec_env(_ImageDictEnv, n_envs=1), norm_obs_keys=["img", "vec"], clip_obs=5.0)
    space = env.observation_space["img"]
    assert space.dtype == np.float32 and space.shape == (12, 12, 1) and space.low.min() == -5.0
    obs = env.reset()
    assert obs["img"].dtype == np.float32 and obs["img"][0] in space  # what the wrapper returns on its own
    untouched = VecNormalize(make_vec_env(_ImageDictEnv, n_envs=1))  # kppo's default keys leave the image
    assert untouched.observation_space["img"].dtype == np.uint8
    frozen = VecNormalize(make_vec_env(_ImageDictEnv, n_envs=1), norm_obs=False, norm_obs_keys=["img"])
    assert frozen.observation_space["img"].dtype == np.uint8


def _sb3_return_variance(episode_starts: np.ndarray, gamma: float) -> tuple[float, float]:
    """(ret_rms.var, ret_rms.count) after SB3's VecNormalize steps a rollout of reward 1 at every step
    (`returns = returns * gamma + reward`, `ret_rms.update(returns)`, `returns[dones] = 0`), in float64."""
    returns = np.zeros(episode_starts.shape[1])
    mean, var, count = 0.0, 1.0, 1e-4
    for t in range(episode_starts.shape[0]):
        returns = returns * gamma + 1.0
        batch_mean, batch_var, n = returns.mean(), returns.var(), returns.size
        delta, total = batch_mean - mean, count + n
        var = (var * count + batch_var * n + delta**2 * count * n / total) / total
        mean, count = mean + delta * n / total, total
        if t + 1 < episode_starts.shape[0]:
            returns[episode_starts[t + 1]] = 0.0
    return var, count


def test_the_reward_scaling_discounts_with_the_vec_normalizes_gamma_not_ppos():
    # SB3 keeps the two apart: PPO's gamma for the advantages, the wrapper's for the return whose std scales rewards
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=2, seed=0), norm_obs=False, gamma=0.9)
    model = PPO("MlpPolicy", env, gamma=0.999, **{**FAST, "n_steps": 64, "batch_size": 64})
    model.learn(64)  # one rollout: the return statistics are those of its 64 steps
    assert (model.config.gamma, model.config.norm_gamma) == (0.999, 0.9)
    starts = model.rollout_buffer.episode_starts.astype(bool)
    assert starts[1:].any()  # episodes end inside the rollout, where the running return restarts
    var, count = _sb3_return_variance(starts, 0.9)
    assert float(env.ret_rms.count) == pytest.approx(count)
    np.testing.assert_allclose(env.ret_rms.var, var, rtol=1e-5)
    assert not np.isclose(_sb3_return_variance(starts, 0.999)[0], var, rtol=1e-2)  # the test tells the two apart
    env.close()


def test_gamma_is_the_models_once_a_model_takes_the_env():
    env = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=0), gamma=0.9)
    env.gamma = 0.95  # before a model: the wrapper's own
    model = PPO("MlpPolicy", env, **FAST)
    assert env.gamma == model.config.norm_gamma == 0.95
    env.gamma = 0.95
    with pytest.raises(ValueError, match=r"^gamma: the model using this env was built with 0.95, got 0.5 \(set it"):
        env.gamma = 0.5
    env.close()


def test_a_discrete_observation_is_refused_for_norm_obs_and_steps_with_rewards_alone():
    # SB3's test_discrete_obs: its ValueError says VecNormalize "only supports" Box and Dict; norm_obs=False runs
    with pytest.raises(ValueError, match=r"^norm_obs: VecNormalize only supports Box and Dict observation spaces, got"):
        VecNormalize(make_vec_env("CliffWalking-v1", n_envs=1, seed=0))
    env = VecNormalize(make_vec_env("CliffWalking-v1", n_envs=2, seed=0), norm_obs=False)
    obs = env.reset()
    for _ in range(3):
        obs, reward, _, _ = env.step(np.array([0, 1]))
    assert obs.shape == (2,) and reward.shape == (2,) and np.all(np.abs(reward) <= env.clip_reward)
    env.close()


_MixedDict = _sampling_env(
    gym.spaces.Dict({"position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "mode": gym.spaces.Discrete(3)}), 1.0
)


def test_a_dict_with_a_discrete_key_steps_with_statistics_in_the_networks_layout():
    # kppo's default normalizes every key but the images, a Discrete key's one-hot columns too (SB3 asks for
    # norm_obs_keys instead); the wrapper's rows are laid out as the networks' (one-hot) to match its statistics
    for kwargs in (dict(), dict(norm_obs_keys=["position"]), dict(norm_obs=False)):
        env = VecNormalize(kppo.DummyVecEnv([_MixedDict]), **kwargs)
        first = env.reset()
        obs = env.step(np.array([1]))[0]
        raw = env.get_original_obs()
        assert obs["mode"] == raw["mode"] and first["mode"].shape == (1,)  # the Discrete key as it is
        if env.norm_obs:  # the Box key standardized by its own columns (gymnasium sorts the keys: the one-hot first)
            mean, var = env.obs_rms.mean[3:], env.obs_rms.var[3:]
            np.testing.assert_allclose(obs["position"], (raw["position"] - mean) / np.sqrt(var + 1e-8), rtol=1e-5)
            assert env.obs_rms.mean.shape == (5,)
        env.close()
