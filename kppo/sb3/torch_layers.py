"""SB3's `stable_baselines3.common.torch_layers` names for Keras: `BaseFeaturesExtractor`, the base class of a user's
features extractor (`policy_kwargs=dict(features_extractor_class=..., features_extractor_kwargs=...)`), and
`create_mlp`."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import keras

from kppo.core.errors import ArgumentError

__all__ = ["BaseFeaturesExtractor", "create_mlp"]


class BaseFeaturesExtractor(keras.layers.Layer):
    """SB3's `BaseFeaturesExtractor` as a Keras layer: `features_dim` is the width of its output. A subclass calls
    `super().__init__(observation_space, features_dim)` and defines `forward(observations)` (SB3's name) or Keras'
    `call(observations)`; kppo builds it as SB3 does, `cls(observation_space, **features_extractor_kwargs)`, and feeds
    it observations flattened to [B, D] (images: scaled to [0, 1] unless `normalize_images=False`)."""

    def __init__(self, observation_space: gym.spaces.Space, features_dim: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        if isinstance(features_dim, bool) or not isinstance(features_dim, int) or features_dim <= 0:
            raise ArgumentError(f"features_dim: expected an integer > 0, got {features_dim!r}")
        self._observation_space = observation_space
        self._features_dim = features_dim

    @property
    def features_dim(self) -> int:
        return self._features_dim

    @property
    def observation_space(self) -> gym.spaces.Space:
        return self._observation_space

    def forward(self, observations: Any) -> Any:
        """The features of `observations` [B, D] -> [B, features_dim]: define it (SB3's name) or `call`."""
        raise NotImplementedError(f"{type(self).__name__}: define forward(observations) or call(observations)")

    def call(self, observations: Any) -> Any:
        """Keras' entry point: `forward(observations)`."""
        return self.forward(observations)


def create_mlp(
    input_dim: int,
    output_dim: int,
    net_arch: list[int],
    activation_fn: Any = "relu",
    squash_output: bool = False,
    with_bias: bool = True,
) -> list[keras.layers.Layer]:
    """SB3's `create_mlp` in Keras: Dense + activation per `net_arch` entry, then Dense(output_dim) when
    output_dim > 0 (and tanh when `squash_output`); wrap the list in `keras.Sequential`. `input_dim` is SB3's
    argument (Keras infers it); `activation_fn`: a Keras activation name or function (torch modules are refused)."""
    del input_dim
    if isinstance(activation_fn, type) or getattr(type(activation_fn), "__module__", "").startswith("torch"):
        raise ArgumentError(
            f"activation_fn: expected a Keras activation (a name such as 'tanh', or keras.activations.tanh), got "
            f"{getattr(activation_fn, '__name__', type(activation_fn).__name__)}"
        )
    layers: list[keras.layers.Layer] = []
    for units in net_arch:
        layers += [keras.layers.Dense(int(units), use_bias=with_bias), keras.layers.Activation(activation_fn)]
    if output_dim > 0:
        layers.append(keras.layers.Dense(int(output_dim), use_bias=with_bias))
    if squash_output:
        layers.append(keras.layers.Activation("tanh"))
    return layers
