"""Stable-Baselines3's `VecTransposeImage` (stable_baselines3.common.vec_env.vec_transpose) on kppo's SB3-style
`VecEnv` (`kppo.vec_envs.vec_env`): image observations from HxWxC to CxHxW, done once as a gymnasium vector
wrapper (`VectorTransposeImage`) that is the VecEnv's `vector_env`, so `kppo.PPO` trains on the transposed
observations the SB3 API returns; a finished episode's last observation is transposed too, in gymnasium's
`infos["final_obs"]` and in SB3's `infos[i]["terminal_observation"]`."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, cast

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from kppo.core.errors import ArgumentError
from kppo.vec_envs.vec_env import VecEnv, VecEnvWrapper, checked_venv
from kppo.gym_envs.spaces import is_image_space, is_image_space_channels_first
from kppo.gym_envs.vector_info import final_observations, same_step, with_final_observations


def transpose_space(space: spaces.Box, key: str = "") -> spaces.Box:
    """An HxWxC image space as CxHxW (SB3's `VecTransposeImage.transpose_space`)."""
    where = f"observation_space[{key!r}]" if key else "observation_space"
    if not is_image_space(space):
        raise ArgumentError(f"{where}: expected an image (a 3-D uint8 Box in 0..255), got {space}")
    if is_image_space_channels_first(space):
        raise ArgumentError(f"{where}: expected channels last (HxWxC) to transpose, got shape {space.shape}")
    return spaces.Box(np.transpose(space.low, (2, 0, 1)), np.transpose(space.high, (2, 0, 1)), dtype=np.uint8)


def transpose_image(image: np.ndarray) -> np.ndarray:
    """An HxWxC image, or a batch NxHxWxC, as CxHxW (NxCxHxW), contiguous."""
    image = np.asarray(image)
    return np.ascontiguousarray(np.moveaxis(image, -1, -3))


class VectorTransposeImage(VectorWrapper):
    """A gymnasium vector wrapper turning HxWxC image observations into CxHxW (a Dict's image keys; final
    observations too): what `VecTransposeImage` exposes as its `vector_env`. `env` in SAME_STEP autoreset mode."""

    def __init__(self, env: VectorEnv):
        env = same_step(env)
        super().__init__(env)
        space = env.single_observation_space
        if isinstance(space, spaces.Dict):
            self.image_space_keys = [key for key, sub in space.spaces.items() if is_image_space(sub)]
            self.single_observation_space = spaces.Dict(
                OrderedDict(
                    (key, transpose_space(cast(spaces.Box, sub), key) if key in self.image_space_keys else sub)
                    for key, sub in space.spaces.items()
                )
            )
        else:
            self.image_space_keys = []
            self.single_observation_space = transpose_space(cast(spaces.Box, space))
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)

    def transpose_observations(self, obs: Any) -> Any:
        """Observations (one env's or a batch) with their images as CxHxW."""
        if isinstance(obs, dict):
            return {
                key: transpose_image(value) if key in self.image_space_keys else value for key, value in obs.items()
            }
        return transpose_image(obs)

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        """Resets the vector env; the observations as CxHxW."""
        obs, infos = self.env.reset(seed=seed, options=options)
        return self.transpose_observations(obs), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        """Steps the vector env; the observations and finished episodes' last observations as CxHxW."""
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        ended = np.asarray(terminated, bool) | np.asarray(truncated, bool)
        if ended.any() and "final_obs" in infos:
            finals = final_observations(infos, ended)
            rows = {i: self.transpose_observations(final) for i, final in finals.items()}
            infos = with_final_observations(infos, self.num_envs, rows)
        return self.transpose_observations(obs), rewards, terminated, truncated, infos


class VecTransposeImage(VecEnvWrapper):
    """SB3's `VecTransposeImage(venv, skip=False)`: image observations from HxWxC to CxHxW (a Dict's image keys;
    `terminal_observation` too), for programs written for PyTorch's channels-first convolutions; `skip=True`
    leaves them as they are. kppo's CNNs are channels last (NHWC) and take CxHxW images as well, so kppo needs no
    transposition: this wrapper is for SB3 code that asks for it."""

    def __init__(self, venv: VecEnv, skip: bool = False):
        venv = checked_venv(venv, "VecTransposeImage")
        space = venv.observation_space
        if not (is_image_space(space) or isinstance(space, spaces.Dict)):
            raise ArgumentError(f"observation_space: expected an image or a Dict observation space, got {space}")
        self.skip = bool(skip)
        super().__init__(venv, None if self.skip else VectorTransposeImage(venv.vector_env))
        self.image_space_keys = [] if self.skip else cast(VectorTransposeImage, self.vector_env).image_space_keys

    transpose_space = staticmethod(transpose_space)
    transpose_image = staticmethod(transpose_image)

    def transpose_observations(self, observations: Any) -> Any:
        """SB3's method: `observations` with their images as CxHxW (unchanged when `skip`)."""
        if self.skip:
            return observations
        return cast(VectorTransposeImage, self.vector_env).transpose_observations(observations)


__all__ = ["VecTransposeImage", "VectorTransposeImage", "transpose_image", "transpose_space"]
