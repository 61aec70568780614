"""The policy's own observations, recorded from deterministic episodes in a gymnasium env: what int8 export
calibrates on (and checks parity on), since a deployed artifact sees exactly those states."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from kppo.gym_envs.checks import make_env
from kppo.agent.policy import Policy


def policy_env(policy: Policy, env: Any) -> gym.Env | None:
    """A gymnasium env from an id, an Env (returned as is) or a factory; None when it cannot be made or its spaces
    are not the policy's (e.g. a config's default env when `train` was given another env)."""
    made = env
    if isinstance(env, str):
        try:
            made = make_env(env, {})
        except ValueError:  # not a registered gymnasium id (or its package is missing)
            return None
    elif callable(env) and not isinstance(env, gym.Env):
        made = env()
    if not isinstance(made, gym.Env):
        return None
    if made.observation_space != policy.observation_space or made.action_space != policy.action_space:
        if made is not env:
            made.close()
        return None
    return made


def record_observations(policy: Policy, env: Any, steps: int, seed: int = 0) -> np.ndarray | None:
    """The policy's own observations as input rows [steps, *input_shape] (`Policy.input_row`; an image policy's
    uint8 images): deterministic episodes (what a deployed artifact does) in `env` (a gymnasium id, `Env` or factory)
    reset with seeds seed, seed + 1, ...; None when `env` cannot be made or has other spaces than the policy."""
    made = policy_env(policy, env)
    if made is None:
        return None
    rows: list[np.ndarray] = []
    episode = 0
    try:
        while len(rows) < steps:
            obs, _ = made.reset(seed=seed + episode)
            done, state = False, None
            while not done and len(rows) < steps:
                rows.append(policy.input_row(obs))
                if policy.lstm is not None:  # a recurrent policy carries its state through the episode
                    action, state = policy.predict(obs, state, deterministic=True)
                else:
                    action = policy.get_action(obs)
                obs, _, terminated, truncated, _ = made.step(action.item() if np.ndim(action) == 0 else action)
                done = terminated or truncated
            episode += 1
    finally:
        if made is not env:
            made.close()
    return np.asarray(rows, policy.input_dtype)
