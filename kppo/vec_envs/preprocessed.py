"""One env as `Config.atari_wrapper` and `Config.frame_stack` ask: kppo's Config options for SB3's Atari preprocessing
and frame stacking, on an env id."""

from __future__ import annotations

import gymnasium as gym

from kppo.gym_envs.checks import make_env
from kppo.vec_envs.atari import atari_env
from kppo.vec_envs.vec_frame_stack import FrameStack


def make_preprocessed_env(env_id: str, atari_wrapper: bool = False, frame_stack: int = 1) -> gym.Env:
    """One env of `env_id` as `Config.atari_wrapper` and `Config.frame_stack` ask: SB3's Atari preprocessing as
    `make_atari_env` applies it (`kppo.vec_envs.atari.atari_env`), then the last `frame_stack` observations stacked
    (`FrameStack`: SB3's `VecFrameStack` for one env). A `functools.partial` of it is the factory kppo's host path
    makes its training and evaluation envs from."""
    env = atari_env(env_id) if atari_wrapper else make_env(env_id, {})
    return FrameStack(env, frame_stack) if frame_stack > 1 else env
