"""The host adapter over gymnasium vector envs: inputs, SAME_STEP semantics, flattening, validation, and one-line errors
for what a new user may pass (gymnasium's errors for an id, bad factories, envs that raise or break the API)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import kppo
from kppo.gym_envs.vector import GymVecEnv, GymStep
from kppo.gym_envs.make import gym_vec_env
from kppo.gym_envs.spaces import flat_dim, flatten_obs

UNBOUNDED = dict(low=-np.inf, high=np.inf, dtype=np.float32)
TOY_OBSERVATION_SPACE = spaces.Box(shape=(2,), **UNBOUNDED)
TOY_ACTION_SPACE = spaces.Discrete(2)


class ToyEnv(gym.Env):
    """Observation t*100 + arange (per Box) at step t; reward 1; optional termination and NaNs at given steps."""

    def __init__(
        self,
        observation_space: spaces.Space = TOY_OBSERVATION_SPACE,
        action_space: spaces.Space = TOY_ACTION_SPACE,
        terminate_at: int | None = None,
        nan_obs_at: int | None = None,
        nan_reward_at: int | None = None,
    ):
        self.observation_space, self.action_space = observation_space, action_space
        self.terminate_at, self.nan_obs_at, self.nan_reward_at = terminate_at, nan_obs_at, nan_reward_at
        self.t, self.last_action = 0, None

    def _box(self, space: spaces.Box, offset: float) -> np.ndarray:
        values = np.arange(int(np.prod(space.shape)), dtype=np.float32).reshape(space.shape) + 100 * self.t + offset
        if self.t == self.nan_obs_at:
            values.flat[0] = np.nan
        return values.astype(space.dtype)

    def _obs(self):
        if isinstance(self.observation_space, spaces.Dict):
            return {key: self._box(space, 10 * i) for i, (key, space) in enumerate(self.observation_space.items())}
        if isinstance(self.observation_space, spaces.Box):
            return self._box(self.observation_space, 0)
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.last_action = action
        self.t += 1
        reward = math.nan if self.t == self.nan_reward_at else 1.0
        return self._obs(), reward, self.t == self.terminate_at, False, {}


def _same_step(*factories) -> SyncVectorEnv:
    return SyncVectorEnv(list(factories), autoreset_mode=AutoresetMode.SAME_STEP)


def _assert_one_line_error(excinfo, field: str) -> None:
    message = str(excinfo.value)
    assert message.startswith(f"{field}:"), message
    assert "\n" not in message


# --- inputs ----------------------------------------------------------------------------------------------------


def test_env_id_sync():
    with gym_vec_env("CartPole-v1", 3, seed=0) as env:
        assert (env.num_envs, env.flat_obs_dim, env.env_id, env.max_episode_steps) == (3, 4, "CartPole-v1", 500)
        assert env.observation_space.shape == (4,) and env.action_space == spaces.Discrete(2)
        obs = env.reset()
        assert obs.shape == (3, 4) and obs.dtype == np.float32
        result = env.step(np.array([0, 1, 0]))
        assert isinstance(result, GymStep)
        assert result.obs.shape == result.final_obs.shape == (3, 4) and result.obs.dtype == np.float32
        assert result.reward.dtype == np.float32 and result.reward.shape == (3,)
        assert result.terminated.dtype == result.truncated.dtype == np.bool_
        np.testing.assert_array_equal(result.final_obs, result.obs)


def test_seed_makes_resets_reproducible():
    with gym_vec_env("CartPole-v1", 2, seed=3) as a, gym_vec_env("CartPole-v1", 2) as b:
        np.testing.assert_array_equal(a.reset(), b.reset(seed=3))


def test_env_instance():
    with gym_vec_env(gym.make("CartPole-v1", max_episode_steps=7)) as env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (1, "CartPole-v1", 7)
        assert env.reset(seed=0).shape == (1, 4)


def test_factory_and_verbose_env_checker():
    with pytest.warns(UserWarning, match="infinity"):  # check_env's warnings about CartPole's unbounded Box
        env = gym_vec_env(lambda: gym.make("CartPole-v1"), 2, verbose=1)
    with env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (2, "CartPole-v1", 500)
        assert env.reset(seed=0).shape == (2, 4)


def test_existing_vector_env():
    vec_env = _same_step(*[lambda: gym.make("CartPole-v1", max_episode_steps=9)] * 3)
    with gym_vec_env(vec_env) as env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (3, "CartPole-v1", 9)
        assert env.vec_env is vec_env
        assert env.reset(seed=1).shape == (3, 4)


def test_async_cartpole():
    with gym_vec_env("CartPole-v1", 2, vectorization="async", env_kwargs={"max_episode_steps": 3}) as env:
        assert env.max_episode_steps == 3
        env.reset(seed=0)
        for _ in range(3):
            result = env.step(np.zeros(2, np.int64))
        np.testing.assert_array_equal(result.truncated, [True, True])
        assert not np.isclose(result.obs, result.final_obs).all(axis=1).any()


# --- SAME_STEP semantics ---------------------------------------------------------------------------------------


def test_termination_returns_terminal_final_obs():
    with gym_vec_env("CartPole-v1", 1, seed=0) as env:
        env.reset()
        for _ in range(100):
            result = env.step(np.ones(1, np.int64))  # always push right: the pole falls within ~10 steps
            if result.terminated[0]:
                break
            np.testing.assert_array_equal(result.final_obs, result.obs)
        assert result.terminated[0] and not result.truncated[0]
        x, _, theta, _ = result.final_obs[0]
        assert abs(theta) > 12 * 2 * math.pi / 360 or abs(x) > 2.4  # the terminal observation
        assert np.all(np.abs(result.obs) <= 0.05)  # the reset observation of the next episode
        assert not np.allclose(result.final_obs, result.obs)


@pytest.mark.parametrize("how", ["env_kwargs", "factory"])
def test_time_limit_truncation_returns_last_obs(how):
    if how == "env_kwargs":
        env = gym_vec_env("CartPole-v1", 2, seed=5, env_kwargs={"max_episode_steps": 5})
    else:
        env = gym_vec_env(lambda: gym.make("CartPole-v1", max_episode_steps=5), 2, seed=5)
    reference = gym.make("CartPole-v1")  # env 0 is seeded with 5
    expected, _ = reference.reset(seed=5)
    with env:
        env.reset()
        for t in range(5):
            result = env.step(np.zeros(2, np.int64))
            expected, *_ = reference.step(0)
            if t < 4:
                assert not (result.terminated | result.truncated).any()
        np.testing.assert_array_equal(result.truncated, [True, True])
        np.testing.assert_array_equal(result.terminated, [False, False])
        np.testing.assert_allclose(result.final_obs[0], expected)
        assert not np.isclose(result.obs, result.final_obs).all(axis=1).any()


# --- flattening ------------------------------------------------------------------------------------------------


def test_box_2x3_flattens_to_6():
    space = spaces.Box(shape=(2, 3), **UNBOUNDED)
    assert flat_dim(space) == 6
    with gym_vec_env(lambda: ToyEnv(observation_space=space), 2) as env:
        assert env.flat_obs_dim == 6 and env.observation_space is not None and env.observation_space.shape == (2, 3)
        np.testing.assert_array_equal(env.reset(), [np.arange(6)] * 2)  # C order
        np.testing.assert_array_equal(env.step(np.zeros(2, np.int64)).obs, [np.arange(6) + 100] * 2)


@pytest.mark.parametrize("sort_keys", [True, False])
def test_dict_of_boxes_flattens_in_key_order(sort_keys):
    space = spaces.Dict(
        {"b": spaces.Box(shape=(2,), **UNBOUNDED), "a": spaces.Box(shape=(1, 3), **UNBOUNDED)}, sort_keys=sort_keys
    )
    first, second = ("a", "b") if sort_keys else ("b", "a")
    assert list(space.keys()) == [first, second] and flat_dim(space) == 5
    batch = {"a": np.array([[[1, 2, 3]], [[4, 5, 6]]]), "b": np.array([[7, 8], [9, 10]])}
    parts = {"a": [[1, 2, 3], [4, 5, 6]], "b": [[7, 8], [9, 10]]}
    np.testing.assert_array_equal(flatten_obs(space, batch), np.concatenate([parts[first], parts[second]], axis=1))

    def obs_at(t):  # ToyEnv: key number i of the space holds t * 100 + 10 * i + arange
        values = [100 * t + 10 * i + np.arange(int(np.prod(space[key].shape))) for i, key in enumerate(space.keys())]
        return np.concatenate(values)

    with gym_vec_env(lambda: ToyEnv(observation_space=space, terminate_at=2)) as env:
        assert env.observation_space is space and env.flat_obs_dim == 5
        np.testing.assert_array_equal(env.reset()[0], obs_at(0))
        env.step(np.zeros(1, np.int64))
        result = env.step(np.zeros(1, np.int64))
        assert result.terminated[0]
        np.testing.assert_array_equal(result.final_obs[0], obs_at(2))
        np.testing.assert_array_equal(result.obs[0], obs_at(0))


@pytest.mark.parametrize(
    "action_space, actions",
    [
        (spaces.Discrete(3), np.array([2, 1], np.int32)),
        (spaces.Box(-1, 1, shape=(2,), dtype=np.float32), np.array([[0.5, -0.5], [0.25, 1.0]])),
        (spaces.MultiDiscrete([2, 3]), np.array([[1, 2], [0, 1]], np.int32)),
        (spaces.MultiBinary(3), np.array([[1, 0, 1], [0, 1, 1]])),
    ],
)
def test_actions_reach_env_with_space_dtype(action_space, actions):
    vec_env = _same_step(*[lambda: ToyEnv(action_space=action_space)] * 2)
    with gym_vec_env(vec_env) as env:
        env.reset()
        env.step(actions)
        for i, sub_env in enumerate(vec_env.envs):
            assert np.asarray(sub_env.last_action).dtype == action_space.dtype
            np.testing.assert_array_equal(sub_env.last_action, actions[i])
        with pytest.raises(ValueError) as excinfo:
            env.step(actions[:1])
        _assert_one_line_error(excinfo, "actions")


# --- non-finite values -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, step, what",
    [({"nan_obs_at": 3}, 3, "observation"), ({"nan_reward_at": 2}, 2, "reward"), ({"nan_obs_at": 0}, 0, "observation")],
)
def test_non_finite_values_raise_one_line_error(kwargs, step, what):
    with gym_vec_env(_same_step(ToyEnv, lambda: ToyEnv(**kwargs), ToyEnv)) as env:
        with pytest.raises(ValueError) as excinfo:
            env.reset()
            for _ in range(step):
                env.step(np.zeros(3, np.int64))
    message = str(excinfo.value)
    assert message.startswith(f"env returned a non-finite {what} at step {step} in env 1: ")
    assert "nan" in message and "\n" not in message


def test_non_finite_final_observation_raises():
    with gym_vec_env(_same_step(lambda: ToyEnv(terminate_at=2, nan_obs_at=2))) as env:
        env.reset()
        env.step(np.zeros(1, np.int64))
        with pytest.raises(ValueError) as excinfo:
            env.step(np.zeros(1, np.int64))
    message = str(excinfo.value)
    assert message.startswith("env returned a non-finite final observation at step 2 in env 0: [")
    assert "nan" in message and "\n" not in message


# --- unsupported inputs ----------------------------------------------------------------------------------------


TUPLE_OBS = spaces.Tuple([spaces.Discrete(2)] * 2)
NESTED_DICT_OBS = spaces.Dict({"a": spaces.Dict({"b": spaces.Box(0, 1)})})


def _disabled_vector_env():
    return SyncVectorEnv([lambda: gym.make("CartPole-v1")], autoreset_mode=AutoresetMode.DISABLED)


def _wrapped_next_step_vector_env():
    return gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("CartPole-v1", 2))


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: gym_vec_env(lambda: ToyEnv(observation_space=TUPLE_OBS)), "observation_space"),
        (lambda: gym_vec_env(lambda: ToyEnv(observation_space=spaces.Text(4))), "observation_space"),
        (lambda: gym_vec_env(lambda: ToyEnv(observation_space=NESTED_DICT_OBS)), "observation_space"),
        (lambda: gym_vec_env(lambda: ToyEnv(action_space=spaces.Text(5))), "action_space"),
        (lambda: gym_vec_env(lambda: ToyEnv(action_space=spaces.Sequence(spaces.Discrete(2)))), "action_space"),
        (lambda: gym_vec_env(ToyEnv(action_space=spaces.Text(5))), "action_space"),
        (lambda: gym_vec_env(_disabled_vector_env()), "autoreset_mode"),
        (lambda: gym_vec_env(_wrapped_next_step_vector_env()), "autoreset_mode"),
        (lambda: gym_vec_env("CartPole-v1", 2, vectorization="threads"), "vectorization"),
        (lambda: gym_vec_env(gym.make("CartPole-v1"), 2), "num_envs"),
        (lambda: gym_vec_env("CartPole-v1", 0), "num_envs"),
        (lambda: gym_vec_env(ToyEnv(), env_kwargs={"max_episode_steps": 5}), "env_kwargs"),
        (lambda: gym_vec_env(42), "env"),
        (lambda: gym_vec_env(lambda: 42), "env"),
    ],
)
def test_unsupported_inputs_raise_one_line_errors(make, field):
    with pytest.raises(ValueError) as excinfo:
        make()
    _assert_one_line_error(excinfo, field)


def test_step_before_reset_raises():
    with gym_vec_env("CartPole-v1") as env, pytest.raises(RuntimeError, match="before reset"):
        env.step(np.zeros(1, np.int64))


def test_gym_vec_env_wraps_directly():
    env = GymVecEnv(_same_step(ToyEnv, ToyEnv), env_id="toy", max_episode_steps=3)
    assert (env.env_id, env.max_episode_steps, env.num_envs, env.flat_obs_dim) == ("toy", 3, 2, 2)
    env.close()
    env.close()  # idempotent


# --- gymnasium's errors for an id: one line naming the id and the fix ------------------------------------------


def _raise_missing(name):
    def entry_point(**kwargs):
        raise gym.error.DependencyNotInstalled(
            f'{name} is not installed, run `pip install "gymnasium[{name.lower()}]"`'
        )

    return entry_point


gym.register("KppoTest/NeedsBox2D-v0", entry_point=_raise_missing("Box2D"))
gym.register("KppoTest/NeedsMuJoCo-v0", entry_point=_raise_missing("MuJoCo"))


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    "env_id, message",
    [
        (
            "NoSuchEnv-v0",
            "env: 'NoSuchEnv-v0' is not available in gymnasium 1.4.0: Environment `NoSuchEnv` doesn't exist; "
            "list the registered ids with gymnasium.pprint_registry()",
        ),
        (
            "Taxi-v2",
            "env: 'Taxi-v2' is not available in gymnasium 1.4.0: Environment version v2 for `Taxi` is deprecated. "
            "Please use `Taxi-v4` instead",
        ),
        (
            "Taxi-v3",
            "env: 'Taxi-v3' is not available in gymnasium 1.4.0: Environment version v3 for `Taxi` is deprecated. "
            "Please use `Taxi-v4` instead",
        ),
        (
            "CartPole-v9",
            "env: 'CartPole-v9' is not available in gymnasium 1.4.0: Environment version `v9` for environment "
            "`CartPole` doesn't exist. It provides versioned environments: [ `v0`, `v1` ]",
        ),
        (
            "KppoTest/NeedsBox2D-v0",
            "env: 'KppoTest/NeedsBox2D-v0' needs Box2D, which is not installed: pip install -e \".[box2d]\"",
        ),
        (
            "KppoTest/NeedsMuJoCo-v0",
            "env: 'KppoTest/NeedsMuJoCo-v0' needs MuJoCo, which is not installed: pip install -e \".[mujoco]\"",
        ),
        pytest.param(
            "CarRacing-v3",
            "env: 'CarRacing-v3' needs Box2D, which is not installed: pip install -e \".[box2d]\"",
            marks=pytest.mark.skipif(_installed("Box2D"), reason="Box2D is installed"),
        ),
        pytest.param(
            "HalfCheetah-v5",
            "env: 'HalfCheetah-v5' needs MuJoCo, which is not installed: pip install -e \".[mujoco]\"",
            marks=pytest.mark.skipif(_installed("mujoco"), reason="MuJoCo is installed"),
        ),
    ],
)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_gymnasium_errors_for_an_id_are_one_line(env_id, message):
    for vectorization in ("sync", "async"):
        with pytest.raises(ValueError) as excinfo:
            gym_vec_env(env_id, 2, vectorization=vectorization)
        assert str(excinfo.value) == message
        assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__  # gymnasium's traceback: gone


@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_one_line_is_also_gymnasiums_error_class(vectorization):
    """SB3's test_spaces.py makes Taxi-v3 and falls back on Taxi-v4 with `except gym.error.DeprecatedEnv`: kppo's
    one-line error is a ValueError and gymnasium's class of the error too."""
    for env_id, kind in (
        ("Taxi-v3", gym.error.DeprecatedEnv),
        ("NoSuchEnv-v0", gym.error.NameNotFound),
        ("CartPole-v9", gym.error.VersionNotFound),
    ):
        with pytest.raises(kind) as excinfo:
            gym_vec_env(env_id, 2, vectorization=vectorization)
        assert isinstance(excinfo.value, ValueError) and str(excinfo.value).startswith(f"env: {env_id!r}")
    try:
        env = kppo.make_vec_env("Taxi-v3", n_envs=2, seed=0)
    except gym.error.DeprecatedEnv:
        env = kppo.make_vec_env("Taxi-v4", n_envs=2, seed=0)
    assert env.num_envs == 2
    env.close()


def test_env_kwargs_the_env_does_not_take_are_named():
    with pytest.raises(ValueError) as excinfo:
        gym_vec_env("CartPole-v1", env_kwargs={"gravity": 3.0})
    assert str(excinfo.value) == (
        "env_kwargs: 'CartPole-v1' does not take {'gravity': 3.0}: "
        "CartPoleEnv.__init__() got an unexpected keyword argument 'gravity'"
    )


def test_train_and_ppo_give_the_one_line():
    expected = "env: 'NoSuchEnv-v0' is not available in gymnasium 1.4.0: Environment `NoSuchEnv` doesn't exist"
    with pytest.raises(ValueError, match=r"^env: ") as excinfo:
        kppo.train("NoSuchEnv-v0", kppo.Config(env_backend="gymnasium"))
    assert str(excinfo.value).startswith(expected) and "\n" not in str(excinfo.value)
    with pytest.raises(ValueError) as excinfo:
        kppo.PPO("MlpPolicy", "NoSuchEnv-v0")
    assert str(excinfo.value).startswith(expected)


@pytest.mark.parametrize("space", [TUPLE_OBS, NESTED_DICT_OBS], ids=["tuple", "nested-dict"])
def test_flattenable_observation_spaces_name_the_wrapper(space):
    with pytest.raises(ValueError) as excinfo:
        gym_vec_env(lambda: ToyEnv(observation_space=space))
    message = str(excinfo.value)
    assert message.startswith("observation_space: expected ") and "\n" not in message
    assert message.endswith("; wrap the env in gymnasium.wrappers.FlattenObservation (one-hot Box)")


# --- bad envs and factories: one line naming what was expected and what was received --------------------------


class BadEnv(ToyEnv):
    """ToyEnv that misbehaves at step `at` (0: in reset) as `how` says; with `seeded`, only when first reset with
    that seed (a vector env reset with seed 0 seeds env i with i: `seeded=1` picks env 1, in any process)."""

    def __init__(self, how: str, at: int = 1, seeded: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.how, self.at, self.seeded, self.bad = how, at, seeded, seeded is None

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self.bad = self.bad or seed == self.seeded
        if self.bad and self.at == 0:
            return self._bad(obs, info, "reset")
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.bad and self.t == self.at:
            return self._bad(obs, info, "step", reward, terminated, truncated)
        return obs, reward, terminated, truncated, info

    def _bad(self, obs, info, call, *middle):
        if self.how == "raise":
            raise KeyError("boom")
        if self.how == "old api":  # gym < 0.26: (obs, reward, done, info) and a bare reset observation
            return obs if call == "reset" else (obs, middle[0], middle[1], info)
        if self.how == "shape":
            obs = np.zeros(5, np.float32)
        elif self.how == "dtype":
            obs = np.array(["a", "b"])
        elif self.how == "none":
            obs = None
        elif self.how == "reward":
            middle = (np.ones(2), *middle[1:])
        elif self.how == "info":
            info = None
        return (obs, info) if call == "reset" else (obs, *middle, info)


@pytest.mark.parametrize(
    "how, at, message",
    [
        ("raise", 3, "env raised KeyError in step() at step 3 in env 1: 'boom'"),
        ("raise", 0, "env raised KeyError in reset() at step 0 in env 1: 'boom'"),
        (
            "old api",
            2,
            "env returned 4 values from step() at step 2 in env 1, "
            "expected 5 (obs, reward, terminated, truncated, info)",
        ),
        (
            "old api",
            0,
            "env returned one ndarray, not a tuple, from reset() at step 0 in env 1, expected 2 (obs, info)",
        ),
        (
            "shape",
            1,
            "env returned an observation of shape (5,) float32 from step() at step 1 in env 1, "
            "expected shape (2,) float32 (Box(-inf, inf, (2,), float32))",
        ),
        (
            "dtype",
            0,
            "env returned an observation of shape (2,) <U1 from reset() at step 0 in env 1, "
            "expected shape (2,) float32 (Box(-inf, inf, (2,), float32))",
        ),
        (
            "none",
            2,
            "env returned an observation of type NoneType (None) from step() at step 2 in env 1, "
            "expected shape (2,) float32 (Box(-inf, inf, (2,), float32))",
        ),
        (
            "reward",
            1,
            "env returned a reward of shape (2,) float64 from step() at step 1 in env 1, "
            "expected a scalar (e.g. float(reward))",
        ),
        ("info", 1, "env returned an info of type NoneType (None) from step() at step 1 in env 1, expected a dict"),
    ],
)
@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.filterwarnings("ignore:.*ERROR:")  # AsyncVectorEnv logs the worker's traceback as a warning
def test_a_sub_env_that_raises_or_breaks_the_api_is_named(how, at, message, vectorization):
    with gym_vec_env(lambda: BadEnv(how, at, seeded=1), 2, vectorization=vectorization) as env:  # env 1 misbehaves
        with pytest.raises(ValueError) as excinfo:
            env.reset(seed=0)
            for _ in range(at):
                env.step(np.zeros(2, np.int64))
    assert str(excinfo.value) == message
    if how == "raise" and vectorization == "sync":  # the original is chained (async: gymnasium logs its traceback)
        assert isinstance(excinfo.value.__cause__, KeyError)


def test_a_vector_env_kppo_did_not_build_that_raises_is_one_line():
    with gym_vec_env(_same_step(ToyEnv, lambda: BadEnv("raise", 2))) as env:
        env.reset()
        env.step(np.zeros(2, np.int64))
        with pytest.raises(ValueError) as excinfo:
            env.step(np.zeros(2, np.int64))
    assert str(excinfo.value) == "env raised KeyError in step() at step 2: 'boom'"
    assert isinstance(excinfo.value.__cause__, KeyError)


def _needs_a_size(size):
    return ToyEnv()


def _discrete_zero():
    return ToyEnv(action_space=spaces.Discrete(0))


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: gym_vec_env(_needs_a_size),
            "env: expected a zero-argument factory, got _needs_a_size, which needs "
            "size; pass an env id, a gym.Env or e.g. functools.partial(_needs_a_size, ...)",
        ),
        (
            lambda: gym_vec_env(gym.make),
            "env: expected a zero-argument factory, got make, which needs id; pass an env "
            "id, a gym.Env or e.g. functools.partial(make, ...)",
        ),
        (
            lambda: gym_vec_env(_discrete_zero),
            "env: the factory _discrete_zero raised ValueError: n (counts) have to be positive, actual value: 0",
        ),
        (
            lambda: gym_vec_env(lambda: None),
            "env: expected the factory <lambda>.<locals>.<lambda> to return a gym.Env, got NoneType",
        ),
        (
            lambda: gym_vec_env(lambda: ToyEnv(observation_space=spaces.Box(0, 1, (0,)))),
            "observation_space: expected at least one observation element, got Box([], [], (0,), float32) of size 0",
        ),
        (
            lambda: gym_vec_env(lambda: ToyEnv(observation_space=spaces.Box(0, 1, (3, 0)))),
            "observation_space: expected at least one observation element, got Box([], [], (3, 0), float32) of size 0",
        ),
        (
            lambda: gym_vec_env(lambda: ToyEnv(action_space=spaces.Box(-1, 1, (0,)))),
            "action_space: expected at least one action dimension, got Box([], [], (0,), float32) of shape (0,)",
        ),
        (
            lambda: gym_vec_env(lambda: ToyEnv(action_space=spaces.MultiDiscrete([]))),
            "action_space: expected at least one action dimension, got MultiDiscrete([]) of shape (0,)",
        ),
        (
            lambda: gym_vec_env(gym.make_vec("CartPole-v1", 2), 4),
            "num_envs: expected 2, the vector env's number of sub-envs, got 4; set Config(num_envs=2)",
        ),
    ],
    ids=[
        "factory-with-args",
        "gym.make",
        "discrete-0",
        "factory-none",
        "zero-size-obs",
        "zero-size-2d-obs",
        "zero-size-box-action",
        "empty-multidiscrete",
        "num-envs-mismatch",
    ],
)
def test_bad_factories_and_spaces_are_one_line(make, message):
    with pytest.raises(ValueError) as excinfo:
        make()
    assert str(excinfo.value).replace("test_bad_factories_and_spaces_are_one_line.", "") == message


TINY = dict(num_envs=2, num_steps=8, total_timesteps=2 * 8 * 4, eval_freq=2, num_eval_envs=2, num_hidden_units=8)


class RaisesAtItsStep(ToyEnv):
    """Raises KeyError at its `at`-th step since construction (across episodes)."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.steps = at, 0

    def step(self, action):
        self.steps += 1
        if self.steps == self.at:
            raise KeyError("boom")
        return super().step(action)


def test_train_stops_with_one_line_when_an_env_raises_and_keeps_the_checkpoint(tmp_path):
    def factory():  # every env raises at its 20th step: training iteration 3 (evaluation episodes last 5 steps)
        return gym.wrappers.TimeLimit(RaisesAtItsStep(20), 5)

    with pytest.raises(ValueError) as excinfo:
        kppo.train(factory, kppo.Config(**TINY), checkpoint_dir=tmp_path)
    assert str(excinfo.value) == "env raised KeyError in step() at step 20 in env 0: 'boom'"
    assert isinstance(excinfo.value.__cause__, KeyError)
    assert (tmp_path / "checkpoint").is_file()  # the first round's checkpoint is kept


def test_train_names_a_vector_env_with_another_num_envs():
    vec_env = gym.make_vec(
        "CartPole-v1", 2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    with pytest.raises(ValueError) as excinfo:
        kppo.train(vec_env, kppo.Config(**{**TINY, "num_envs": 4}))
    assert (
        str(excinfo.value) == "num_envs: expected 2, the vector env's number of sub-envs, got 4; set Config(num_envs=2)"
    )
