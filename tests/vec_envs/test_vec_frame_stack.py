"""kppo.vec_envs.vec_frame_stack: VecFrameStack against a naive numpy stack of a recorded observation sequence (real
ALE frames; episode ends and terminal observations included), channels first and last, Dict spaces, partial resets;
the same stacks on the vector env kppo.PPO trains on (VecTransposeImage: test_vec_transpose.py)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from kppo.gym_envs.make import gym_vec_env as make_gym_vec_env
from kppo.vec_envs.vec_env import DummyVecEnv, VecEnv, VecMonitor
from kppo.vec_envs.vec_frame_stack import FrameStack, VecFrameStack, VectorFrameStack, shift_in


class _Counter(gym.Env):
    """Observations filled with a running count (distinct at every step), episodes of the lengths in `lengths`
    (cycled; odd ones end truncated, even ones terminated)."""

    def __init__(self, space: gym.spaces.Space, lengths: tuple[int, ...], offset: int = 0):
        self.observation_space, self.action_space = space, gym.spaces.Discrete(2)
        self.lengths, self.count, self.episode, self.t = lengths, offset, 0, 0

    def _obs(self) -> Any:
        self.count += 1
        if isinstance(self.observation_space, gym.spaces.Dict):
            return {key: self._fill(sub, i) for i, (key, sub) in enumerate(self.observation_space.spaces.items())}
        return self._fill(self.observation_space, 0)

    def _fill(self, space: gym.spaces.Box, i: int) -> np.ndarray:
        base = np.arange(int(np.prod(space.shape))).reshape(space.shape) % 7
        return ((base + self.count + 50 * i) % 200 + 1).astype(space.dtype)  # never 0: zeros are padding

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        length = self.lengths[self.episode % len(self.lengths)]
        ended = self.t >= length
        self.episode += ended
        return self._obs(), 1.0, ended and length % 2 == 0, ended and length % 2 == 1, {}


def _counters(space: gym.spaces.Space, num_envs: int = 2) -> DummyVecEnv:
    return DummyVecEnv(
        [lambda i=i: _Counter(space, (*(3, 5, 2, 4)[i:], 6, 1), offset=1000 * i) for i in range(num_envs)]
    )


def _atari() -> Any:
    """kppo.vec_envs.atari, when ale-py and OpenCV (the atari extra) are installed."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    from kppo.vec_envs import atari

    return atari


def _naive(frames: list[np.ndarray], n_stack: int, axis: int) -> np.ndarray:
    """The last `n_stack` frames of an episode, zeros before its first, concatenated along `axis`."""
    padded = [np.zeros_like(frames[0])] * max(n_stack - len(frames), 0) + frames[-n_stack:]
    return np.concatenate(padded, axis=axis)


def _check_against_naive(stacked: VecEnv, plain: VecEnv, n_stack: int, axis: int, steps: int, key: str | None = None):
    """Steps `stacked` and its unstacked twin `plain` with the same random actions; every stacked observation and
    terminal observation equals the naive stack of `plain`'s sequence. Returns the number of episode ends."""
    pick = (lambda obs: obs[key]) if key is not None else (lambda obs: obs)
    obs, raw = stacked.reset(), plain.reset()
    history = [[pick(raw)[i]] for i in range(plain.num_envs)]
    rng, ends = np.random.default_rng(0), 0
    for _ in range(steps):
        for i in range(plain.num_envs):
            np.testing.assert_array_equal(pick(obs)[i], _naive(history[i], n_stack, axis))
        actions = rng.integers(0, plain.action_space.n, plain.num_envs)
        obs, rewards, dones, infos = stacked.step(actions)
        raw, raw_rewards, raw_dones, raw_infos = plain.step(actions)
        np.testing.assert_array_equal(rewards, raw_rewards)
        np.testing.assert_array_equal(dones, raw_dones)
        for i in range(plain.num_envs):
            if dones[i]:
                ends += 1
                terminal = _naive([*history[i], pick(raw_infos[i]["terminal_observation"])], n_stack, axis)
                np.testing.assert_array_equal(pick(infos[i]["terminal_observation"]), terminal)
                assert infos[i]["TimeLimit.truncated"] == raw_infos[i]["TimeLimit.truncated"]
                history[i] = []
            history[i].append(pick(raw)[i])
    return ends


def test_stacks_ale_frames_as_a_naive_numpy_stack():
    atari = _atari()
    stacked = VecFrameStack(atari.make_atari_env("BreakoutNoFrameskip-v4", n_envs=2, seed=1), 4)
    plain = atari.make_atari_env("BreakoutNoFrameskip-v4", n_envs=2, seed=1)
    assert stacked.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert _check_against_naive(stacked, plain, 4, axis=-1, steps=100) >= 4  # Breakout: a lost life ends one
    stacked.close()
    plain.close()


@pytest.mark.parametrize(
    "space, channels_order, stacked_shape, axis",
    [
        (gym.spaces.Box(0, 255, (6, 5, 1), np.uint8), None, (6, 5, 3), -1),  # HWC image: channels last
        (gym.spaces.Box(0, 255, (1, 6, 5), np.uint8), None, (3, 6, 5), 0),  # CHW image: channels first
        (gym.spaces.Box(0, 255, (1, 6, 5), np.uint8), "last", (1, 6, 15), -1),
        (gym.spaces.Box(-1, 1, (2, 4), np.float32), None, (2, 12), -1),  # not an image: last
        (gym.spaces.Box(-1, 1, (2, 4), np.float32), "first", (6, 4), 0),
        (gym.spaces.Box(-1, 1, (4,), np.float32), None, (12,), -1),
    ],
)
def test_stacks_along_the_channel_axis(space, channels_order, stacked_shape, axis):
    stacked = VecFrameStack(_counters(space), 3, channels_order)
    assert stacked.observation_space.shape == stacked_shape and stacked.observation_space.dtype == space.dtype
    np.testing.assert_array_equal(stacked.observation_space.low, np.repeat(space.low, 3, axis))
    assert _check_against_naive(stacked, _counters(space), 3, axis, steps=25) >= 6


@pytest.mark.parametrize(
    "dtype, n_stack, channels, axis",
    [
        (np.uint8, 4, 1, -1),  # Atari: one 32-bit word a pixel
        (np.uint8, 2, 1, -1),  # 16-bit words
        (np.uint8, 4, 2, -1),  # 64-bit words, two channels an observation
        (np.uint16, 2, 1, -1),
        (np.float32, 2, 1, -1),  # negative and NaN bits move as they are
        (np.float16, 4, 1, -1),
        (np.uint8, 3, 1, -1),  # 3 bytes a pixel: the strided copy
        (np.uint8, 4, 1, 1),  # channels first
        (np.float32, 3, 2, 1),
    ],
)
def test_shift_in_is_concatenation_of_the_newest_frames(dtype, n_stack, channels, axis):
    rng = np.random.default_rng(0)
    shape = (3, 5, 4, channels * n_stack) if axis == -1 else (3, channels * n_stack, 5, 4)
    new_shape = (*shape[:-1], channels) if axis == -1 else (3, channels, 5, 4)
    if np.issubdtype(dtype, np.floating):
        frames, obs = rng.normal(size=shape).astype(dtype), rng.normal(size=new_shape).astype(dtype)
        frames.flat[7] = np.nan
    else:
        frames = rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)
        obs = rng.integers(0, np.iinfo(dtype).max, new_shape, endpoint=True).astype(dtype)
    before = frames.copy()
    kept = (slice(None), slice(channels, None)) if axis == 1 else (..., slice(channels, None))
    expected = np.concatenate((frames[kept], obs), axis=axis)
    shifted = shift_in(frames, obs, axis % frames.ndim)
    assert shifted.shape == expected.shape and shifted.dtype == dtype
    np.testing.assert_array_equal(shifted.view(np.uint8), expected.view(np.uint8))  # bit for bit, NaNs included
    np.testing.assert_array_equal(frames.view(np.uint8), before.view(np.uint8))  # the input is left as it was


def test_stacks_two_channel_frames_as_a_naive_numpy_stack():
    space = gym.spaces.Box(0, 255, (6, 5, 2), np.uint8)
    assert _check_against_naive(VecFrameStack(_counters(space), 4), _counters(space), 4, -1, steps=25) >= 6


def test_n_stack_one_is_the_observation_itself():
    space = gym.spaces.Box(0, 255, (6, 5, 1), np.uint8)
    assert _check_against_naive(VecFrameStack(_counters(space), 1), _counters(space), 1, -1, steps=12) > 0


def test_stacks_every_key_of_a_dict_space():
    space = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (1, 6, 5), np.uint8), "vector": gym.spaces.Box(-1, 1, (3,), np.float32)}
    )
    stacked = VecFrameStack(_counters(space), 2)
    assert stacked.observation_space["image"].shape == (2, 6, 5)  # channels first, detected per key
    assert stacked.observation_space["vector"].shape == (6,)
    for key, axis in (("image", 0), ("vector", -1)):
        assert _check_against_naive(VecFrameStack(_counters(space), 2), _counters(space), 2, axis, 20, key) >= 5
    by_key = VecFrameStack(_counters(space), 2, {"image": "last", "vector": None})
    assert by_key.observation_space["image"].shape == (1, 6, 10)
    assert _check_against_naive(by_key, _counters(space), 2, -1, 20, "image") >= 5


def test_heuristic_warns_when_the_middle_dimension_is_smallest():
    with pytest.warns(UserWarning, match="Treating image space as channels-last"):
        stacked = VecFrameStack(_counters(gym.spaces.Box(0, 255, (6, 1, 5), np.uint8)), 2)
    assert stacked.observation_space.shape == (6, 1, 10)


def test_partial_reset_restarts_only_the_masked_stacks():
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    env = VectorFrameStack(
        SyncVectorEnv([lambda: _Counter(space, (9,)) for _ in range(2)], autoreset_mode=AutoresetMode.SAME_STEP), 3
    )
    env.reset(seed=0)
    before, *_ = env.step(np.zeros(2, np.int64))
    obs, _ = env.reset(options={"reset_mask": np.array([True, False])})
    assert not obs[0, :4].any() and obs[0, 4:].all()
    np.testing.assert_array_equal(obs[1], before[1])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(0, 255, (6, 5, 1), np.uint8),
        gym.spaces.Dict(
            {"image": gym.spaces.Box(0, 255, (1, 6, 5), np.uint8), "vector": gym.spaces.Box(-1, 1, (3,), np.float32)}
        ),
    ],
)
def test_one_envs_frame_stack_gives_the_vector_stacks_and_final_observations(space):
    """`FrameStack` on each env of a SAME_STEP vector env (what `Config.frame_stack` makes) against `VectorFrameStack`
    on the vector env (what `VecFrameStack` trains on): the same observations, and the same last stacks of finished
    episodes in infos["final_obs"]."""
    factories = [lambda i=i: _Counter(space, (*(3, 5, 2, 4)[i:], 6, 1), offset=1000 * i) for i in range(2)]
    vector = VectorFrameStack(SyncVectorEnv(factories, autoreset_mode=AutoresetMode.SAME_STEP), 3)
    per_env = SyncVectorEnv([lambda f=f: FrameStack(f(), 3) for f in factories], autoreset_mode=AutoresetMode.SAME_STEP)
    assert per_env.single_observation_space == vector.single_observation_space

    def flat(obs: Any) -> np.ndarray:  # one env's observation (a Dict's keys in order), flattened
        return gym.spaces.utils.flatten(per_env.single_observation_space, obs)

    def row(obs: Any, i: int) -> Any:
        return {key: value[i] for key, value in obs.items()} if isinstance(obs, dict) else obs[i]

    obs, ends = (vector.reset(seed=0)[0], per_env.reset(seed=0)[0]), 0
    for _ in range(20):
        for i in range(2):
            np.testing.assert_array_equal(flat(row(obs[0], i)), flat(row(obs[1], i)))
        steps = vector.step(np.zeros(2, np.int64)), per_env.step(np.zeros(2, np.int64))
        obs = steps[0][0], steps[1][0]
        ended = steps[0][2] | steps[0][3]
        np.testing.assert_array_equal(ended, steps[1][2] | steps[1][3])
        for i in np.flatnonzero(ended):
            ends += 1
            finals = [flat(step[4]["final_obs"][i]) for step in steps]
            np.testing.assert_array_equal(*finals)
    assert ends >= 5


def test_kppo_steps_the_same_stacks_on_the_vector_env():
    space = gym.spaces.Box(0, 255, (6, 5, 1), np.uint8)
    sb3_api, stacked = VecFrameStack(_counters(space), 4), VecFrameStack(_counters(space), 4)
    assert isinstance(stacked.vector_env, VectorFrameStack)
    with make_gym_vec_env(stacked, seed=0) as gym_env:  # what kppo.PPO makes of it
        assert gym_env.observation_space.shape == (6, 5, 4)
        sb3_api.seed(0)
        np.testing.assert_array_equal(gym_env.reset(), sb3_api.reset().reshape(2, -1))
        for _ in range(12):
            step = gym_env.step(np.zeros(2, np.int64))
            obs, _, dones, infos = sb3_api.step(np.zeros(2, np.int64))
            np.testing.assert_array_equal(step.obs, obs.reshape(2, -1))
            for i in np.flatnonzero(dones):
                np.testing.assert_array_equal(step.final_obs[i], infos[i]["terminal_observation"].reshape(-1))


def test_wrappers_above_and_below_keep_the_stacks_and_the_seed():
    atari = _atari()
    plain = atari.make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=3)
    monitored = VecMonitor(VecFrameStack(atari.make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=3), 2))
    assert monitored.pending_seed == 3 and monitored.observation_space.shape == (84, 84, 2)
    assert isinstance(monitored.vector_env.env, VectorFrameStack)
    first, reference = monitored.reset(), plain.reset()  # make_atari_env's seed, through both wrappers
    np.testing.assert_array_equal(first[..., 1:], reference)
    assert not first[..., :1].any()
    plain.close()
    monitored.close()


def test_kppo_ppo_trains_on_the_stacked_frames():
    atari = _atari()
    import kppo
    from kppo.sb3.vec_normalize import VecNormalize

    stacked = VecFrameStack(atari.make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=0), 4)
    env = VecNormalize(stacked, norm_obs=False, norm_reward=False)  # kppo.PPO unwraps it, finds the stack below
    model = kppo.PPO("MlpPolicy", env, n_steps=4, batch_size=8, n_epochs=1, policy_kwargs={"net_arch": [4]}, seed=0)
    assert model.observation_space.shape == (84, 84, 4) and model.get_vec_normalize_env() is env
    model.learn(8)
    twin = VecFrameStack(atari.make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=0), 4)
    reset = twin.reset()
    assert not reset[..., :3].any() and reset[..., 3].any()
    np.testing.assert_array_equal(model.rollout_buffer.observations[0], reset.reshape(2, -1))  # the stacked frames
    actions, _ = model.predict(reset)
    assert actions.shape == (2,)
    twin.close()


def test_bad_arguments_are_one_line_errors():
    space = gym.spaces.Box(0, 255, (6, 5, 1), np.uint8)
    with pytest.raises(ValueError, match=r"^n_stack: expected a positive int, got 0$"):
        VecFrameStack(_counters(space), 0)
    with pytest.raises(ValueError, match=r"^channels_order: expected 'first', 'last' or None, got 'middle'$"):
        VecFrameStack(_counters(space), 2, "middle")
    with pytest.raises(TypeError, match=r"^channels_order: a mapping is for a Dict observation space, got Box"):
        VecFrameStack(_counters(space), 2, {"image": "last"})
    with pytest.raises(ValueError, match=r"^channels_order: expected an order for every key of the Dict space"):
        VecFrameStack(_counters(gym.spaces.Dict({"a": space})), 2, {"b": "last"})
    with pytest.raises(TypeError, match=r"^observation_space: VecFrameStack stacks Box and Dict spaces, got Discrete"):
        VecFrameStack(_counters(gym.spaces.Dict({"a": gym.spaces.Discrete(3)})), 2)
    with pytest.raises(ValueError, match=r"^venv: VecFrameStack expected a kppo VecEnv .*, got SyncVectorEnv$"):
        VecFrameStack(SyncVectorEnv([lambda: _Counter(space, (3,))]), 2)
