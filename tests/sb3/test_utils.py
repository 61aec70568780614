"""SB3's and sb3-contrib's helpers (`kppo.sb3.utils`), against the values SB3 2.9's own functions give (read from
its source: stable_baselines3/common/utils.py, preprocessing.py, env_util.py, vec_env/__init__.py, env_checker.py;
sb3_contrib/common/maskable/utils.py)."""

import re
import warnings

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo import DummyVecEnv, Monitor, VecMonitor, VecNormalize
from tests.helpers.masked_envs import MaskedChoiceEnv


def test_schedules_interpolate_and_return_floats_as_sb3s():
    linear = kppo.LinearSchedule(1.0, 0.0, 0.5)
    assert [linear(p) for p in (1.0, 0.75, 0.5, 0.4, 0.0)] == [1.0, 0.5, 0.0, 0.0, 0.0]
    assert kppo.ConstantSchedule(3e-4)(0.3) == 3e-4
    wrapped = kppo.FloatSchedule(lambda p: np.float64(p) * 2)
    assert type(wrapped(0.5)) is float and wrapped(0.5) == 1.0
    assert kppo.FloatSchedule(wrapped).value_schedule is wrapped.value_schedule  # not wrapped twice
    assert kppo.FloatSchedule(2)(0.1) == 2.0
    with pytest.raises(AssertionError, match=r"^value_schedule: expected a number or a callable schedule"):
        kppo.FloatSchedule("fast")
    with pytest.warns(UserWarning, match=r"get_linear_fn\(\) is deprecated"):
        assert kppo.get_linear_fn(1.0, 0.5, 0.1)(0.95) == pytest.approx(0.75)
    with pytest.warns(UserWarning, match=r"constant_fn\(\) is deprecated"):
        assert kppo.constant_fn(7)(0.0) == 7
    model = kppo.PPO("MlpPolicy", "CartPole-v1", learning_rate=kppo.LinearSchedule(1e-3, 1e-4, 1.0), n_steps=32)
    assert model.lr_schedule(0.0) == pytest.approx(1e-4)


def test_flattened_observation_dims_are_sb3s():
    assert kppo.get_flattened_obs_dim(gym.spaces.Discrete(3)) == 3
    assert kppo.get_flattened_obs_dim(gym.spaces.Box(-1, 1, (2, 3))) == 6
    space = gym.spaces.Dict(a=gym.spaces.Box(-1, 1, (2,)), b=gym.spaces.Discrete(4))
    assert kppo.get_flattened_obs_dim(space) == 6


def test_wrappers_and_vec_wrappers_are_found_in_their_chains():
    env = Monitor(gym.make("CartPole-v1"))
    assert kppo.is_wrapped(env, gym.wrappers.TimeLimit) and kppo.unwrap_wrapper(env, Monitor) is env
    assert not kppo.is_wrapped(gym.make("CartPole-v1"), Monitor)
    normalized = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    outer = VecMonitor(normalized)
    assert kppo.is_vecenv_wrapped(outer, VecNormalize) and kppo.unwrap_vec_normalize(outer) is normalized
    assert kppo.unwrap_vec_wrapper(outer, VecMonitor) is outer
    plain = DummyVecEnv([lambda: gym.make("CartPole-v1")])
    assert not kppo.is_vecenv_wrapped(plain, VecNormalize) and kppo.unwrap_vec_normalize(plain) is None


def test_check_env_runs_gymnasiums_checker_and_names_spaces_kppo_cannot_train_on():
    kppo.check_env(gym.make("CartPole-v1").unwrapped)

    class FourTuple(MaskedChoiceEnv):
        def step(self, action):
            return super().step(action)[:4]  # the old gym API

    with pytest.raises((AssertionError, ValueError)):
        kppo.check_env(FourTuple())

    class Text(gym.Env):
        observation_space = gym.spaces.Text(4)
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(ValueError, match=r"^observation_space: "):
        kppo.check_env(Text())


class SpacesEnv(gym.Env):
    """An env of the given spaces whose observations are their samples (SB3's test_env_checker envs)."""

    def __init__(self, observation_space, action_space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
GRAPH = gym.spaces.Graph(node_space=BOX, edge_space=None)


@pytest.mark.parametrize(
    "observation_space, action_space, warned",
    [
        (gym.spaces.Sequence(gym.spaces.Discrete(8)), gym.spaces.Discrete(4), ["Sequence"]),
        (gym.spaces.Dict({"seq": gym.spaces.Sequence(BOX)}), gym.spaces.Discrete(2), ["Sequence"]),
        (gym.spaces.Tuple([gym.spaces.Sequence(BOX), BOX]), gym.spaces.Discrete(2), ["Tuple", "Sequence"]),
        (gym.spaces.OneOf([BOX, gym.spaces.Discrete(3)]), gym.spaces.Discrete(2), ["OneOf"]),
        (GRAPH, gym.spaces.Discrete(2), ["Graph"]),
        (gym.spaces.Dict({"graph": GRAPH, "x": BOX}), gym.spaces.Discrete(2), ["Graph"]),
        (gym.spaces.Dict({"inner": gym.spaces.Dict({"x": BOX})}), gym.spaces.Discrete(2), ["Dict space inside"]),
        (BOX, gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), ["action_space: a Dict"]),
    ],
)
def test_check_env_warns_about_the_spaces_sb3_warns_about_and_checks_no_further(
    observation_space, action_space, warned
):
    """SB3 2.9's test_env_checker: `check_env(env, warn=True)` warns "<space> ... not supported" for these spaces and
    stops; without `warn` the space is refused in one line."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        kppo.check_env(SpacesEnv(observation_space, action_space), warn=True)
    messages = [str(w.message) for w in record]
    for name in warned:
        assert any(re.search(f"{name}.*not supported", m) for m in messages), (name, messages)
    assert "check_env: the env's spaces are not supported, so it checks no further" in messages
    with pytest.raises(ValueError, match=r"^(observation|action)_space: expected"):
        kppo.check_env(SpacesEnv(observation_space, action_space), warn=False)


def test_action_masks_are_read_from_envs_and_vec_envs_as_sb3_contrib_reads_them():
    vec = DummyVecEnv([lambda: MaskedChoiceEnv(), lambda: MaskedChoiceEnv()])
    vec.reset()
    masks = kppo.get_action_masks(vec)
    assert masks.dtype == bool and masks.shape == (2, 6)
    np.testing.assert_array_equal(masks, np.stack([env.unwrapped._mask for env in vec.envs]))
    assert kppo.is_masking_supported(vec) and kppo.is_masking_supported(MaskedChoiceEnv())
    assert not kppo.is_masking_supported(DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    assert not kppo.is_masking_supported(MaskedChoiceEnv(source="info"))
    single = MaskedChoiceEnv()
    single.reset(seed=0)
    np.testing.assert_array_equal(kppo.get_action_masks(single), single._mask)


def test_set_random_seed_seeds_numpys_global_generator():
    kppo.set_random_seed(5)
    first = np.random.rand(3)
    kppo.set_random_seed(5, using_cuda=True)
    np.testing.assert_array_equal(np.random.rand(3), first)


def test_rmsprop_tf_like_is_an_optimizer_class_as_sb3s():
    model = kppo.PPO(
        "MlpPolicy",
        "CartPole-v1",
        n_steps=32,
        policy_kwargs=dict(optimizer_class=kppo.RMSpropTFLike, optimizer_kwargs=dict(alpha=0.99, eps=1e-5)),
    )
    assert (model.config.optimizer, model.config.rmsprop_alpha, model.config.optimizer_eps) == (
        "rmsprop_tf",
        0.99,
        1e-5,
    )


def test_sync_envs_normalization_copies_the_statistics_as_sb3s():
    model = kppo.PPO("MlpPolicy", VecNormalize(kppo.make_vec_env("Pendulum-v1", n_envs=2, seed=0)), n_steps=64, seed=0)
    model.learn(64 * 2)
    eval_env = VecNormalize(kppo.make_vec_env("Pendulum-v1", n_envs=1, seed=1), training=False)
    kppo.sync_envs_normalization(model.get_env(), eval_env)
    np.testing.assert_array_equal(eval_env.obs_rms.mean, model.get_env().obs_rms.mean)
    np.testing.assert_array_equal(eval_env.ret_rms.var, model.get_env().ret_rms.var)
    obs = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(eval_env.normalize_obs(obs), model.get_env().normalize_obs(obs))
    before = eval_env.obs_rms.mean.copy()
    model.learn(64, reset_num_timesteps=False)
    np.testing.assert_array_equal(eval_env.obs_rms.mean, before)  # a copy, not a view
    with pytest.raises(AssertionError, match=r"^eval_env: expected the wrappers of env \(VecNormalize here\)"):
        kppo.sync_envs_normalization(model.get_env(), kppo.make_vec_env("Pendulum-v1", n_envs=1))


def test_load_results_and_ts2xy_read_monitor_files_as_sb3s(tmp_path):
    """Two Monitor files of a VecEnv (SB3's `monitor_dir`): one frame ordered by time, x as SB3's three axes."""
    env = kppo.make_vec_env("CartPole-v1", n_envs=2, seed=0, monitor_dir=str(tmp_path))
    env.reset()
    rng = np.random.default_rng(0)
    episodes = 0
    while episodes < 6:
        _, _, dones, _ = env.step(rng.integers(0, 2, size=2))
        episodes += int(dones.sum())
    env.close()
    frame = kppo.load_results(tmp_path)
    assert len(frame) >= 6 and list(frame.columns[:4]) == ["index", "r", "l", "t"]
    assert np.all(np.diff(frame.t.values) >= 0) and frame.t.values[0] >= 0
    x, y = kppo.ts2xy(frame, "timesteps")
    np.testing.assert_array_equal(x, np.cumsum(frame.l.values))
    np.testing.assert_array_equal(y, frame.r.values)
    assert list(kppo.ts2xy(frame, "episodes")[0]) == list(range(len(frame)))
    np.testing.assert_allclose(kppo.ts2xy(frame, "walltime_hrs")[0], frame.t.values / 3600.0)
    with pytest.raises(AssertionError, match="x_axis: expected one of"):
        kppo.ts2xy(frame, "steps")
    from kppo.sb3.results_plotter import LoadMonitorResultsError

    with pytest.raises(LoadMonitorResultsError, match="No monitor files of the form"):
        kppo.load_results(tmp_path / "empty")


def test_hparam_goes_to_tensorboard_only(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from kppo.sb3.logger import Logger

    logger = Logger(verbose=1, tensorboard_dir=tmp_path)
    logger.record(
        "hparams",
        kppo.HParam({"gamma": 0.99, "policy": "MlpPolicy"}, {"rollout/ep_rew_mean": 0.0}),
        exclude=("stdout", "log", "json", "csv"),
    )
    logger.record("train/loss", 1.5)
    logger.dump(0)
    logger.close()
    assert "hparams" not in capsys.readouterr().out
    events = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    events.Reload()
    tags = events.Tags()["tensors"]
    assert "_hparams_/session_start_info" in tags and "rollout/ep_rew_mean" in tags and "train/loss" in tags
    with pytest.raises(AssertionError, match="metric_dict: expected at least one metric"):
        kppo.HParam({"gamma": 0.99}, {})


#: SB3 2.9's `test_check_env_detailed_error` cases (tests/test_env_checker.py): a space, an observation outside it
#: and the detail SB3's `_check_obs` gives
DETAILED = [
    (
        gym.spaces.Box(0.0, 1.0, (3,), np.float32),
        np.array([0.5, 1.5, 0.5], np.float32),
        r"Expected: 0\.0 <= obs\[1] <= 1\.0, actual value: 1\.5",
    ),
    (
        gym.spaces.Box(0.0, 2.0, (3,), np.float32),
        np.array([-1.0, 1.5, 0.5], np.float32),
        r"Expected: 0\.0 <= obs\[0] <= 2\.0, actual value: -1\.0",
    ),
    (
        gym.spaces.Box(-1.0, 2.0, (2, 3, 3, 1), np.float32),
        -2 * np.ones((2, 3, 3, 1), np.float32),
        r"18 invalid indices:",
    ),
    (
        gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
        np.array([1.0, 1.5, 0.5], np.float64),
        r"Expected: float32, actual dtype: float64",
    ),
    (
        gym.spaces.Box(-1.0, 2.0, (3,), np.float32),
        np.ones((2, 3), np.float32),
        r"Expected: \(3,\), actual shape: \(2, 3\)",
    ),
    (
        gym.spaces.Dict({"obs": gym.spaces.Box(-1.0, 2.0, (3,), np.float32)}),
        {"obs": np.ones((2, 3), np.float32)},
        r"Error while checking key=obs.*Expected: \(3,\), actual shape: \(2, 3\)",
    ),
    (gym.spaces.MultiDiscrete([3, 3]), np.array([[2, 0]]), r"Expected: \(2,\), actual shape: \(1, 2\)"),
    (gym.spaces.MultiBinary(3), np.array([[1, 0, 0]]), r"Expected: \(3,\), actual shape: \(1, 3\)"),
    (gym.spaces.Discrete(3), np.array([1]), r"must be an int"),
]


@pytest.mark.parametrize("method", ["reset", "step"])
@pytest.mark.parametrize(("space", "wrong", "detail"), DETAILED)
def test_check_env_names_what_differs_in_an_observation_as_sb3s_checker(space, wrong, detail, method):
    good = space.sample()

    class Checked(gym.Env):
        observation_space = space
        action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

        def reset(self, *, seed=None, options=None):
            return wrong if method == "reset" else good, {}

        def step(self, action):
            return wrong if method == "step" else good, 0.0, True, False, {}

    with pytest.raises(AssertionError, match=detail) as raised:
        kppo.check_env(Checked(), warn=False)
    assert f"`{method}()`" in str(raised.value)
