"""gymnasium spaces kppo accepts, and flattening their observations to float32 vectors (numpy + gymnasium only).

Observations: a Box of any shape is flattened in C order; a Dict of Boxes is the concatenation of its flattened Boxes
in the Dict space's key order (`space.spaces`; gymnasium sorts the keys of a plain dict alphabetically unless
`sort_keys=False`, and keeps an OrderedDict's order). Actions: a 1-D Box, Discrete, 1-D MultiDiscrete or 1-D
MultiBinary. Anything else is a one-line `ValueError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces


def one_line(value: Any) -> str:
    """`repr(value)` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(repr(value).split())


def check_observation_space(space: spaces.Space) -> None:
    """Raises a one-line ValueError unless `space` is a Box or a non-empty Dict whose values are all Boxes."""
    if isinstance(space, spaces.Box):
        return
    if isinstance(space, spaces.Dict) and space.spaces and all(isinstance(s, spaces.Box) for s in space.values()):
        return
    raise ValueError(f"observation_space: expected a Box or a Dict of Boxes, got {one_line(space)}")


def check_action_space(space: spaces.Space) -> None:
    """Raises a one-line ValueError unless `space` is a 1-D Box, Discrete, 1-D MultiDiscrete or 1-D MultiBinary."""
    if isinstance(space, spaces.Discrete):
        return
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        if len(space.shape) == 1:
            return
        raise ValueError(
            f"action_space: expected Box, Discrete, MultiDiscrete or MultiBinary with a 1-D shape, "
            f"got {one_line(space)} of shape {space.shape}"
        )
    raise ValueError(f"action_space: expected Box, Discrete, MultiDiscrete or MultiBinary, got {one_line(space)}")


def flat_dim(space: spaces.Space) -> int:
    """Length of one flattened observation of `space` (a Box or a Dict of Boxes).

    Args:
        space: the single-env observation space.

    Returns:
        The product of the Box shape, or the sum of those over the Dict's Boxes.
    """
    check_observation_space(space)
    if isinstance(space, spaces.Dict):
        return sum(int(np.prod(s.shape, dtype=np.int64)) for s in space.values())
    return int(np.prod(space.shape, dtype=np.int64))


def flatten_obs(space: spaces.Space, obs: Any) -> np.ndarray:
    """Flattens a batch of observations of `space` to float32 [N, flat_dim(space)].

    Args:
        space: the single-env observation space (a Box or a Dict of Boxes).
        obs: for a Box, an array [N, *space.shape]; for a Dict, a mapping key -> array [N, *space[key].shape]
            (what a gymnasium vector env returns).

    Returns:
        float32 [N, D]. A Dict's Boxes are concatenated in the Dict space's key order.
    """
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping):
            raise ValueError(f"obs: expected a dict for a Dict observation space, got {type(obs).__name__}")
        parts = [_flatten_box_batch(obs[key]) for key in space.keys()]
        return np.concatenate(parts, axis=1)
    check_observation_space(space)
    return _flatten_box_batch(obs)


def _flatten_box_batch(values: Any) -> np.ndarray:
    """Array [N, ...] -> float32 [N, prod(...)]."""
    array = np.asarray(values)
    return array.reshape(array.shape[0], -1).astype(np.float32, copy=False)


def flatten_single(space: spaces.Space, obs: Any) -> np.ndarray:
    """Flattens ONE observation (no batch axis) of `space` to float32 [D]."""
    if isinstance(space, spaces.Dict):
        batched = {key: np.asarray(value)[None] for key, value in obs.items()}
    else:
        batched = np.asarray(obs)[None]
    return flatten_obs(space, batched)[0]


def action_dtype(space: spaces.Space) -> np.dtype:
    """The numpy dtype gymnasium expects for actions of `space` (int64 for Discrete, float32 for Box, ...)."""
    return np.dtype(space.dtype)
