"""The observations int8 export calibrates on (and checks parity on), since a deployed artifact sees exactly those
states: the policy's own, recorded from deterministic episodes in a gymnasium env (`record_observations`), or
recorded elsewhere and read from a .npz file (`load_observations`)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from kppo.agent.policy import Policy
from kppo.exporter.runner import input_batch
from kppo.gym_envs.checks import make_env
from kppo.gym_envs.spaces import input_rows


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


def load_observations(path: str | Path, policy: Policy) -> np.ndarray:
    """Recorded observations (a robot's log) from the .npz file `path`, as the policy's input rows [N, *input_shape]
    (`Policy.input_row`) for int8 calibration and the parity check. The array `obs` is read (or the file's only
    array); a Dict observation space reads one array per key, named by the keys. Each array holds a batch of
    observations of its space, [N, *shape], numbers only; read with `allow_pickle=False`, so loading runs no code.
    Every refusal is one ValueError line naming the file, what was expected and what it holds."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:  # missing, not a zip, an object array (pickled)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{path.name}: expected a .npz file of observation arrays, got: {reason}") from None
    space = policy.observation_space
    wanted = list(space.spaces) if isinstance(space, gym.spaces.Dict) else ["obs"]
    if not isinstance(space, gym.spaces.Dict) and "obs" not in arrays and len(arrays) == 1:
        arrays = {"obs": next(iter(arrays.values()))}
    missing = [name for name in wanted if name not in arrays]
    if missing:
        raise ValueError(f"{path.name}: expected the array(s) {wanted}, got arrays {sorted(arrays)}")
    subspaces = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else {"obs": space}
    for name in wanted:
        array, shape = arrays[name], tuple(subspaces[name].shape or ())
        dims = ", ".join(["N", *map(str, shape)])
        if array.dtype.kind not in "biuf" or array.ndim != len(shape) + 1 or array.shape[1:] != shape or not len(array):
            raise ValueError(
                f"{path.name}: {name}: expected observations [{dims}] of numbers (N >= 1), "
                f"got {array.dtype} {list(array.shape)}"
            )
    rows = (
        arrays["obs"]
        if policy.image
        else input_rows(space, arrays if isinstance(space, gym.spaces.Dict) else arrays["obs"])
    )
    try:
        return input_batch(rows, policy.input_shape, policy.input_dtype)
    except ValueError as error:
        raise ValueError(f"{path.name}: {error}") from None
