"""A network's features extractor, when it has one (the attribute `extractor`): its output width and shape, and the
observations read through it. Shared by the MLP towers (`kppo.agent.networks`) and the LSTM cells
(`kppo.agent.lstm`)."""

from __future__ import annotations

from typing import Any

import keras

from kppo._tf import tf


def features_dim(extractor: keras.layers.Layer, obs_dim: int) -> int:
    """The width of `extractor`'s features for flat observations [B, obs_dim] (building it); a one-line ValueError
    unless they are [B, F]."""
    shape = tuple(extractor(tf.zeros([1, obs_dim])).shape)  # builds it (a subclassed layer may define no build)
    if len(shape) != 2:
        raise ValueError(
            f"features_extractor_class: expected {type(extractor).__name__} to map observations [B, {obs_dim}] to "
            f"features [B, F], got shape {shape}"
        )
    return int(shape[-1])


def extract_shape(model: keras.Model, input_shape) -> tuple:
    """The MLP's input shape: the features extractor's output when the model has one, else the observations'."""
    extractor = getattr(model, "extractor", None)
    return tuple(input_shape) if extractor is None else (None, features_dim(extractor, int(input_shape[-1])))


def extract(model: keras.Model, obs):
    """`obs` through the model's features extractor, when it has one."""
    extractor = getattr(model, "extractor", None)
    return obs if extractor is None else extractor(obs)


def actor_extractor(actor: keras.Model, lstm: Any = None) -> keras.layers.Layer | None:
    """The features extractor an actor reads observations through: its own, or the one before its LSTM (`lstm`: a
    recurrent agent's `LSTMCells` or its `ActorLSTM`); None where it reads them as they are."""
    own = getattr(actor, "extractor", None)
    return getattr(lstm, "extractor", None) if own is None else own
