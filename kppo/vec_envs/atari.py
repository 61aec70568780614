"""Stable-Baselines3's Atari preprocessing (`stable_baselines3.common.atari_wrappers.AtariWrapper` and its parts) and
`make_atari_env` (`stable_baselines3.common.env_util`), without torch (ale-py's own vector env:
`kppo.vec_envs.ale_vector`).

`AtariWrapper(env)` stacks SB3's wrappers in SB3's order, innermost first:

    StickyActionEnv      repeat the previous action with `action_repeat_probability` (off by default)
    NoopResetEnv         1..noop_max NOOP frames after each reset (drawn from the env's `np_random`)
    MaxAndSkipEnv        repeat the action `frame_skip` frames, sum the rewards, max over the last 2 RGB frames
    EpisodicLifeEnv      `terminated` when a life is lost; `reset` then plays one NOOP step, and resets the game
                         only after a real game over (so every life of one game is an "episode" to the learner)
    FireResetEnv         FIRE then action 2 after every reset (also after a lost life), where the game has FIRE
    WarpFrame            RGB -> grey (cv2.COLOR_RGB2GRAY) -> 84x84 (cv2.INTER_AREA): Box(0, 255, (84, 84, 1), uint8)
    ClipRewardEnv        reward -> sign(reward)

and `make_atari_env` wraps every env in a `Monitor` *under* the AtariWrapper, as SB3's `make_vec_env` does: the
Monitor sees raw frames, so `info["episode"]` and `monitor.csv` hold whole games, their unclipped score and their
length in frames (not agent steps), written at a real game over only.

As in SB3 the underlying ALE env must not skip frames itself: use the `*NoFrameskip-v4` ids (frameskip 1, no sticky
actions); "ALE/Pong-v5" skips 4 frames and repeats actions with probability 0.25 by default (a `UserWarning` says
so; pass `env_kwargs={"frameskip": 1, "repeat_action_probability": 0.0}` for SB3's setting). ale-py 0.12 registers
its ids on import: this module imports it (`gymnasium.register_envs(ale_py)`) in every process that makes an env.

gymnasium's `AtariPreprocessing` is not used: of SB3's steps it matches only the no-op reset and the 84x84
INTER_AREA resize. It has no FIRE reset and no reward clipping; its `terminal_on_life_loss` resets the whole game at
each lost life (SB3 plays on); its grey frames are the ALE palette's (`getScreenGrayscale`), not cv2's RGB->grey of
the max-pooled RGB frames; its reset observation is the frame after the no-ops (SB3's: the pooled frame after the
FIRE steps); and on the frame an episode ends it stops before reading the screen (SB3 reads it). ale-py's own
`AtariVectorEnv` is compared in `AtariVectorEnvAdapter`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from kppo.core.errors import ArgumentError
from kppo.gym_envs.checks import make_env
from kppo.vec_envs.env_util import make_vec_env
from kppo.vec_envs.monitor import Monitor
from kppo.vec_envs.vec_env import VecEnv

#: SB3's index of NOOP, FIRE and the action FireResetEnv plays after FIRE.
NOOP, FIRE, AFTER_FIRE = 0, 1, 2

ATARI_EXTRA = 'pip install -e ".[atari]"'


def register_ale() -> None:
    """Imports ale-py, which registers the ALE ids with gymnasium; a one-line error when it is missing."""
    try:
        import ale_py
    except ImportError:
        raise ValueError(f"env: Atari envs need ale-py, which is not installed: {ATARI_EXTRA}") from None
    gym.register_envs(ale_py)


def _cv2() -> Any:
    try:
        import cv2
    except ImportError:
        raise ValueError(f"WarpFrame: resizing needs opencv-python, which is not installed: {ATARI_EXTRA}") from None
    return cv2


def _action_meanings(env: gym.Env, wrapper: str) -> list[str]:
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    if meanings is None:
        raise ArgumentError(f"env: {wrapper} expected an ALE env (ale_py.AtariEnv), got {type(env.unwrapped).__name__}")
    return list(meanings())


def _lives(env: gym.Env) -> int:
    return int(cast(Any, env.unwrapped).ale.lives())


# ---------------------------------------------------------------------------------------------------------------
# SB3's wrappers
# ---------------------------------------------------------------------------------------------------------------


class StickyActionEnv(gym.Wrapper):
    """SB3's `StickyActionEnv(env, action_repeat_probability)`: with that probability the previous action is played
    again instead of the new one (NOOP after a reset). Machado et al. 2018, https://arxiv.org/abs/1709.06009."""

    def __init__(self, env: gym.Env, action_repeat_probability: float):
        super().__init__(env)
        meanings = _action_meanings(env, "StickyActionEnv")
        if meanings[NOOP] != "NOOP":
            raise ArgumentError(f"env: StickyActionEnv expected action 0 to be NOOP, got the actions {meanings}")
        self.action_repeat_probability = float(action_repeat_probability)
        self._sticky_action = NOOP

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Resets the env; the sticky action is NOOP again."""
        self._sticky_action = NOOP
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Plays `action`, or the previous action with probability `action_repeat_probability`."""
        if self.unwrapped.np_random.random() >= self.action_repeat_probability:
            self._sticky_action = action
        return self.env.step(self._sticky_action)


class NoopResetEnv(gym.Wrapper):
    """SB3's `NoopResetEnv(env, noop_max=30)`: after `reset`, a number of NOOP steps drawn uniformly from
    1..noop_max with the env's `np_random` (or `override_num_noops`), resetting again if the game ends meanwhile."""

    def __init__(self, env: gym.Env, noop_max: int = 30):
        super().__init__(env)
        meanings = _action_meanings(env, "NoopResetEnv")
        if meanings[NOOP] != "NOOP":
            raise ArgumentError(f"env: NoopResetEnv expected action 0 to be NOOP, got the actions {meanings}")
        self.noop_max = int(noop_max)
        self.override_num_noops: int | None = None
        self.noop_action = NOOP

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Resets the env, then plays the no-ops; the last observation and info."""
        obs, info = self.env.reset(**kwargs)
        noops = self.override_num_noops
        if noops is None:
            noops = int(self.unwrapped.np_random.integers(1, self.noop_max + 1))
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class FireResetEnv(gym.Wrapper):
    """SB3's `FireResetEnv(env)`: after `reset`, FIRE then action 2, for games that wait for FIRE (Breakout). The
    reset info is empty, as SB3's."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = _action_meanings(env, "FireResetEnv")
        if len(meanings) < 3 or meanings[FIRE] != "FIRE":
            raise ArgumentError(
                f"env: FireResetEnv expected action 1 to be FIRE, of 3 or more, got the actions {meanings}"
            )

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Resets the env, then plays FIRE and action 2; the last observation and an empty info."""
        self.env.reset(**kwargs)
        obs = None
        for action in (FIRE, AFTER_FIRE):
            obs, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated:
                obs, _ = self.env.reset(**kwargs)  # SB3 keeps the step's obs here; the reset's is the one that holds
        return obs, {}


class EpisodicLifeEnv(gym.Wrapper):
    """SB3's `EpisodicLifeEnv(env)`: a lost life ends the episode (`terminated`), but `reset` restarts the game only
    after a real game over (or truncation); otherwise it plays one NOOP step and the game goes on (DQN, Mnih et al.
    2015). `was_real_done` says which; a `reset` in mid-game, seeded or not, also plays on (as SB3's)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Steps the env; `terminated` also when a life was lost."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = bool(terminated or truncated)
        lives = _lives(self.env)
        if 0 < lives < self.lives:  # lives > 0: some games (Qbert) sit at 0 lives a few frames before game over
            terminated = True
        self.lives = lives  # after the check: bonus lives raise it
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        """Resets the game after a real game over; else plays one NOOP step and the game goes on."""
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)  # past the lost-life frame
            if terminated or truncated:  # that step can end the game (SB3: else Monitor's "needs reset")
                obs, info = self.env.reset(**kwargs)
        self.lives = _lives(self.env)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    """SB3's `MaxAndSkipEnv(env, skip=4)`: the action repeated `skip` frames (fewer when the episode ends), rewards
    summed, the observation the pixel-wise max of the last two frames (Atari sprites flicker between frames). When
    the episode ends early the frames kept from before are pooled, as in SB3 ("the done frame doesn't matter")."""

    def __init__(self, env: gym.Env, skip: int = 4):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise ArgumentError(f"env: MaxAndSkipEnv expected a Box observation space, got {space}")
        self._obs_buffer = np.zeros((2, *space.shape), dtype=space.dtype)
        self._skip = int(skip)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict]:
        """Plays `action` `skip` times: the max of the last two frames, the summed reward, the last flags and info."""
        total_reward, terminated, truncated, info = 0.0, False, False, cast(dict, {})
        for i in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self._skip - 2:  # the last two frames: buffer 0, then 1
                self._obs_buffer[i - (self._skip - 2)] = obs
            total_reward += float(reward)
            if terminated or truncated:
                break
        return self._obs_buffer.max(axis=0), total_reward, terminated, truncated, info


class ClipRewardEnv(gym.RewardWrapper):
    """SB3's `ClipRewardEnv(env)`: each reward replaced by its sign, -1, 0 or +1."""

    def reward(self, reward: SupportsFloat) -> float:
        """The sign of `reward`: -1.0, 0.0 or 1.0."""
        return float(np.sign(float(reward)))


class WarpFrame(gym.ObservationWrapper):
    """SB3's `WarpFrame(env, width=84, height=84)`: RGB frames to grey (cv2.COLOR_RGB2GRAY), resized with
    cv2.INTER_AREA: Box(0, 255, (height, width, 1)) of the env's dtype."""

    def __init__(self, env: gym.Env, width: int = 84, height: int = 84):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise ArgumentError(f"env: WarpFrame expected a Box observation space, got {space}")
        self._cv2 = _cv2()
        self.width, self.height = int(width), int(height)
        self.observation_space = spaces.Box(0, 255, (self.height, self.width, 1), dtype=cast(Any, space.dtype))

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """An RGB frame as a grey (height, width, 1) image."""
        grey = self._cv2.cvtColor(observation, self._cv2.COLOR_RGB2GRAY)
        return self._cv2.resize(grey, (self.width, self.height), interpolation=self._cv2.INTER_AREA)[:, :, None]


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ArgumentError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return int(value)


class AtariWrapper(gym.Wrapper):
    """SB3's `AtariWrapper(env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=True,
    clip_reward=True, action_repeat_probability=0.0)`: the module docstring's wrappers, in SB3's order; a
    `frame_skip` of 0 or 1 skips no frame, `noop_max=0` plays no NOOP.

    Args:
        env: an ALE env without frame skipping ("PongNoFrameskip-v4"); a `UserWarning` when it skips frames itself.
        noop_max: most NOOP frames after a reset. Defaults to `30`.
        frame_skip: frames per agent step (max-pooled over the last two). Defaults to `4`.
        screen_size: side of the square grey observation. Defaults to `84`.
        terminal_on_life_loss: a lost life ends the episode (`EpisodicLifeEnv`). Defaults to `True`.
        clip_reward: rewards to their sign. Defaults to `True`.
        action_repeat_probability: sticky actions (`StickyActionEnv`). Defaults to `0.0`.
    """

    def __init__(
        self,
        env: gym.Env,
        noop_max: int = 30,
        frame_skip: int = 4,
        screen_size: int = 84,
        terminal_on_life_loss: bool = True,
        clip_reward: bool = True,
        action_repeat_probability: float = 0.0,
    ):
        noop_max = _check_int("noop_max", noop_max, 0)
        frame_skip = _check_int("frame_skip", frame_skip, 0)
        screen_size = _check_int("screen_size", screen_size, 1)
        if not 0.0 <= float(action_repeat_probability) <= 1.0:
            raise ArgumentError(
                f"action_repeat_probability: expected a probability in [0, 1], got {action_repeat_probability!r}"
            )
        meanings = _action_meanings(env, "AtariWrapper")
        own_skip = getattr(env.unwrapped, "_frameskip", 1)
        if frame_skip > 1 and own_skip != 1:  # SB3 skips again silently; its docstring asks for NoFrameskip-v4
            warnings.warn(
                f"AtariWrapper: the env already skips frames (frameskip={own_skip!r}), so each step lasts "
                f"{frame_skip} x that; use a NoFrameskip-v4 id or env_kwargs={{'frameskip': 1, "
                "'repeat_action_probability': 0.0}",
                stacklevel=2,
            )
        if action_repeat_probability > 0.0:
            env = StickyActionEnv(env, action_repeat_probability)
        if noop_max > 0:
            env = NoopResetEnv(env, noop_max=noop_max)
        if frame_skip > 1:
            env = MaxAndSkipEnv(env, skip=frame_skip)
        if terminal_on_life_loss:
            env = EpisodicLifeEnv(env)
        if "FIRE" in meanings:
            env = FireResetEnv(env)
        env = WarpFrame(env, width=screen_size, height=screen_size)
        if clip_reward:
            env = ClipRewardEnv(env)
        super().__init__(env)


# ---------------------------------------------------------------------------------------------------------------
# make_atari_env
# ---------------------------------------------------------------------------------------------------------------


def _make_ale(env_id: str, **env_kwargs: Any) -> gym.Env:
    """`gym.make(env_id, **env_kwargs)` after registering ale-py's ids in this process (SubprocVecEnv's workers make
    their envs in their own processes)."""
    register_ale()
    return make_env(env_id, env_kwargs)


def atari_env(env_id: str, **wrapper_kwargs: Any) -> gym.Env:
    """One env as `make_atari_env` makes it: `gym.make(env_id)` in a `Monitor` in `AtariWrapper(env,
    **wrapper_kwargs)`; where the id sets no `max_episode_steps`, its time limit is the ALE's own frame budget
    (`max_num_frames_per_episode`: the ALE truncates there too, so only evaluations, which play at most that many
    steps, see it). What `Config.atari_wrapper` trains on (`kppo.vec_envs.preprocessed.make_preprocessed_env`)."""
    register_ale()
    kwargs: dict[str, Any] = {}
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        spec = None  # `make_env` names what is wrong with the id
    frames = spec.kwargs.get("max_num_frames_per_episode") if spec is not None else None
    if spec is not None and spec.max_episode_steps is None and frames:
        kwargs["max_episode_steps"] = int(frames)
    return AtariWrapper(Monitor(make_env(env_id, kwargs)), **wrapper_kwargs)


def make_atari_env(
    env_id: str | Callable[..., gym.Env],
    n_envs: int = 1,
    seed: int | None = None,
    start_index: int = 0,
    monitor_dir: str | None = None,
    wrapper_kwargs: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    vec_env_cls: type[VecEnv] | str | None = None,
    vec_env_kwargs: dict[str, Any] | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
) -> VecEnv:
    """SB3's `make_atari_env`: `make_vec_env` with `wrapper_class=AtariWrapper`. Env i (rank = start_index + i) is
    `gym.make(env_id, **env_kwargs)` (or `env_id(**env_kwargs)`), its action space seeded with seed + rank, in a
    `Monitor` (writing `monitor_dir/<rank>.monitor.csv` when given), in `AtariWrapper(env, **wrapper_kwargs)`; all
    in `vec_env_cls` (default `DummyVecEnv`; "sync" / "async" are read too), seeded with `seed` for the first reset.

    Observations are Box(0, 255, (84, 84, 1), uint8), channels last; stack them with `VecFrameStack(env, 4)`. As
    kppo's `make_vec_env`, `gym.make` is not given SB3's `render_mode="rgb_array"`: pass it in `env_kwargs`."""
    return make_vec_env(
        functools.partial(_make_ale, env_id) if isinstance(env_id, str) else env_id,
        n_envs,
        seed,
        start_index,
        monitor_dir,
        AtariWrapper,
        env_kwargs,
        vec_env_cls,
        vec_env_kwargs,
        monitor_kwargs,
        wrapper_kwargs,
    )


# ---------------------------------------------------------------------------------------------------------------
# ale-py's vector env
# ---------------------------------------------------------------------------------------------------------------


__all__ = [
    "AtariWrapper",
    "ClipRewardEnv",
    "EpisodicLifeEnv",
    "FireResetEnv",
    "MaxAndSkipEnv",
    "NoopResetEnv",
    "StickyActionEnv",
    "WarpFrame",
    "atari_env",
    "make_atari_env",
    "register_ale",
]
