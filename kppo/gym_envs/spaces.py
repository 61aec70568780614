"""gymnasium spaces kppo accepts, and flattening their observations to float32 vectors (numpy + gymnasium only).

Observations: a Box of any shape is flattened in C order; a Dict of Boxes is the concatenation of its flattened Boxes
in the Dict space's key order (`space.spaces`; gymnasium sorts the keys of a plain dict alphabetically unless
`sort_keys=False`, and keeps an OrderedDict's order). An image Box (SB3's rule, `is_image_space`: 3-D uint8 in
[0, 255]) stays uint8 when flattened, so rollouts hold its bytes; the networks reshape it back
(`kppo.agent.extractors`). Actions: a Box of any shape (flattened inside the networks, reshaped on the way out, its
dtype kept: `kppo.core.distributions`), Discrete, 1-D MultiDiscrete or 1-D MultiBinary. Anything else
is a one-line `ValueError` (typed as SB3 raises it: `kppo.core.errors`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

import numpy as np
from gymnasium import spaces

from kppo.core.errors import ArgumentError, NotSupportedError


def space_shape(space: spaces.Space) -> tuple[int, ...]:
    """`space.shape` of a Box, Discrete, MultiDiscrete or MultiBinary (gymnasium types it Optional for every space)."""
    return cast(tuple[int, ...], space.shape)


def one_line(value: Any) -> str:
    """`repr(value)` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(repr(value).split())


def check_observation_space(space: spaces.Space) -> None:
    """Raises a one-line ValueError unless `space` is a Box, Discrete, MultiDiscrete or MultiBinary, or a non-empty
    Dict of those, with at least one element (Discrete and MultiDiscrete are one-hot encoded, as SB3)."""
    parts = list(space.values()) if isinstance(space, spaces.Dict) else [space]
    if not parts or not all(isinstance(s, (spaces.Box, *ENCODED_SPACES)) for s in parts):
        hint = (
            "; wrap the env in gymnasium.wrappers.FlattenObservation (one-hot Box)"
            if isinstance(space, (spaces.Tuple, spaces.Dict))
            else ""
        )
        raise NotSupportedError(  # SB3's preprocessing: NotImplementedError
            f"observation_space: expected a Box, Discrete, MultiDiscrete or MultiBinary, or a Dict of "
            f"those, got {one_line(space)}{hint}"
        )
    if all(isinstance(s, spaces.Discrete) or int(np.prod(space_shape(s))) > 0 for s in parts):
        return
    raise ArgumentError(
        f"observation_space: expected at least one observation element, got {one_line(space)} of size 0"
    )


def check_action_space(space: spaces.Space) -> None:
    """Raises a one-line error unless `space` is a Box of any shape, a Discrete, or a 1-D MultiDiscrete or MultiBinary
    with at least one dimension: an `ArgumentError` (also an AssertionError) where SB3 asserts (an action space outside
    its `supported_action_spaces`; `get_action_dim`'s multi-dimensional MultiBinary), a `NotSupportedError` (also a
    NotImplementedError) for a MultiDiscrete of more than one dimension."""
    if isinstance(space, spaces.Discrete):
        return
    if not isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        raise ArgumentError(
            f"action_space: expected Box, Discrete, MultiDiscrete or MultiBinary, got {one_line(space)}"
        )
    if int(np.prod(space_shape(space))) == 0:
        raise ArgumentError(
            f"action_space: expected at least one action dimension, got {one_line(space)} of shape {space.shape}"
        )
    if isinstance(space, spaces.Box) or len(space_shape(space)) == 1:
        return
    error = ArgumentError if isinstance(space, spaces.MultiBinary) else NotSupportedError
    raise error(
        f"action_space: expected a 1-D {type(space).__name__} (a Box may have any shape), got {one_line(space)} of "
        f"shape {space.shape}; flatten it"
    )


def flat_dim(space: spaces.Space) -> int:
    """Length of one flattened observation of `space` (a Box or a Dict of Boxes).

    Args:
        space: the single-env observation space.

    Returns:
        The product of the Box shape, or the sum of those over the Dict's Boxes.
    """
    if is_encoded(space):
        return encoded_dim(space)
    check_observation_space(space)
    if isinstance(space, spaces.Dict):
        return sum(int(np.prod(space_shape(s), dtype=np.int64)) for s in space.values())
    return int(np.prod(space_shape(space), dtype=np.int64))


def flatten_obs(space: spaces.Space, obs: Any) -> np.ndarray:
    """Flattens a batch of observations of `space` to float32 [N, flat_dim(space)].

    Args:
        space: the single-env observation space (a Box or a Dict of Boxes).
        obs: for a Box, an array [N, *space.shape]; for a Dict, a mapping key -> array [N, *space[key].shape]
            (what a gymnasium vector env returns).

    Returns:
        float32 [N, D] (uint8 for an image Box, `obs_dtype`). A Dict's Boxes are concatenated in the Dict space's
        key order.
    """
    if is_encoded(space):
        return encode_rows(space, input_rows(space, obs))
    if isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping):
            raise ValueError(f"obs: expected a dict for a Dict observation space, got {type(obs).__name__}")
        parts = [_flatten_box_batch(obs[key]) for key in space.keys()]
        return np.concatenate(parts, axis=1)
    check_observation_space(space)
    return _flatten_image_batch(obs) if is_image_space(space) else _flatten_box_batch(obs)


def batch_flattener(space: spaces.Space) -> Callable[[Any], np.ndarray]:
    """`flatten_obs` bound to `space`, its checks done once here (a vector env flattens every step)."""
    if isinstance(space, spaces.Box):
        check_observation_space(space)
        return _flatten_image_batch if is_image_space(space) else _flatten_box_batch
    return functools.partial(flatten_obs, space)


def _flatten_box_batch(values: Any) -> np.ndarray:
    """Array [N, ...] -> float32 [N, prod(...)]."""
    array = np.asarray(values)
    return array.reshape(array.shape[0], -1).astype(np.float32, copy=False)


def _flatten_image_batch(values: Any) -> np.ndarray:
    """Images [N, H, W, C] (or [N, C, H, W]) -> uint8 [N, H * W * C]: rollouts keep image bytes, not float32 copies."""
    array = np.asarray(values)
    return array.reshape(array.shape[0], -1).astype(np.uint8, copy=False)


def obs_dtype(space: spaces.Space) -> np.dtype:
    """The dtype of `batch_flattener(space)`'s rows: uint8 for an image Box (`is_image_space`), float32 otherwise."""
    return np.dtype(np.uint8 if is_image_space(space) else np.float32)


# ---------------------------------------------------------------------------------------------------------------
# Images (Stable-Baselines3's rules: `stable_baselines3.common.preprocessing.is_image_space`)
# ---------------------------------------------------------------------------------------------------------------


def is_image_space(space: spaces.Space, check_channels: bool = False, normalized_image: bool = False) -> bool:
    """SB3's image rule: a 3-D uint8 Box with every low 0 and every high 255, of any channel count (what SB3's CNN
    policies check); `check_channels`: with 1, 3 or 4 channels (first or last, `is_image_space_channels_first`);
    `normalized_image`: any dtype and bounds (an image already scaled, as SB3's `normalize_images=False`)."""
    if not isinstance(space, spaces.Box) or len(space_shape(space)) != 3:
        return False
    pixels = space.dtype == np.uint8 and bool(np.all(space.low == 0)) and bool(np.all(space.high == 255))
    if not (pixels or normalized_image):
        return False
    if not check_channels:
        return True
    return (space.shape[0] if is_image_space_channels_first(space) else space.shape[-1]) in (1, 3, 4)


def is_channels_first(shape: tuple[int, ...]) -> bool:
    """SB3's `is_image_space_channels_first`: the smallest dimension of an image shape comes first (CHW); an image
    whose smallest dimension is in the middle is ambiguous (`ArgumentError`: no layout can be read from it)."""
    smallest = int(np.argmin(shape))
    if smallest == 1:
        raise ArgumentError(
            f"observation_space: expected an image shape (H, W, C) or (C, H, W) whose channels are its smallest "
            f"dimension, got {tuple(shape)}; transpose it (kppo reads HWC, or CHW when the first dimension is smallest)"
        )
    return smallest == 0


def is_image_space_channels_first(space: spaces.Box) -> bool:
    """SB3's `is_image_space_channels_first` as SB3's wrappers (`VecFrameStack`, `VecTransposeImage`) apply it: the
    channels are the smallest dimension, first (CxHxW) when that is dimension 0, else last, with SB3's warning when it
    is the middle one (`is_channels_first` refuses that shape, as kppo's CNNs cannot read it)."""
    smallest = int(np.argmin(space.shape))
    if smallest == 1:
        warnings.warn("Treating image space as channels-last, while second dimension was smallest of the three.")
    return smallest == 0


def has_image(space: spaces.Space) -> bool:
    """True for an image Box (`is_image_space`) and for a Dict holding at least one."""
    parts = list(space.values()) if isinstance(space, spaces.Dict) else [space]
    return any(is_image_space(s) for s in parts)


def normalized_columns(space: spaces.Space, keys: tuple[str, ...] | list[str] | None = None) -> np.ndarray | None:
    """Which columns of the networks' flat rows observation normalization applies to: None for all of them (a space
    that is not a Dict, or a Dict whose every key is normalized), else bool [D] with True on the columns of `keys`
    (SB3's `norm_obs_keys`), by default every key but the images (`is_image_space`): an image is divided by 255 in
    the network, never standardized (SB3's VecNormalize would make it a float Box its CNN no longer reads).
    One-line `ArgumentError` for a key the Dict lacks, or `keys` without a Dict."""
    if not isinstance(space, spaces.Dict):
        if keys is not None:
            raise ArgumentError(
                f"normalize_obs_keys: expected null for a {type(space).__name__} observation space, got {list(keys)}"
            )
        return None
    chosen = [key for key, sub in space.spaces.items() if not is_image_space(sub)] if keys is None else list(keys)
    unknown = [key for key in chosen if key not in space.spaces]
    if unknown:
        raise ArgumentError(
            f"normalize_obs_keys: expected keys of the observation space {list(space.keys())}, got {unknown}"
        )
    if set(chosen) == set(space.spaces):
        return None
    columns = np.zeros(encoded_dim(space), bool)
    for part in layout(space):
        columns[part.encoded] = part.key in chosen
    return columns


def flatten_single(space: spaces.Space, obs: Any) -> np.ndarray:
    """Flattens ONE observation (no batch axis) of `space` to float32 [D]."""
    batched: dict[str, np.ndarray] | np.ndarray
    if isinstance(space, spaces.Dict):
        batched = {key: np.asarray(value)[None] for key, value in obs.items()}
    else:
        batched = np.asarray(obs)[None]
    return flatten_obs(space, batched)[0]


def action_dtype(space: spaces.Space) -> np.dtype:
    """The numpy dtype gymnasium expects for actions of `space` (int64 for Discrete, the Box's own dtype, ...)."""
    return np.dtype(space.dtype)


# ---------------------------------------------------------------------------------------------------------------
# Discrete, MultiDiscrete and MultiBinary observations (Stable-Baselines3's preprocessing: one-hot / float)
# ---------------------------------------------------------------------------------------------------------------

ENCODED_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class Part(NamedTuple):
    """One part of an observation (a Dict value, or the whole space) in the two flat layouts: the raw input row (a
    Box's values, a Discrete's integer, a MultiDiscrete's or MultiBinary's integers: what an exported artifact takes)
    and the encoded row the networks see (Discrete and MultiDiscrete one-hot, one block per integer, MultiBinary as
    0.0/1.0, Box as is)."""

    key: str | None
    kind: str  # "Box", "Discrete", "MultiDiscrete" or "MultiBinary"
    raw: slice
    encoded: slice
    sizes: tuple[int, ...]  # one-hot sizes of the raw columns (Discrete: (n,), MultiDiscrete: nvec); () otherwise
    starts: tuple[int, ...]  # the value that encodes as the first one-hot position, per raw column


def is_encoded(space: spaces.Space) -> bool:
    """True for a Discrete, MultiDiscrete or MultiBinary observation space, and for a non-empty Dict of those and
    Boxes holding at least one of them (the observations `encode_rows` turns into float32 rows)."""
    if isinstance(space, ENCODED_SPACES):
        return True
    if not isinstance(space, spaces.Dict) or not space.spaces:
        return False
    values = list(space.values())
    return all(isinstance(s, (spaces.Box, *ENCODED_SPACES)) for s in values) and any(
        isinstance(s, ENCODED_SPACES) for s in values
    )


def layout(space: spaces.Space) -> list[Part]:
    """The parts of a Box, Discrete, MultiDiscrete or MultiBinary space, or of a Dict of those in its key order."""
    items = list(space.spaces.items()) if isinstance(space, spaces.Dict) else [(None, space)]
    parts, raw, encoded = [], 0, 0
    for key, sub in items:
        sizes: tuple[int, ...] = ()
        starts: tuple[int, ...] = ()
        if isinstance(sub, spaces.Discrete):
            sizes, starts = (int(sub.n),), (int(sub.start),)
        elif isinstance(sub, spaces.MultiDiscrete):
            sizes = tuple(int(n) for n in np.asarray(sub.nvec).reshape(-1))
            starts = tuple(int(s) for s in np.broadcast_to(np.asarray(sub.start), sub.nvec.shape).reshape(-1))
        width = len(sizes) if sizes else int(np.prod(space_shape(sub), dtype=np.int64))
        size = sum(sizes) if sizes else width
        parts.append(
            Part(key, type(sub).__name__, slice(raw, raw + width), slice(encoded, encoded + size), sizes, starts)
        )
        raw, encoded = raw + width, encoded + size
    return parts


def input_dim(space: spaces.Space) -> int:
    """Length of one raw input row (`input_rows`)."""
    return layout(space)[-1].raw.stop


def encoded_dim(space: spaces.Space) -> int:
    """Length of one encoded row (`encode_rows`): what `flat_dim` is for these spaces."""
    return layout(space)[-1].encoded.stop


def integer_input(space: spaces.Space) -> bool:
    """True when every part of the raw input row is an integer (no Box): exported artifacts then take int32."""
    return all(part.kind != "Box" for part in layout(space))


def input_rows(space: spaces.Space, obs: Any) -> np.ndarray:
    """A batch of observations of `space` -> raw input rows [N, input_dim(space)]: int64 when `integer_input`, else
    float64 (integers exactly) for spaces with encoded parts; `flatten_obs` (float32) for a Box or a Dict of Boxes."""
    if not is_encoded(space):
        return flatten_obs(space, obs)
    if isinstance(space, spaces.Dict) and not isinstance(obs, Mapping):
        raise ValueError(f"obs: expected a dict for a Dict observation space, got {type(obs).__name__}")
    dtype = np.int64 if integer_input(space) else np.float64
    columns = [np.asarray(obs if part.key is None else obs[part.key]) for part in layout(space)]
    if any(c.ndim == 0 for c in columns):
        raise ValueError(
            f"obs: expected a batch of observations [N, ...], got a single value {np.asarray(obs).tolist()!r}"
        )
    # the row size from the shape, not -1: a batch of zero observations has zero rows, not an error
    return np.concatenate([c.reshape(len(c), int(np.prod(c.shape[1:]))).astype(dtype) for c in columns], axis=1)


def encode_rows(space: spaces.Space, rows: Any) -> np.ndarray:
    """Raw input rows [N, input_dim(space)] -> encoded float32 rows [N, encoded_dim(space)]: a Discrete integer x
    becomes one_hot(x - start, n) (all zeros when out of range, as tf.one_hot), a MultiDiscrete one block per integer,
    MultiBinary and Box values float32."""
    rows = np.asarray(rows)
    blocks = []
    for part in layout(space):
        values = rows[:, part.raw]
        if not part.sizes:
            blocks.append(values.astype(np.float32))
            continue
        for column, (size, start) in enumerate(zip(part.sizes, part.starts)):
            index = values[:, column].astype(np.int64) - start
            blocks.append((index[:, None] == np.arange(size)).astype(np.float32))
    return np.concatenate(blocks, axis=1)
