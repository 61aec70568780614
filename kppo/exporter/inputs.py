"""What an artifact takes: one input `obs` (the policy's input row, `Policy.input_row`: the flat observation, or an
image's bytes), or, for a Dict observation space holding an image (`per_key`), one input per Dict key in the Dict's
key order, each with its own dtype and preprocessing: `obs_<key>`, an image key as uint8 bytes [H, W, C] (or its
CHW), a Box key as its float32 values flattened, a Discrete / MultiDiscrete / MultiBinary key as its int32 integers
(one-hot encoded inside). Inside the artifact the per-key inputs are joined into the policy's flat input row
(`join_graph`), so everything after them is the single-input artifact's graph: the image keys divided by 255 by the
actor's extractor, the vector keys normalized. Parity checks and int8 calibration keep the flat rows and split
them (`split_rows`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.gym_envs.spaces import has_image, integer_input, is_channels_first, is_image_space, layout


class ArtifactInput(NamedTuple):
    """One input of an artifact's `action` signature."""

    name: str  # the signature's input name
    key: str | None  # the Dict key it holds (None: the whole observation)
    shape: tuple[int, ...]  # one row's shape (without the batch dimension)
    dtype: np.dtype
    columns: slice  # its values in the policy's flat input row
    image: bool


def per_key(policy: Policy) -> bool:
    """The artifact takes one input per Dict key: a Dict observation space with an image (`has_image`)."""
    space = policy.observation_space
    return isinstance(space, gym.spaces.Dict) and has_image(space)


def input_name(key: str) -> str:
    """The artifact input of Dict key `key`: `obs_<key>`, every character but letters, digits and _ as _."""
    return "obs_" + re.sub(r"\W", "_", key, flags=re.ASCII)


def artifact_inputs(policy: Policy, image_dtype: np.dtype | None = None) -> list[ArtifactInput]:
    """The artifact's observation inputs in signature order (`image_dtype`: an image input's dtype, default uint8;
    a single-image int8 conversion takes the bytes as float32). One-line `ValueError` when two Dict keys give the
    same input name."""
    image_dtype = np.dtype(np.uint8) if image_dtype is None else np.dtype(image_dtype)
    if not per_key(policy):
        whole = slice(0, policy.input_dim)
        dtype = image_dtype if policy.image else policy.input_dtype
        return [ArtifactInput("obs", None, policy.input_shape, dtype, whole, policy.image)]
    space = policy.observation_space
    assert isinstance(space, gym.spaces.Dict)  # per_key
    inputs = []
    for part in layout(space):
        assert part.key is not None  # a Dict's parts
        sub = space[part.key]
        image = is_image_space(sub)
        width = part.raw.stop - part.raw.start
        shape = tuple(int(d) for d in sub.shape) if image else (width,)  # type: ignore[union-attr]
        dtype = image_dtype if image else np.dtype(np.int32 if integer_input(sub) else np.float32)
        inputs.append(ArtifactInput(input_name(part.key), part.key, shape, dtype, part.raw, image))
    names = [item.name for item in inputs]
    if len(set(names)) < len(names):
        raise ValueError(
            f"observation_space: expected Dict keys that give distinct artifact input names, got keys "
            f"{list(space.keys())} -> {names}"
        )
    return inputs


def split_rows(inputs: list[ArtifactInput], rows: np.ndarray) -> list[np.ndarray]:
    """Flat input rows [N, input_dim] (or an image's [N, *shape]) -> one array per input, [N, *input.shape] of its
    dtype (an image's bytes, exact in the flat float32 row)."""
    rows = np.asarray(rows)
    if len(inputs) == 1:
        return [rows.reshape(len(rows), *inputs[0].shape).astype(inputs[0].dtype)]
    return [rows[:, item.columns].reshape(len(rows), *item.shape).astype(item.dtype) for item in inputs]


def join_graph(inputs: list[ArtifactInput], tensors) -> tf.Tensor:
    """Per-input tensors -> the flat input rows [N, input_dim] float32 the policy's graph reads (`split_rows`'s
    inverse, in TensorFlow)."""
    columns = [tf.reshape(tf.cast(x, tf.float32), [-1, int(np.prod(item.shape))]) for item, x in zip(inputs, tensors)]
    return tf.concat(columns, axis=1)


def input_metadata(inputs: list[ArtifactInput], batch_size: int | None) -> list[dict]:
    """The metadata's `inputs`: name, Dict key, shape with the batch dimension, dtype, and for an image its layout."""
    rows = []
    for item in inputs:
        row = {"name": item.name, "key": item.key, "shape": [batch_size, *item.shape], "dtype": str(item.dtype)}
        if item.image:
            row["layout"] = "CHW" if is_channels_first(item.shape) else "HWC"
        rows.append(row)
    return rows
