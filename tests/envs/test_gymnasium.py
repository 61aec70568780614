"""The host adapter over gymnasium vector envs: inputs, SAME_STEP semantics, flattening, validation."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from kppo.envs.gymnasium import GymVecEnv, HostStep, make_vec_env
from kppo.envs.spaces import flat_dim, flatten_obs

UNBOUNDED = dict(low=-np.inf, high=np.inf, dtype=np.float32)


class ToyEnv(gym.Env):
    """Observation t*100 + arange (per Box) at step t; reward 1; optional termination and NaNs at given steps."""

    def __init__(
        self,
        observation_space: spaces.Space = spaces.Box(shape=(2,), **UNBOUNDED),
        action_space: spaces.Space = spaces.Discrete(2),
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
    with make_vec_env("CartPole-v1", 3, seed=0) as env:
        assert (env.num_envs, env.flat_obs_dim, env.env_id, env.max_episode_steps) == (3, 4, "CartPole-v1", 500)
        assert env.observation_space.shape == (4,) and env.action_space == spaces.Discrete(2)
        obs = env.reset()
        assert obs.shape == (3, 4) and obs.dtype == np.float32
        result = env.step(np.array([0, 1, 0]))
        assert isinstance(result, HostStep)
        assert result.obs.shape == result.final_obs.shape == (3, 4) and result.obs.dtype == np.float32
        assert result.reward.dtype == np.float32 and result.reward.shape == (3,)
        assert result.terminated.dtype == result.truncated.dtype == np.bool_
        np.testing.assert_array_equal(result.final_obs, result.obs)


def test_seed_makes_resets_reproducible():
    with make_vec_env("CartPole-v1", 2, seed=3) as a, make_vec_env("CartPole-v1", 2) as b:
        np.testing.assert_array_equal(a.reset(), b.reset(seed=3))


def test_env_instance():
    with make_vec_env(gym.make("CartPole-v1", max_episode_steps=7)) as env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (1, "CartPole-v1", 7)
        assert env.reset(seed=0).shape == (1, 4)


def test_factory_and_verbose_env_checker():
    with pytest.warns(UserWarning, match="infinity"):  # check_env's warnings about CartPole's unbounded Box
        env = make_vec_env(lambda: gym.make("CartPole-v1"), 2, verbose=1)
    with env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (2, "CartPole-v1", 500)
        assert env.reset(seed=0).shape == (2, 4)


def test_existing_vector_env():
    vec_env = _same_step(*[lambda: gym.make("CartPole-v1", max_episode_steps=9)] * 3)
    with make_vec_env(vec_env) as env:
        assert (env.num_envs, env.env_id, env.max_episode_steps) == (3, "CartPole-v1", 9)
        assert env.vec_env is vec_env
        assert env.reset(seed=1).shape == (3, 4)


def test_async_cartpole():
    with make_vec_env("CartPole-v1", 2, vectorization="async", env_kwargs={"max_episode_steps": 3}) as env:
        assert env.max_episode_steps == 3
        env.reset(seed=0)
        for _ in range(3):
            result = env.step(np.zeros(2, np.int64))
        np.testing.assert_array_equal(result.truncated, [True, True])
        assert not np.isclose(result.obs, result.final_obs).all(axis=1).any()


# --- SAME_STEP semantics ---------------------------------------------------------------------------------------


def test_termination_returns_terminal_final_obs():
    with make_vec_env("CartPole-v1", 1, seed=0) as env:
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
        env = make_vec_env("CartPole-v1", 2, seed=5, env_kwargs={"max_episode_steps": 5})
    else:
        env = make_vec_env(lambda: gym.make("CartPole-v1", max_episode_steps=5), 2, seed=5)
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
    with make_vec_env(lambda: ToyEnv(observation_space=space), 2) as env:
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

    with make_vec_env(lambda: ToyEnv(observation_space=space, terminate_at=2)) as env:
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
    with make_vec_env(vec_env) as env:
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
    with make_vec_env(_same_step(ToyEnv, lambda: ToyEnv(**kwargs), ToyEnv)) as env:
        with pytest.raises(ValueError) as excinfo:
            env.reset()
            for _ in range(step):
                env.step(np.zeros(3, np.int64))
    message = str(excinfo.value)
    assert message.startswith(f"env returned a non-finite {what} at step {step} in env 1: ")
    assert "nan" in message and "\n" not in message


def test_non_finite_final_observation_raises():
    with make_vec_env(_same_step(lambda: ToyEnv(terminate_at=2, nan_obs_at=2))) as env:
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


def _next_step_vector_env():
    return SyncVectorEnv([lambda: gym.make("CartPole-v1")], autoreset_mode=AutoresetMode.NEXT_STEP)


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: make_vec_env(lambda: ToyEnv(observation_space=TUPLE_OBS)), "observation_space"),
        (lambda: make_vec_env(lambda: ToyEnv(observation_space=spaces.Discrete(4))), "observation_space"),
        (lambda: make_vec_env(lambda: ToyEnv(observation_space=NESTED_DICT_OBS)), "observation_space"),
        (lambda: make_vec_env(lambda: ToyEnv(action_space=spaces.Text(5))), "action_space"),
        (lambda: make_vec_env(lambda: ToyEnv(action_space=spaces.Box(-1, 1, shape=(2, 2)))), "action_space"),
        (lambda: make_vec_env(ToyEnv(action_space=spaces.Text(5))), "action_space"),
        (lambda: make_vec_env(_next_step_vector_env()), "autoreset_mode"),
        (lambda: make_vec_env("CartPole-v1", 2, vectorization="threads"), "vectorization"),
        (lambda: make_vec_env(gym.make("CartPole-v1"), 2), "num_envs"),
        (lambda: make_vec_env("CartPole-v1", 0), "num_envs"),
        (lambda: make_vec_env(ToyEnv(), env_kwargs={"max_episode_steps": 5}), "env_kwargs"),
        (lambda: make_vec_env(42), "env"),
        (lambda: make_vec_env(lambda: 42), "env"),
    ],
)
def test_unsupported_inputs_raise_one_line_errors(make, field):
    with pytest.raises(ValueError) as excinfo:
        make()
    _assert_one_line_error(excinfo, field)


def test_step_before_reset_raises():
    with make_vec_env("CartPole-v1") as env, pytest.raises(RuntimeError, match="before reset"):
        env.step(np.zeros(1, np.int64))


def test_gym_vec_env_wraps_directly():
    env = GymVecEnv(_same_step(ToyEnv, ToyEnv), env_id="toy", max_episode_steps=3)
    assert (env.env_id, env.max_episode_steps, env.num_envs, env.flat_obs_dim) == ("toy", 3, 2, 2)
    env.close()
    env.close()  # idempotent
