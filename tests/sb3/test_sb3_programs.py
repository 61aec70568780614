"""Stable-Baselines3's documented programs (its README and its guide's examples) with only the import changed, at
short budgets; and the same seed giving the same run on an env that samples from its own spaces."""

import io
import json
import os
import random

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import PPO, BaseCallback, DummyVecEnv, Monitor, SubprocVecEnv, VecMonitor, VecNormalize, make_vec_env
from kppo.vec_envs.vec_env import VecExtractDictObs

FAST = dict(n_steps=32, batch_size=32, n_epochs=1, policy_kwargs=dict(net_arch=[16]))


def test_the_readme_loop_over_get_env():
    """SB3's README: `vec_env = model.get_env(); obs = vec_env.reset(); ...; obs, reward, done, info =
    vec_env.step(action)` (its `vec_env.render("human")` needs a screen: left out)."""
    env = gym.make("CartPole-v1")
    model = PPO("MlpPolicy", env, verbose=0, seed=0, **FAST)
    model.learn(total_timesteps=64)
    vec_env = model.get_env()
    obs = vec_env.reset()
    assert obs.shape == (1, 4)
    ended = []
    for _ in range(300):
        action, _states = model.predict(obs, deterministic=True)
        obs, reward, done, info = vec_env.step(action)
        assert reward.shape == (1,) and done.shape == (1,) and isinstance(info, list) and len(info) == 1
        if done[0]:
            ended.append(info[0])
    assert ended, "no episode ended in 300 steps"
    assert ended[0]["terminal_observation"].shape == (4,)  # SB3: the last observation; `obs` is the next reset's
    assert ended[0]["TimeLimit.truncated"] in (True, False)


def test_make_vec_env_with_wrappers_monitor_folders_and_subprocesses(tmp_path):
    """SB3's make_vec_env arguments: wrapper_class/kwargs, monitor_dir/kwargs, vec_env_cls/kwargs, start_index."""
    monitor_dir = str(tmp_path / "logs")
    vec_env = make_vec_env(
        "CartPole-v1",
        n_envs=2,
        seed=0,
        start_index=3,
        monitor_dir=monitor_dir,
        wrapper_class=gym.wrappers.TimeLimit,
        wrapper_kwargs=dict(max_episode_steps=200),
        vec_env_cls=SubprocVecEnv,
        vec_env_kwargs=dict(start_method="spawn"),
        monitor_kwargs=dict(info_keywords=()),
    )
    assert isinstance(vec_env, SubprocVecEnv) and vec_env.num_envs == 2
    model = PPO("MlpPolicy", vec_env, seed=0, **FAST)
    model.learn(128)
    vec_env.close()
    files = sorted(os.listdir(monitor_dir))
    assert files == ["3.monitor.csv", "4.monitor.csv"]
    lines = (tmp_path / "logs" / "3.monitor.csv").read_text().splitlines()
    header = json.loads(lines[0][1:])
    assert lines[0].startswith("#") and header["env_id"] == "CartPole-v1" and "t_start" in header
    assert lines[1] == "r,l,t"
    rows = [line.split(",") for line in lines[2:]]
    assert rows and all(int(row[1]) <= 200 for row in rows)
    assert len(model.ep_info_buffer) > 0  # from the Monitor's info["episode"], as SB3's ep_info_buffer


def test_the_vecenv_interface():
    vec_env = DummyVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=5)] * 2)
    assert vec_env.seed(7) == [7, 8]
    obs = vec_env.reset()
    again = DummyVecEnv([lambda: gym.make("CartPole-v1")] * 2)
    again.seed(7)
    np.testing.assert_array_equal(obs, again.reset())  # seeds apply at the next reset, env i gets seed + i
    for _ in range(5):
        obs, _, dones, infos = vec_env.step(np.array([0, 1]))
    assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)
    assert not np.array_equal(obs, np.stack([info["terminal_observation"] for info in infos]))
    assert vec_env.get_attr("spec", indices=0)[0].id == "CartPole-v1"
    vec_env.set_attr("flag", 3, indices=[1])
    assert vec_env.get_attr("flag", indices=1) == [3]
    assert vec_env.env_method("get_wrapper_attr", "flag", indices=[1]) == [3]
    assert vec_env.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    assert len(vec_env.envs) == 2 and vec_env.num_envs == 2
    with pytest.raises(ValueError, match=r"^env_fns: expected a new env from every function, got one env twice"):
        env = gym.make("CartPole-v1")
        DummyVecEnv([lambda: env, lambda: env])


def test_make_vec_env_over_one_env_instance_is_refused_as_sb3_refuses_it():
    """`make_vec_env(lambda: env, n_envs=2)` wraps one env in two Monitors: two slots sharing one env's state."""
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"the function to create them returned the same instance"):
        kppo.make_vec_env(lambda: env, n_envs=2)
    assert kppo.make_vec_env(lambda: gym.make("CartPole-v1"), n_envs=2).num_envs == 2


def test_monitor_writes_sb3s_file_and_vecmonitor_records_what_training_steps(tmp_path):
    env = Monitor(SamplesItsSpaces(), str(tmp_path / "run"), info_keywords=("is_success",))
    env.reset(seed=0)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(0)
        done = terminated or truncated
    env.close()
    lines = (tmp_path / "run.monitor.csv").read_text().splitlines()
    assert lines[1] == "r,l,t,is_success" and env.get_episode_lengths() == [info["episode"]["l"]] == [20]
    assert env.get_total_steps() == 20 and len(lines) == 3 and lines[2].endswith(str(info["is_success"]))
    with pytest.raises(RuntimeError, match="Tried to reset an environment before done"):
        strict = Monitor(gym.make("CartPole-v1"), allow_early_resets=False)
        strict.reset(seed=0)
        strict.step(0)
        strict.reset()

    vec_env = VecMonitor(make_vec_env("CartPole-v1", n_envs=2, seed=0), str(tmp_path / "vec"))
    model = PPO("MlpPolicy", vec_env, seed=0, **FAST)
    model.learn(96)  # kppo steps the vector env under the VecMonitor: it records
    rows = (tmp_path / "vec.monitor.csv").read_text().splitlines()[2:]
    assert len(rows) > 0 and sum(int(row.split(",")[1]) for row in rows) <= 128  # 2 rollouts of 2 x 32 steps


def test_vec_extract_dict_obs_hands_on_one_key():
    class TwoKeys(gym.Env):
        observation_space = gym.spaces.Dict({"state": gym.spaces.Box(-1, 1, (3,)), "goal": gym.spaces.Box(-1, 1, (2,))})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.observation_space.sample(), {}

        def step(self, action):
            self.t += 1
            return self.observation_space.sample(), 1.0, self.t >= 3, False, {}

    vec_env = VecExtractDictObs(DummyVecEnv([TwoKeys]), key="state")
    assert vec_env.observation_space.shape == (3,) and vec_env.reset().shape == (1, 3)
    for _ in range(3):
        obs, _, dones, infos = vec_env.step(np.array([0]))
    assert dones[0] and obs.shape == (1, 3) and infos[0]["terminal_observation"].shape == (3,)


class HParamCallback(BaseCallback):
    """SB3's documented hyperparameter-logging callback, reading the model's hyperparameters as attributes."""

    def _on_training_start(self) -> None:
        self.hparams = {
            "algorithm": self.model.__class__.__name__,
            "learning rate": self.model.learning_rate,
            "gamma": self.model.gamma,
        }

    def _on_step(self) -> bool:
        return True


def test_the_hparams_callback_reads_model_attributes():
    callback = HParamCallback()
    model = PPO("MlpPolicy", "CartPole-v1", gamma=0.97, seed=0, **FAST)
    model.learn(32, callback=callback)
    assert callback.hparams == {"algorithm": "PPO", "learning rate": 3e-4, "gamma": 0.97}
    assert (model.n_steps, model.batch_size, model.n_epochs, model.ent_coef, model.target_kl) == (32, 32, 1, 0.0, None)
    assert model.lr_schedule(0.5) == pytest.approx(3e-4) and model.get_vec_normalize_env() is None


@pytest.fixture(scope="module")
def cartpole_model():
    """A CartPole PPO (seed 0) after one rollout, shared by the tests that only read it."""
    model = PPO("MlpPolicy", "CartPole-v1", seed=0, **FAST)
    model.learn(32)
    return model


def test_saving_as_sb3_users_do(tmp_path, monkeypatch, cartpole_model):
    monkeypatch.chdir(tmp_path)
    model = cartpole_model
    model.save("ppo_cartpole")
    assert os.path.isfile("ppo_cartpole.zip")  # SB3's naming
    obs = np.zeros((3, 4), np.float32)
    want = model.predict(obs, deterministic=True)[0]
    for path in ("ppo_cartpole", "ppo_cartpole.zip"):
        np.testing.assert_array_equal(PPO.load(path).predict(obs, deterministic=True)[0], want)
    buffer = io.BytesIO()
    model.save(buffer)  # then loaded from the same file object, not rewound: SB3 reads the whole zip
    np.testing.assert_array_equal(PPO.load(buffer).predict(obs, deterministic=True)[0], want)
    assert kppo.export("ppo_cartpole.zip", "policy.tflite").metadata  # the zip is an agent for every kppo reader


def test_get_and_set_parameters_are_numpy_and_round_trip(cartpole_model):
    model = cartpole_model
    other = PPO("MlpPolicy", "CartPole-v1", seed=1, **FAST)
    params = model.get_parameters()
    assert set(params) == {"policy", "policy.optimizer"}
    assert all(isinstance(v, np.ndarray) for v in params["policy"].values())
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    other.set_parameters(params)
    np.testing.assert_array_equal(other.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    name = next(iter(params["policy"]))
    with pytest.raises(ValueError, match=r"^Names of parameters do not match agents' parameters: expected"):
        other.set_parameters({"policy": {name: params["policy"][name]}})  # SB3's group check
    with pytest.raises(RuntimeError, match=r"^Error\(s\) in loading state_dict for ActorCriticPolicy: Missing key"):
        other.set_parameters({"policy": {name: params["policy"][name]}, "policy.optimizer": {}})
    other.set_parameters({"policy": {name: params["policy"][name]}}, exact_match=False)  # a subset is fine then
    with pytest.raises(
        ValueError, match=rf"^size mismatch for {name}: .*params\['policy'\]\['{name}'\]: expected shape"
    ):
        other.set_parameters({"policy": {name: np.zeros((1, 1))}}, exact_match=False)
    with pytest.raises(
        ValueError, match=r"^params: expected groups among \['policy', 'policy.optimizer'\], got \[1, 'x'\]$"
    ):
        other.set_parameters({1: {}, "x": {}, "policy": {}}, exact_match=False)  # keys sorted whatever their types
    with pytest.raises(ValueError, match=r"^params\['policy'\]: expected a dict of parameter name -> array, got list$"):
        other.set_parameters({"policy": [1]}, exact_match=False)


def test_the_rollout_buffer_has_sb3s_fields_and_shapes():
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=2, seed=0), seed=0, **FAST)
    assert model.rollout_buffer is None
    model.learn(64)
    buffer = model.rollout_buffer
    assert buffer.observations.shape == (32, 2, 4) and buffer.actions.shape == (32, 2, 1)
    for field in ("rewards", "returns", "episode_starts", "values", "log_probs", "advantages"):
        assert getattr(buffer, field).shape == (32, 2), field
    np.testing.assert_allclose(buffer.returns, buffer.advantages + buffer.values, rtol=1e-5, atol=1e-5)
    assert (buffer.buffer_size, buffer.n_envs, buffer.gamma) == (32, 2, 0.99)


class SamplesItsSpaces(gym.Env):
    """As SB3's IdentityEnv: the state is drawn from the env's own action space (seeded only through the space)."""

    observation_space = gym.spaces.Box(0, 1, (4,))

    def __init__(self):
        self.action_space = gym.spaces.Discrete(4)
        self.observation_space = gym.spaces.Box(0, 1, (4,))

    def _draw(self):
        self.state = int(self.action_space.sample())
        return np.eye(4, dtype=np.float32)[self.state] * self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        reward = float(action == self.state)
        self.t += 1
        return self._draw(), reward, False, self.t >= 20, {"is_success": reward > 0}

    def action_masks(self):  # for MaskablePPO: every action allowed
        return np.ones(4, bool)


@pytest.mark.parametrize("cls", [kppo.PPO, kppo.MaskablePPO])
def test_the_same_seed_gives_the_same_weights_on_an_env_that_samples_its_spaces(cls):
    def train():
        model = cls("MlpPolicy", SamplesItsSpaces(), seed=32, **FAST)
        model.learn(64)
        return model

    first, second = train(), train()
    for name, value in first.get_parameters()["policy"].items():
        np.testing.assert_array_equal(value, second.get_parameters()["policy"][name], err_msg=name)
    assert len(first.ep_success_buffer) > 0  # the env's info["is_success"] at each episode end


def test_a_vecnormalize_over_make_vec_env_is_found_and_saved_as_before(tmp_path):
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0))
    model = PPO("MlpPolicy", env, seed=0, **FAST)
    assert model.get_env() is env and model.get_vec_normalize_env() is env
    env.seed(0)
    assert env.reset().shape == (2, 3)


def test_mixing_the_gym_api_gets_sb3s_hint_and_old_resets_work():
    class OldReset(SamplesItsSpaces):
        def reset(self, seed=None):  # written before gymnasium's `options` keyword
            return super().reset(seed=seed)

    model = PPO("MlpPolicy", OldReset(), seed=0, **FAST)
    model.learn(32)
    env = gym.make("CartPole-v1")
    for cls in (PPO, kppo.RecurrentPPO):
        with pytest.raises(ValueError, match=r"You have passed a tuple to the predict\(\) function instead of a Numpy"):
            policy = "MlpLstmPolicy" if cls is kppo.RecurrentPPO else "MlpPolicy"
            cls(policy, "CartPole-v1", seed=0, **FAST).predict(env.reset(seed=0))


def test_a_one_step_rollout_trains_without_advantage_normalization_and_is_refused_with_it():
    """SB3 asserts `buffer_size > 1 or not normalize_advantage`: one step without normalization is a valid setting."""
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=1, n_epochs=1, normalize_advantage=False, seed=0)
    model.learn(4)
    assert model.num_timesteps == 4
    with pytest.raises(
        AssertionError, match=r"^`n_steps \* n_envs` must be greater than 1.* \(n_steps \* n_envs: expe"
    ):
        PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=2, seed=0)
    with pytest.raises(AssertionError, match=r"^`batch_size` must be greater than 1"):  # SB3 checks it first
        PPO("MlpPolicy", "CartPole-v1", n_steps=1, batch_size=1, seed=0)


def test_lr_schedule_returns_a_float_as_sb3s_schedules_do():
    model = PPO("MlpPolicy", "CartPole-v1", learning_rate=lambda p: p * np.sin(1.0), seed=0, **FAST)
    value = model.lr_schedule(1.0)
    assert type(value) is float and value == float(np.sin(1.0))


class DrawsFromNumpysGlobalGenerator(gym.Env):
    """An env written against `np.random` (common in users' code): reproducible only when the global generator is
    seeded, as SB3's `set_random_seed` does in the model's setup."""

    observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.random.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(np.random.rand() < 0.5 + 0.2 * int(action)), False, self.t >= 10, {}


def test_the_same_seed_repeats_a_run_on_an_env_drawing_from_numpys_global_generator():
    def train(seed):
        np.random.uniform(size=int(np.random.randint(1, 50)))  # whatever the program drew before
        model = PPO("MlpPolicy", DrawsFromNumpysGlobalGenerator(), seed=seed, **FAST)
        model.learn(64)
        return model.get_parameters()["policy"]

    np.random.seed(1)
    first = train(7)
    np.random.seed(2)
    second = train(7)
    for name, value in first.items():
        np.testing.assert_array_equal(value, second[name], err_msg=name)
    kppo.set_random_seed(3)
    a = (random.random(), np.random.rand())
    kppo.set_random_seed(3)
    assert (random.random(), np.random.rand()) == a
