"""SB3's contracts kppo meets (issue 54): HWC frames for a CHW policy, loads and `set_env` that touch no statistics
(SB3 resets in `learn`), reward-only VecNormalize files, VecNormalize's env side on its own and shared with a model,
and env checks no stricter than SB3's. References are SB3's documented rules written out in plain numpy here (no
stable-baselines3 in this environment), not kppo's code."""

import struct
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import PPO, BaseCallback, VecNormalize, make_vec_env

SAVED = Path(__file__).parents[1] / "fixtures" / "sb3" / "saved"
FAST = dict(n_steps=16, batch_size=16, n_epochs=1, seed=0, policy_kwargs=dict(net_arch=[8]))


class SB3RunningMeanStd:
    """SB3's `RunningMeanStd` update rule written out naively in float64 (common/running_mean_std.py)."""

    def __init__(self, shape=()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, batch):
        batch = np.asarray(batch, np.float64)
        batch_mean, batch_var, batch_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.mean, self.var, self.count = self.mean + delta * batch_count / total, m2 / total, total


def test_an_hwc_frame_is_transposed_for_a_chw_policy_as_sb3s_maybe_transpose():
    """SB3's cnn.zip was trained through VecTransposeImage (its policy reads CHW); users pass the env's HWC frames."""
    data = np.load(SAVED / "cnn.npz")
    model = PPO.load(SAVED / "cnn.zip")
    assert model.observation_space.shape == (1, 36, 36)
    hwc = data["obs"]
    assert hwc.shape[1:] == (36, 36, 1)
    chw = hwc.transpose(0, 3, 1, 2)
    want = model.predict(chw, deterministic=True)[0]
    np.testing.assert_array_equal(model.predict(hwc, deterministic=True)[0], want)
    np.testing.assert_array_equal(model.predict(hwc[0], deterministic=True)[0], want[0])  # one frame
    np.testing.assert_array_equal(want.ravel(), np.asarray(data["actions"]).ravel())  # what SB3's policy chose
    np.testing.assert_allclose(model.policy.obs_to_tensor(hwc)[0], model.policy.obs_to_tensor(chw)[0])
    with pytest.raises(
        ValueError, match=r"^Error: Unexpected observation shape .*\(obs: expected shape"
    ):  # neither layout
        model.predict(np.zeros((2, 36, 35, 1), np.uint8))


def test_load_and_set_env_leave_a_vecnormalizes_statistics_alone_and_learn_resets_first():
    """SB3 resets in `learn` (`_setup_learn`), not in `load` or `set_env`: a training-mode VecNormalize keeps its
    count until then, and `_last_obs` exists from the first `learn` on."""
    wrapper = VecNormalize.load(SAVED / "pendulum_vecnorm.pkl", make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    wrapper.training = True  # as a pickle saved while training holds it (this one was saved frozen)
    count, mean = wrapper.obs_rms.count, wrapper.obs_rms.mean.copy()
    model = PPO.load(SAVED / "pendulum_vecnorm.zip", env=wrapper, n_steps=16, batch_size=16, n_epochs=1)
    assert wrapper.obs_rms.count == pytest.approx(count, rel=1e-7) and model._last_obs is None  # float32 in the model
    model.set_env(wrapper)
    model.predict(np.zeros((1, 3), np.float32))
    kppo.evaluate_policy(model, model.get_env(), n_eval_episodes=1, warn=False)
    assert wrapper.obs_rms.count == pytest.approx(count, rel=1e-7)
    np.testing.assert_array_equal(wrapper.obs_rms.mean, mean.astype(np.float32))  # the loaded mean, held in float32
    model.learn(16)
    assert model._last_obs is not None and model._last_obs.shape == (1, 3)
    assert wrapper.obs_rms.count == pytest.approx(count + 1 + 16)  # learn's reset, then one per step


def test_set_env_of_the_models_own_env_without_force_reset_goes_on_from_the_last_observations():
    """SB3's test_set_env: `set_env(env2, force_reset=True)` discards `_last_obs`; `set_env(model.get_env(),
    force_reset=False)` keeps it, and the next learn continues the same rollouts."""
    model = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), **FAST)
    model.learn(16)
    model.set_env(make_vec_env("Pendulum-v1", n_envs=1, seed=1), force_reset=True)
    assert model._last_obs is None
    model.learn(16)
    last = model._last_obs.copy()
    model.set_env(model.get_env(), force_reset=False)
    np.testing.assert_array_equal(model._last_obs, last)
    model.learn(16, reset_num_timesteps=False)
    assert model.num_timesteps == 32


def test_plain_models_reset_their_env_only_when_learning():
    resets = []

    class Counting(gym.Wrapper):
        def reset(self, **kwargs):
            resets.append(1)
            return super().reset(**kwargs)

    model = PPO("MlpPolicy", Counting(gym.make("Pendulum-v1")), **FAST)
    model.predict(np.zeros(3, np.float32))
    assert resets == [] and model._last_obs is None
    model.learn(16)
    assert len(resets) == 1 and model._last_obs.shape == (1, 3)


def _text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _float(value: float) -> bytes:
    return b"G" + struct.pack(">d", value)


def _reward_only_pickle(mean: float, var: float, count: float) -> bytes:
    """SB3's `VecNormalize(norm_obs=False).save` as hand-written opcodes (never given to `pickle`): the wrapper's
    state with settings and `ret_rms`, and no `obs_rms` (SB3 builds none without norm_obs)."""
    rms = (
        b"cstable_baselines3.common.running_mean_std\nRunningMeanStd\n)\x81}("
        + _text("mean")
        + _float(mean)
        + _text("var")
        + _float(var)
        + _text("count")
        + _float(count)
        + b"ub"
    )
    settings = _text("norm_obs") + b"\x89" + _text("norm_reward") + b"\x88" + _text("training") + b"\x88"
    settings += _text("gamma") + _float(0.99) + _text("clip_reward") + _float(10.0)
    return (
        b"\x80\x02cstable_baselines3.common.vec_env.vec_normalize\nVecNormalize\n)\x81}("
        + settings
        + _text("ret_rms")
        + rms
        + b"ub."
    )


def test_a_reward_only_vecnormalize_pkl_loads_into_wrappers_and_models(tmp_path):
    path = tmp_path / "vec_normalize.pkl"
    path.write_bytes(_reward_only_pickle(0.5, 4.0, 300.0))
    wrapper = VecNormalize.load(path, make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    assert not wrapper.norm_obs and wrapper.norm_reward
    assert (float(wrapper.ret_rms.var), wrapper.ret_rms.count) == (4.0, 300.0)
    model = PPO("MlpPolicy", wrapper, **FAST)
    assert not model.config.normalize_obs and model.config.normalize_reward
    assert float(model.statistics()[1].var) == 4.0
    frozen = PPO("MlpPolicy", "Pendulum-v1", **FAST)
    frozen.save(tmp_path / "model")
    frozen = PPO.load(tmp_path / "model")
    frozen.use_vec_normalize(path)
    assert not frozen.config.normalize_obs and float(frozen.statistics()[1].count) == 300.0


def _pendulum(n_envs=2, steps=10, **kwargs):
    return VecNormalize(
        make_vec_env("Pendulum-v1", n_envs=n_envs, seed=0, env_kwargs=dict(max_episode_steps=steps)), **kwargs
    )


def test_a_vecnormalize_on_its_own_normalizes_and_counts_as_sb3s():
    """reset/step return normalized observations and scaled rewards with the statistics after the update; the
    discounted returns restart after an episode's end (the TimeLimit of 10 ends both envs at steps 10 and 20)."""
    env = _pendulum()
    obs_ref, ret_ref, returns = SB3RunningMeanStd((3,)), SB3RunningMeanStd(), np.zeros(2)
    obs = env.reset()
    obs_ref.update(env.get_original_obs())
    np.testing.assert_allclose(
        obs, np.clip((env.get_original_obs() - obs_ref.mean) / np.sqrt(obs_ref.var + 1e-8), -10, 10), rtol=1e-5
    )
    assert obs.dtype == np.float32
    rng = np.random.default_rng(0)
    for _ in range(25):
        obs, rewards, dones, infos = env.step(rng.uniform(-2, 2, (2, 1)).astype(np.float32))
        raw, raw_rewards = env.get_original_obs(), env.get_original_reward()
        obs_ref.update(raw)
        returns = returns * 0.99 + raw_rewards
        ret_ref.update(returns)
        np.testing.assert_allclose(
            obs, np.clip((raw - obs_ref.mean) / np.sqrt(obs_ref.var + 1e-8), -10, 10), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(rewards, np.clip(raw_rewards / np.sqrt(ret_ref.var + 1e-8), -10, 10), rtol=1e-6)
        if dones.any():
            final = infos[0]["terminal_observation"]
            assert np.abs(final).max() < 10 and not np.allclose(final, raw[0])
        returns[dones] = 0
    assert env.obs_rms.count == pytest.approx(obs_ref.count) and env.ret_rms.count == pytest.approx(ret_ref.count)
    np.testing.assert_allclose(env.obs_rms.mean, obs_ref.mean, rtol=1e-12)
    np.testing.assert_allclose(env.ret_rms.var, ret_ref.var, rtol=1e-12)
    env.training = False  # frozen: the statistics stay, the outputs are still normalized
    frozen = env.obs_rms
    obs, _, _, _ = env.step(np.zeros((2, 1), np.float32))
    assert env.obs_rms.count == frozen.count
    np.testing.assert_allclose(obs, env.normalize_obs(env.get_original_obs()), rtol=1e-6)


def test_norm_flags_and_clip_obs_on_the_env_side():
    raw_env = _pendulum(norm_obs=False, norm_reward=False)
    obs = raw_env.reset()
    np.testing.assert_array_equal(obs, raw_env.get_original_obs())
    _, rewards, _, _ = raw_env.step(np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(rewards, raw_env.get_original_reward())
    assert raw_env.obs_rms.count == 1e-4 and raw_env.ret_rms.count == pytest.approx(1e-4 + 2)
    clipped = _pendulum(clip_obs=0.5)
    obs = clipped.reset()
    for _ in range(3):
        obs, _, _, _ = clipped.step(np.full((2, 1), 2.0, np.float32))
    assert np.abs(obs).max() <= 0.5


class Observations(BaseCallback):
    """The raw observations `learn` counted: the first reset's (`_last_obs`, SB3's) and each step's `new_obs`."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def _on_rollout_start(self):
        if not self.batches:
            self.batches.append(np.array(self.model._last_obs))

    def _on_step(self):
        self.batches.append(np.array(self.locals["new_obs"]))
        return True


def test_a_model_and_its_vecnormalize_share_one_set_of_statistics(tmp_path):
    env = _pendulum(steps=200)
    model = PPO("MlpPolicy", env, **FAST)
    seen = Observations()
    model.learn(32, callback=seen)
    reference = SB3RunningMeanStd((3,))
    for batch in seen.batches:
        reference.update(batch)
    policy = model._get_policy()
    np.testing.assert_allclose(env.obs_rms.mean, reference.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(env.obs_rms.var, reference.var, rtol=1e-4)
    assert env.obs_rms.count == pytest.approx(reference.count)
    np.testing.assert_array_equal(env.obs_rms.mean, policy.obs_scaling.mean)  # what the model normalizes with
    np.testing.assert_array_equal(env.obs_rms.var, policy.obs_scaling.var)
    count = env.obs_rms.count
    obs = env.reset()  # the wrapper's own reset: raw out (the model normalizes), counted in the shared statistics
    np.testing.assert_array_equal(obs, env.get_original_obs())
    assert env.obs_rms.count == pytest.approx(count + 2) and float(model.statistics()[0].count) == env.obs_rms.count
    model.save(tmp_path / "model")
    env.save(tmp_path / "vecnormalize.json")
    loaded = VecNormalize.load(tmp_path / "vecnormalize.json", _pendulum(steps=200).venv)
    restored = PPO.load(tmp_path / "model", env=loaded)
    np.testing.assert_array_equal(
        restored.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0]
    )


class IgnoresItsSeed(gym.Env):
    """Like sb3-contrib's InvalidActionEnvDiscrete: `reset` never passes its seed on (no `np_random` use), draws
    from numpy's global generator, so gymnasium's determinism checks fail where SB3 trains."""

    observation_space = gym.spaces.Box(0.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        self.state = np.random.randint(4)
        self.steps = 0
        return np.eye(4, dtype=np.float32)[self.state], {}

    def step(self, action):
        self.steps += 1
        reward = float(action == self.state)
        self.state = np.random.randint(4)
        return np.eye(4, dtype=np.float32)[self.state], reward, False, self.steps >= 8, {}


def test_verbose_runs_no_env_checker_and_check_env_is_sb3s():
    with pytest.raises(AssertionError):  # gymnasium's checker, which kppo ran from verbose=1 before
        gym.utils.env_checker.check_env(IgnoresItsSeed())
    model = PPO("MlpPolicy", IgnoresItsSeed(), verbose=1, **FAST)
    model.learn(16)
    assert model.num_timesteps == 16
    kppo.check_env(IgnoresItsSeed())  # SB3's checks pass

    class NoSeed(IgnoresItsSeed):
        def reset(self):
            return super().reset()

    with pytest.raises(TypeError, match=r"^The reset\(\) method must accept a `seed` parameter"):
        kppo.check_env(NoSeed())

    class BadInfo(IgnoresItsSeed):
        def step(self, action):
            return *super().step(action)[:4], None

    with pytest.raises(AssertionError, match=r"must be a python dictionary"):
        kppo.check_env(BadInfo())


def test_is_masking_supported_leaves_a_subprocvecenv_usable():
    """sb3-contrib's multi-env test asks a SubprocVecEnv without masks, then builds MaskablePPO on it (SB3 resets in
    `learn`, where the missing masks are the error)."""
    env = make_vec_env(IgnoresItsSeed, n_envs=2, vec_env_cls=kppo.SubprocVecEnv)
    try:
        assert not kppo.is_masking_supported(env)
        model = kppo.MaskablePPO("MlpPolicy", env, **FAST)
        assert env.reset().shape == (2, 4)
        with pytest.raises(ValueError):
            model.learn(16)
    finally:
        env.close()


class Dashboard(gym.Env):
    """A camera frame and a speed vector, random every step."""

    observation_space = gym.spaces.Dict(
        {"camera": gym.spaces.Box(0, 255, (4, 4, 1), np.uint8), "speed": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


def test_a_dict_vecnormalize_on_its_own_normalizes_its_keys_and_leaves_the_images():
    env = VecNormalize(make_vec_env(Dashboard, n_envs=3, seed=0))
    speed = SB3RunningMeanStd((2,))
    obs = env.reset()
    speed.update(env.get_original_obs()["speed"])
    for _ in range(4):
        obs, _, _, _ = env.step(np.zeros(3, np.int64))
        speed.update(env.get_original_obs()["speed"])
    np.testing.assert_array_equal(obs["camera"], env.get_original_obs()["camera"])  # bytes, as kppo's CNN reads them
    assert obs["camera"].dtype == np.uint8 and obs["speed"].dtype == np.float32
    raw = env.get_original_obs()["speed"]
    np.testing.assert_allclose(obs["speed"], (raw - speed.mean) / np.sqrt(speed.var + 1e-8), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(env.obs_rms.mean[-2:], speed.mean, rtol=1e-12)  # the flat statistics' last columns
