"""Keras 3 actor and critic towers (separate, as SB3's default MlpPolicy and purejaxrl).

Orthogonal initialization follows SB3/CleanRL: gain sqrt(2) on hidden layers, 0.01 on the policy head, 1.0 on the
value head, zero biases (https://iclr-blog-track.github.io/2022/03/25/ppo-implementation-details/, detail 2).
`bias_init="torch_default"` draws every Dense bias (hidden layers and heads) from torch.nn.Linear's U(+-1/sqrt(fan_in)),
as SB3 leaves them with `ortho_init=False`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras

from kppo._tf import tf
from kppo.agent.features import extract, extract_shape
from kppo.agent.lstm import LSTMCells
from kppo.agent.spec import AgentSpec
from kppo.core.tf_loops import vectorizing_now
from kppo.core.vectorized import narrow_matmul

_ALIASES = {
    "kaiming_normal": "he_normal",
    "kaiming_uniform": "he_uniform",
    "xavier_normal": "glorot_normal",
    "xavier_uniform": "glorot_uniform",
}
_ACTIVATIONS = {"swish": "silu"}
HIDDEN_GAIN = math.sqrt(2.0)
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def make_initializer(kind: str, gain: float, seed: int) -> keras.initializers.Initializer:
    """Orthogonal with `gain`, or the named Keras initializer (the gain only applies to orthogonal, as in rex)."""
    if kind == "orthogonal":
        return keras.initializers.Orthogonal(gain=gain, seed=seed)
    if kind == "torch_default":  # torch.nn.Linear: kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in))
        return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in", distribution="uniform", seed=seed)
    return keras.initializers.get({"class_name": _ALIASES.get(kind, kind), "config": {"seed": seed}})


#: The widest head whose gradients `narrow_matmul` computes while a population traces (8 members, [512, 64] rows:
#: faster than XLA's dots up to 6-8 columns, slower at 16; `docs/benchmarks/tuning.md`, "Measurements behind the
#: defaults").
NARROW_UNITS = 8


def dense_head(layer: keras.layers.Dense, x: tf.Tensor) -> tf.Tensor:
    """`layer(x)` for a head without activation (a policy or value head): while a population traces and the head has at
    most `NARROW_UNITS` columns, through `narrow_matmul` (the same product, faster gradients there)."""
    if not vectorizing_now() or len(x.shape) != 2 or layer.units > NARROW_UNITS:
        return layer(x)
    return narrow_matmul(x, layer.kernel) + layer.bias


def _dense_stack(units: list[int], activation: str, kernel_init: str, seed: int, prefix: str) -> list:
    return [
        keras.layers.Dense(
            width,
            activation=_ACTIVATIONS.get(activation, activation),
            kernel_initializer=make_initializer(kernel_init, HIDDEN_GAIN, seed + i),
            bias_initializer="zeros",
            name=f"{prefix}_hidden_{i}",
        )
        for i, width in enumerate(units)
    ]


def _widths(num_layers: int, units: int, hidden_units) -> list[int]:
    return [int(u) for u in hidden_units] if hidden_units is not None else [int(units)] * int(num_layers)


def _build_dense(layer: keras.layers.Dense, input_shape: tuple, bias_init: str, seed: int) -> tuple:
    """Builds `layer` for `input_shape` (its bias drawn from torch's U(+-1/sqrt(fan_in)) when `bias_init` says so,
    the fan-in being known only now); returns its output shape."""
    if bias_init == "torch_default":
        bound = 1.0 / math.sqrt(input_shape[-1])
        layer.bias_initializer = keras.initializers.RandomUniform(-bound, bound, seed=seed)
    layer.build(input_shape)
    return (*input_shape[:-1], layer.units)


def _build_stack(layers: list, input_shape, bias_init: str, seed: int) -> tuple:
    shape = tuple(input_shape)
    for i, layer in enumerate(layers):
        shape = _build_dense(layer, shape, bias_init, seed + 200 + i)
    return shape


class Tower(keras.Model):
    """What the actor and the critic share: observations through the features extractor (when there is one), then the
    hidden layers (`self.hidden`), then the subclass's head (`from_features`)."""

    hidden: list

    def call(self, obs):
        return self.from_features(extract(self, obs))

    def from_features(self, features):
        raise NotImplementedError

    def hidden_features(self, features):
        """The last hidden layer's output for the extractor's `features`."""
        for layer in self.hidden:
            features = layer(features)
        return features


class Actor(Tower):
    """obs [B, obs_dim] -> logits [B, param_size], or (mean, log_std) each [B, param_size] when Gaussian.

    An empty `hidden_units` puts the head on the observations (or the extractor's features): SB3's `pi=[]`.

    Args:
        param_size: outputs of the head (`ActionDistribution.param_size`).
        gaussian: also output a log-std.
        state_independent_std: log-std is a free vector (else a dense head on the last hidden features).
        log_std_init: initial log-std.
        extractor: a Keras layer applied to the observations before the hidden layers (SB3's
            `features_extractor_class`: [B, obs_dim] -> [B, F]); the same layer object in the actor and the critic
            when shared. Its own initializers are kept (SB3's orthogonal init covers Linear and Conv2d modules only).
    """

    def __init__(
        self,
        param_size: int,
        num_hidden_layers: int = 2,
        num_hidden_units: int = 64,
        activation: str = "tanh",
        kernel_init: str = "orthogonal",
        gaussian: bool = False,
        state_independent_std: bool = True,
        log_std_init: float = 0.0,
        seed: int = 0,
        hidden_units: list[int] | None = None,
        state_dependent_noise: bool = False,
        full_std: bool = True,
        bias_init: str = "zeros",
        extractor: keras.layers.Layer | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.hidden_units = _widths(num_hidden_layers, num_hidden_units, hidden_units)
        self.bias_init = bias_init
        if extractor is not None:  # unset otherwise: the attribute would change the checkpoints' object graph
            self.extractor = extractor
        self.state_dependent_noise = bool(state_dependent_noise)
        self.full_std = bool(full_std)
        self.param_size = int(param_size)
        self.num_hidden_layers = int(num_hidden_layers)
        self.num_hidden_units = int(num_hidden_units)
        self.activation_name = activation
        self.kernel_init = kernel_init
        self.gaussian = bool(gaussian)
        self.state_independent_std = bool(state_independent_std)
        self.log_std_init = float(log_std_init)
        self.seed = int(seed)
        self.hidden = _dense_stack(self.hidden_units, activation, kernel_init, seed, "actor")
        self.head = keras.layers.Dense(
            param_size, kernel_initializer=make_initializer(kernel_init, POLICY_GAIN, seed + 100), name="policy_head"
        )
        self.log_std_head = None
        if self.gaussian and not self.state_independent_std:
            self.log_std_head = keras.layers.Dense(
                param_size,
                kernel_initializer=make_initializer(kernel_init, POLICY_GAIN, seed + 101),
                bias_initializer=keras.initializers.Constant(self.log_std_init),
                name="log_std_head",
            )

    def build(self, input_shape):
        shape = _build_stack(self.hidden, extract_shape(self, input_shape), self.bias_init, self.seed)
        _build_dense(self.head, shape, self.bias_init, self.seed + 300)
        if self.log_std_head is not None:
            self.log_std_head.build(shape)  # its bias starts at log_std_init
        if self.gaussian and self.state_independent_std:
            self.log_std = self.add_weight(
                shape=(self.param_size,),
                initializer=keras.initializers.Constant(self.log_std_init),
                name="log_std",
            )
        if self.state_dependent_noise:
            self.sde_log_std = self.add_weight(
                shape=(shape[-1], self.param_size if self.full_std else 1),
                initializer=keras.initializers.Constant(self.log_std_init),
                name="sde_log_std",
            )
        self.built = True

    def from_features(self, features):
        """`call` after the features extractor (what a shared extractor's output feeds: `agent.actor_critic`)."""
        features = self.hidden_features(features)
        out = dense_head(self.head, features)
        if self.state_dependent_noise:
            return out, features, tf.identity(self.sde_log_std)
        if not self.gaussian:
            return out
        if self.log_std_head is not None:
            return out, self.log_std_head(features)
        return out, tf.zeros_like(out) + self.log_std

    def get_config(self):
        return {
            **super().get_config(),
            "param_size": self.param_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_hidden_units": self.num_hidden_units,
            "activation": self.activation_name,
            "kernel_init": self.kernel_init,
            "gaussian": self.gaussian,
            "state_independent_std": self.state_independent_std,
            "log_std_init": self.log_std_init,
            "seed": self.seed,
            "hidden_units": self.hidden_units,
            "state_dependent_noise": self.state_dependent_noise,
            "full_std": self.full_std,
            "bias_init": self.bias_init,
        }


class Critic(Tower):
    """obs [B, obs_dim] -> value [B]."""

    def __init__(
        self,
        num_hidden_layers: int = 2,
        num_hidden_units: int = 64,
        activation: str = "tanh",
        kernel_init: str = "orthogonal",
        seed: int = 0,
        hidden_units: list[int] | None = None,
        bias_init: str = "zeros",
        extractor: keras.layers.Layer | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.hidden_units = _widths(num_hidden_layers, num_hidden_units, hidden_units)
        self.bias_init = bias_init
        if extractor is not None:
            self.extractor = extractor
        self.num_hidden_layers = int(num_hidden_layers)
        self.num_hidden_units = int(num_hidden_units)
        self.activation_name = activation
        self.kernel_init = kernel_init
        self.seed = int(seed)
        self.hidden = _dense_stack(self.hidden_units, activation, kernel_init, seed, "critic")
        self.head = keras.layers.Dense(
            1, kernel_initializer=make_initializer(kernel_init, VALUE_GAIN, seed + 100), name="value_head"
        )

    def build(self, input_shape):
        _build_dense(
            self.head,
            _build_stack(self.hidden, extract_shape(self, input_shape), self.bias_init, self.seed),
            self.bias_init,
            self.seed + 300,
        )
        self.built = True

    def from_features(self, features):
        """`call` after the features extractor."""
        return tf.squeeze(dense_head(self.head, self.hidden_features(features)), axis=-1)

    def get_config(self):
        return {
            **super().get_config(),
            "num_hidden_layers": self.num_hidden_layers,
            "num_hidden_units": self.num_hidden_units,
            "activation": self.activation_name,
            "kernel_init": self.kernel_init,
            "seed": self.seed,
            "hidden_units": self.hidden_units,
            "bias_init": self.bias_init,
        }


def make_extractors(
    features_extractor: Callable[[], keras.layers.Layer] | None, share: bool
) -> tuple[keras.layers.Layer | None, keras.layers.Layer | None]:
    """The actor's and the critic's features extractors from the factory `features_extractor` (None: none): one
    layer for both when `share` (SB3's `share_features_extractor=True`, its default for PPO), else one each."""
    if features_extractor is None:
        return None, None
    layers = [features_extractor() for _ in range(1 if share else 2)]
    for layer in layers:
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                f"features_extractor_class: expected a Keras layer class (kwargs from features_extractor_kwargs), "
                f"got an instance of {type(layer).__qualname__}"
            )
    return layers[0], layers[-1]


def make_networks(
    spec: AgentSpec,
    obs_dim: int,
    dist,
    seed: int,
    lstm_biases: int = 2,
    extractors: tuple[keras.layers.Layer | None, keras.layers.Layer | None] = (None, None),
) -> tuple[Actor, Critic, LSTMCells | None]:
    """Builds the actor and critic for `dist` from the network fields of `spec`, and the LSTM cells they
    read when `spec.recurrent` (else None; `lstm_biases`: see `TorchLSTMCell`); `extractors`: the actor's and
    critic's features extractors (`make_extractors`), which a recurrent agent's LSTM cells read instead (one, shared:
    sb3-contrib's CnnLstmPolicy; two with share_features_extractor=False: the critic's cell, or its MLP, reads its
    own)."""
    memory_extractors: tuple = (None, None)
    if spec.recurrent is not None and extractors != (None, None):
        if extractors[0] is not extractors[1] and spec.shared_lstm:  # sb3-contrib asserts it
            raise ValueError(
                "share_features_extractor: expected True with shared_lstm=True (a shared LSTM reads one features "
                "extractor), got False"
            )
        memory_extractors, extractors = extractors, (None, None)  # the cells read them (the critic's: its own)
    common: dict[str, Any] = dict(
        num_hidden_layers=spec.num_hidden_layers,
        num_hidden_units=spec.num_hidden_units,
        activation=spec.activation,
        kernel_init=spec.kernel_init,
        bias_init=spec.bias_init,
    )
    actor = Actor(
        dist.param_size,
        gaussian=dist.has_log_std,
        state_dependent_noise=dist.state_dependent,
        full_std=getattr(dist, "full_std", True),
        state_independent_std=spec.state_independent_std,
        log_std_init=spec.log_std_init,
        seed=seed * 1000 + 1,
        hidden_units=spec.actor_widths,
        extractor=extractors[0],
        name="actor",
        **common,
    )
    critic = Critic(
        seed=seed * 1000 + 500,
        hidden_units=spec.critic_widths,
        extractor=extractors[1],
        name="critic",
        **common,
    )
    lstm = None
    if spec.recurrent is not None:  # named "memory": the name its checkpoints have
        units, critic_cell = spec.lstm_hidden_size, spec.enable_critic_lstm
        shared, layers = spec.shared_lstm, spec.n_lstm_layers
        lstm = LSTMCells(
            units, critic_cell, seed * 1000 + 800, lstm_biases, shared, layers, *memory_extractors, name="memory"
        )
        lstm.build((None, obs_dim))
    actor.build((None, obs_dim if lstm is None else lstm.units))
    if lstm is None:
        critic.build((None, obs_dim))
    else:  # its own cell's or the actor cell's output, or the features the cells read
        critic.build((None, lstm.units if lstm.critic_cell or lstm.shared else lstm.features_width))
    return actor, critic, lstm
