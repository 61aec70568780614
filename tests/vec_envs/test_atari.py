"""kppo.vec_envs.atari on real ALE games (Pong, Breakout, Freeway): SB3's AtariWrapper step by step against the raw
frames and actions the ALE saw (no-op resets, frame skipping with max-pooling, episodic life, FIRE resets, sticky
actions, reward clipping), `make_atari_env` (spaces, seeding, Monitor files, SubprocVecEnv), and ale-py's
AtariVectorEnv through `AtariVectorEnvAdapter`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
ale_py = pytest.importorskip("ale_py")

from gymnasium.vector import AutoresetMode  # noqa: E402

from kppo.vec_envs.ale_vector import AtariVectorEnvAdapter  # noqa: E402
from kppo.vec_envs.atari import (  # noqa: E402
    AtariWrapper,
    ClipRewardEnv,
    FireResetEnv,
    make_atari_env,
    register_ale,
)
from kppo.gym_envs.make import gym_vec_env as make_gym_vec_env  # noqa: E402
from kppo.vec_envs.vec_env import SubprocVecEnv, VecEnv  # noqa: E402

register_ale()

ROOT = Path(__file__).resolve().parents[2]


class _Recorder(gym.Wrapper):
    """Between the raw ALE env and the AtariWrapper: every raw call, ("reset", None, 0.0, frame) or
    ("step", action, reward, frame)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.log: list[tuple[str, Any, float, np.ndarray]] = []

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.log.append(("reset", None, 0.0, obs))
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.log.append(("step", int(action), float(reward), obs))
        return obs, reward, terminated, truncated, info


def _wrapped(game: str, **kwargs: Any) -> tuple[AtariWrapper, _Recorder]:
    recorder = _Recorder(gym.make(f"{game}NoFrameskip-v4"))
    return AtariWrapper(recorder, **kwargs), recorder


def _warp(frame: np.ndarray) -> np.ndarray:
    """SB3's WarpFrame by hand: grey, then 84x84 with INTER_AREA, a channel axis."""
    return cv2.resize(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), (84, 84), interpolation=cv2.INTER_AREA)[:, :, None]


def _raw_actions_since_last_reset(recorder: _Recorder) -> list[int]:
    last = max(i for i, entry in enumerate(recorder.log) if entry[0] == "reset")
    return [entry[1] for entry in recorder.log[last + 1 :]]


# ---------------------------------------------------------------------------------------------------------------
# AtariWrapper
# ---------------------------------------------------------------------------------------------------------------


def test_noop_reset_plays_1_to_noop_max_noops_then_fire():
    env, recorder = _wrapped("Pong", noop_max=3, terminal_on_life_loss=False)  # else reset() in mid-game plays on
    counts = []
    for seed in range(12):
        recorder.log.clear()
        env.reset(seed=seed)
        actions = _raw_actions_since_last_reset(recorder)
        noops = actions.index(1)  # Pong has FIRE: FireResetEnv's FIRE and action 2 follow, 4 frames each
        assert actions == [0] * noops + [1] * 4 + [2] * 4
        counts.append(noops)
    assert set(counts) == {1, 2, 3}  # uniform on 1..noop_max (SB3: integers(1, noop_max + 1))
    noop_env = env.env.env.env.env.env  # ClipReward > WarpFrame > FireReset > MaxAndSkip > NoopReset
    noop_env.override_num_noops = 7
    recorder.log.clear()
    env.reset(seed=0)
    assert _raw_actions_since_last_reset(recorder)[:8] == [0] * 7 + [1]
    env.close()


def test_frame_skip_max_pools_the_last_two_raw_frames():
    env, recorder = _wrapped("Pong", clip_reward=False)
    obs, _ = env.reset(seed=0)
    raw = [entry[3] for entry in recorder.log[-2:]]  # the reset's last step (action 2): 4 frames, pooled
    np.testing.assert_array_equal(obs, _warp(np.maximum(*raw)))
    rng = np.random.default_rng(0)
    pooled_differs = 0
    for _ in range(40):
        start = len(recorder.log)
        action = int(rng.integers(0, 6))
        obs, reward, terminated, truncated, _ = env.step(action)
        frames = recorder.log[start:]
        assert [entry[1] for entry in frames] == [action] * 4 and not (terminated or truncated)
        assert reward == sum(entry[2] for entry in frames)
        expected = _warp(np.maximum(frames[-2][3], frames[-1][3]))
        np.testing.assert_array_equal(obs, expected)
        pooled_differs += not np.array_equal(expected, _warp(frames[-1][3]))
    assert pooled_differs > 0  # the max over two frames is not just the last frame
    assert obs.shape == (84, 84, 1) and obs.dtype == np.uint8
    env.close()


def test_episodic_life_ends_episodes_on_lost_lives_and_resets_the_game_after_game_over():
    env, recorder = _wrapped("Breakout")
    ale = env.unwrapped.ale
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    lives_at_ends, real_resets = [], 0
    for _ in range(2000):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))
        if not (terminated or truncated):
            continue
        lives, frame = ale.lives(), ale.getEpisodeFrameNumber()
        lives_at_ends.append(lives)
        recorder.log.clear()
        env.reset()
        if lives > 0:  # the game goes on: no ALE reset, one NOOP step then FIRE (Breakout waits for FIRE)
            assert ale.lives() == lives and ale.getEpisodeFrameNumber() > frame
            assert [entry[0] for entry in recorder.log] == ["step"] * 12
            assert [entry[1] for entry in recorder.log] == [0] * 4 + [1] * 4 + [2] * 4
        else:  # game over: a real reset, a new game
            assert recorder.log[0][0] == "reset" and ale.lives() == 5
            real_resets += 1
            if real_resets == 2:
                break
    assert lives_at_ends[:5] == [4, 3, 2, 1, 0] and real_resets == 2
    env.close()


def test_without_terminal_on_life_loss_lives_are_lost_without_ending_the_episode():
    env, _ = _wrapped("Breakout", terminal_on_life_loss=False)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 4)))
        if terminated or truncated:
            break
    assert terminated and env.unwrapped.ale.lives() == 0  # one episode for the whole game
    env.close()


def test_fire_reset_only_for_games_with_fire():
    breakout, _ = _wrapped("Breakout")
    freeway, recorder = _wrapped("Freeway")  # NOOP, UP, DOWN: no FIRE
    assert FireResetEnv in _wrapper_types(breakout) and FireResetEnv not in _wrapper_types(freeway)
    freeway.reset(seed=0)
    assert set(_raw_actions_since_last_reset(recorder)) == {0}
    breakout.close()
    freeway.close()


def _wrapper_types(env: gym.Env) -> list[type]:
    types = []
    while isinstance(env, gym.Wrapper):
        types.append(type(env))
        env = env.env
    return types


def test_sticky_actions_repeat_the_previous_action():
    env, recorder = _wrapped("Breakout", action_repeat_probability=1.0)  # always the sticky NOOP of the reset
    env.reset(seed=0)
    for action in (1, 2, 3):
        env.step(action)
    assert {entry[1] for entry in recorder.log if entry[0] == "step"} == {0}
    env.close()


def test_reward_clipping_gives_the_sign_of_the_summed_reward():
    class Rewards(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (1,))
        action_space = gym.spaces.Discrete(2)

        def __init__(self):
            self.rewards = [3.5, -2.0, 0.0, 0.25]

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.zeros(1, np.float32), self.rewards.pop(0), False, False, {}

    env = ClipRewardEnv(Rewards())
    env.reset()
    assert [env.step(0)[1] for _ in range(4)] == [1.0, -1.0, 0.0, 1.0]
    clipped, _ = _wrapped("Breakout")
    raw, _ = _wrapped("Breakout", clip_reward=False)
    clipped.reset(seed=3)
    raw.reset(seed=3)
    rng = np.random.default_rng(3)
    rewards = []
    for _ in range(300):
        action = int(rng.integers(0, 4))
        a, b = clipped.step(action), raw.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        rewards.append((a[1], b[1]))
        if a[2] or a[3]:
            clipped.reset()
            raw.reset()
    got, unclipped = np.array(rewards).T
    assert unclipped.sum() > 0 and np.array_equal(got, np.sign(unclipped))
    clipped.close()
    raw.close()


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(
        ValueError, match=r"^env: AtariWrapper expected an ALE env \(ale_py.AtariEnv\), got CartPoleEnv$"
    ):
        AtariWrapper(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match=r"^noop_max: expected an int >= 0, got -1$"):
        AtariWrapper(gym.make("PongNoFrameskip-v4"), noop_max=-1)
    with pytest.raises(ValueError, match=r"^action_repeat_probability: expected a probability in \[0, 1\], got 2$"):
        AtariWrapper(gym.make("PongNoFrameskip-v4"), action_repeat_probability=2)
    with pytest.warns(UserWarning, match=r"the env already skips frames \(frameskip=4\)"):
        AtariWrapper(gym.make("ALE/Pong-v5")).close()
    with pytest.raises(ValueError, match=r"^n_envs: expected a positive int, got 0$"):
        make_atari_env("PongNoFrameskip-v4", n_envs=0)
    with pytest.raises(ValueError, match=r"^vec_env_cls: expected DummyVecEnv, SubprocVecEnv"):
        make_atari_env("PongNoFrameskip-v4", vec_env_cls=dict)


# ---------------------------------------------------------------------------------------------------------------
# make_atari_env
# ---------------------------------------------------------------------------------------------------------------


def test_make_atari_env_spaces_and_dtypes():
    env = make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=0)
    assert env.num_envs == 2 and env.action_space == gym.spaces.Discrete(6)
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, 1), np.uint8)
    obs = env.reset()
    assert obs.shape == (2, 84, 84, 1) and obs.dtype == np.uint8
    obs, rewards, dones, infos = env.step(np.array([0, 1]))
    assert obs.shape == (2, 84, 84, 1) and obs.dtype == np.uint8
    assert rewards.dtype == np.float32 and dones.dtype == bool and len(infos) == 2
    assert env.env_is_wrapped(AtariWrapper) == [True, True]
    env.close()


def test_the_pong_config_is_rl_zoos_atari_setting_and_trains_on_stacked_frames():
    import kppo
    from kppo.training.runners import make_runner

    config = kppo.Config.from_yaml(ROOT / "configs" / "pong.yaml")
    # RL-Zoo's ppo.yml `atari`: 8 envs x 128 steps, batch_size 256, 4 epochs, lin_2.5e-4, lin_0.1, 1e7 steps
    assert (config.num_envs, config.num_steps, config.minibatch_size, config.num_epochs) == (8, 128, 256, 4)
    assert (config.learning_rate, config.lr_schedule, config.clip_range, config.clip_schedule) == (
        2.5e-4,
        "linear",
        0.1,
        "linear",
    )
    assert (config.atari_wrapper, config.frame_stack, config.total_timesteps, config.ent_coef) == (True, 4, 10**7, 0.01)
    tiny = config.replace(num_envs=2, num_steps=16, num_minibatches=2, num_epochs=1, total_timesteps=2 * 16 * 2)
    runner = make_runner(None, tiny)  # config.env: PongNoFrameskip-v4
    try:
        assert runner.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        result = runner.run_iterations(runner.state, 1)
        assert result.completed == 1 and float(result.diagnostics.minibatch_steps) == 2
        assert runner.clip_range(result.state) == pytest.approx(0.1)  # iteration 0 of 2: 0.1 * (1 - 0 / 2)
    finally:
        runner.close()
    with make_gym_vec_env(runner.eval_source, 1, seed=1) as eval_env:  # evaluation envs: the same factory
        assert eval_env.observation_space == runner.observation_space
        assert eval_env.max_episode_steps == 108_000  # the ALE's frame budget: evaluations play whole games


def _trajectory(env: VecEnv, steps: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    values = [env.reset()]
    for _ in range(steps):
        obs, rewards, dones, _ = env.step(rng.integers(0, env.action_space.n, env.num_envs))
        values += [obs, rewards, dones]
    return values


def test_same_seed_same_observations_other_seed_others():
    # Pong: the game runs during the no-ops (Breakout waits for FIRE, so its no-ops change nothing)
    first, second, other = (make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=s) for s in (3, 3, 4))
    a, b, c = (_trajectory(env, 30) for env in (first, second, other))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, z) for x, z in zip(a, c))
    for env in (first, second, other):
        env.close()


def test_subproc_vec_env_gives_the_same_observations():
    dummy = make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=5)
    subproc = make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=5, vec_env_cls=SubprocVecEnv)
    try:
        for x, y in zip(_trajectory(dummy, 10), _trajectory(subproc, 10)):
            np.testing.assert_array_equal(x, y)
    finally:
        dummy.close()
        subproc.close()


def test_monitor_records_whole_games_in_frames(tmp_path):
    env = make_atari_env(
        "BreakoutNoFrameskip-v4", n_envs=2, seed=0, monitor_dir=str(tmp_path), wrapper_kwargs={"clip_reward": False}
    )
    env.reset()
    rng = np.random.default_rng(0)
    returns, lives_lost, episode = np.zeros(2), 0, None
    for _ in range(3000):
        _, rewards, dones, infos = env.step(rng.integers(0, 4, 2))
        returns += rewards
        lives_lost += int(dones[0])
        if "episode" in infos[0]:
            episode = infos[0]["episode"]
            frames = infos[0]["episode_frame_number"]  # the ALE's count of the game's frames
            break
    env.close()
    assert episode is not None and lives_lost == 5  # five "episodes" for the learner, one game for the Monitor
    assert episode["r"] == returns[0] and episode["l"] == frames
    header, columns, row = (tmp_path / "0.monitor.csv").read_text().splitlines()[:3]
    assert json.loads(header[1:])["env_id"] == "BreakoutNoFrameskip-v4" and columns == "r,l,t"
    assert [float(v) for v in row.split(",")[:2]] == [episode["r"], episode["l"]]
    assert (tmp_path / "1.monitor.csv").exists()


# ---------------------------------------------------------------------------------------------------------------
# ale-py's AtariVectorEnv
# ---------------------------------------------------------------------------------------------------------------


def _ale_vector(autoreset_mode=AutoresetMode.SAME_STEP, **kwargs):
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv("breakout", 2, autoreset_mode=autoreset_mode, **kwargs)


@pytest.mark.parametrize("life_loss", ["episodic_life", "life_loss_info"])
def test_atari_vector_env_adapter_gives_kppo_its_final_observations(life_loss):
    with make_gym_vec_env(AtariVectorEnvAdapter(_ale_vector(**{life_loss: True})), seed=0) as env:
        assert env.observation_space.shape == (4, 84, 84)
        obs, rng, ends = env.reset().reshape(2, 4, 84, 84), np.random.default_rng(0), {True: 0, False: 0}
        for _ in range(300):
            step = env.step(rng.integers(0, 4, 2))
            new_obs, final_obs = step.obs.reshape(2, 4, 84, 84), step.final_obs.reshape(2, 4, 84, 84)
            for i in np.flatnonzero(step.terminated | step.truncated):
                np.testing.assert_array_equal(final_obs[i, :3], obs[i, 1:])  # the stack the episode ended with
                game_over = step.infos["lives"][i] == 5  # ale-py reset the game: a new stack
                if game_over:
                    assert not new_obs[i, :3].any()
                else:  # life_loss_info: the game goes on, and so does ale-py's stack
                    np.testing.assert_array_equal(final_obs[i], new_obs[i])
                ends[game_over] += 1
            obs = new_obs
        assert ends[True] > 0 and (ends[False] > 0) == (life_loss == "life_loss_info")


def test_atari_vector_env_adapter_takes_sb3_seeds():
    first, second = VecEnv(AtariVectorEnvAdapter(_ale_vector())), VecEnv(AtariVectorEnvAdapter(_ale_vector()))
    for env in (first, second):
        env.seed(7)  # a list of seeds for gymnasium's reset, an array for ale-py's
    a, b = _trajectory(first, 30), _trajectory(second, 30)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    first.close()
    second.close()


def test_atari_vector_env_adapter_refusals():
    env = _ale_vector(autoreset_mode=AutoresetMode.NEXT_STEP)
    with pytest.raises(
        ValueError, match=r"^env: expected an AtariVectorEnv with autoreset_mode=.*SAME_STEP, got 'NextStep'$"
    ):
        AtariVectorEnvAdapter(env)
    env.close()
    with pytest.raises(ValueError, match=r"^env: expected an ale_py.vector_env.AtariVectorEnv, got SyncVectorEnv$"):
        AtariVectorEnvAdapter(gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")]))


@pytest.mark.slow
def test_kppo_ppo_trains_on_the_atari_vector_env():
    import kppo

    model = kppo.PPO(
        "MlpPolicy",
        AtariVectorEnvAdapter(_ale_vector(life_loss_info=True)),
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        policy_kwargs={"net_arch": [4]},
        seed=0,
    )
    model.learn(128)
    assert model.observation_space.shape == (4, 84, 84) and model.num_timesteps == 128
    env = model.get_env()
    actions, _ = model.predict(env.reset())
    assert actions.shape == (2,)
    env.close()
