"""The actor in numpy: a snapshot of its weights, taken once per rollout, acting without a TensorFlow call per step.

A TensorFlow function call costs more, whatever it computes, than a 2x64 MLP's forward pass for 16 observations in
numpy and than stepping 16 gymnasium CartPoles (`docs/benchmarks/speed.md`, "Measurements behind the defaults"). The
host rollout therefore acts from `ActorWeights` (observation normalization, the actor's forward pass, sampling, gSDE
noise, squash/clip/rescale) and computes log-probabilities and values for the whole rollout in one compiled call
after it, with the networks the update uses (`kppo.rollout.gymnasium.finish_rollout`), so the update sees what it
would see had TensorFlow acted.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple
from collections.abc import Callable

import keras
import numpy as np

from kppo._tf import tf
from kppo.core import normalization
from kppo.core.distributions import ActionDistribution
from kppo.agent.features import actor_extractor
from kppo.agent.networks import Actor
from kppo.agent.numpy_conv import acting_extractor
from kppo.core.types import Moments

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805
_LEAKY_RELU_SLOPE = 0.2  # keras.activations.leaky_relu's default, which the "leaky_relu" string gives


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # no overflow for large |x|


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7; numpy has no erf and scipy is not required)."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


#: Keras' activations (those `Config.activation` accepts, after `kppo.agent.networks`' aliases) in numpy, float32 in
#: and out.
ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0)))),  # keras: approximate=False
    "softplus": lambda x: np.logaddexp(np.float32(0.0), x),
    "silu": lambda x: x * _sigmoid(x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "selu": lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0.0))),
    "sigmoid": _sigmoid,
    "leaky_relu": lambda x: np.where(x > 0, x, _LEAKY_RELU_SLOPE * x),
    "linear": lambda x: x,
}


class ActorWeights(NamedTuple):
    """A numpy copy of an `Actor`'s weights (kernels [in, out], biases [out])."""

    hidden: list[tuple[np.ndarray, np.ndarray]]
    activation: str
    head: tuple[np.ndarray, np.ndarray]
    log_std: np.ndarray | None = None  # state-independent Gaussian log-std [A]
    log_std_head: tuple[np.ndarray, np.ndarray] | None = None  # state-dependent Gaussian log-std head
    sde_log_std: np.ndarray | None = None  # gSDE [L, A] or [L, 1]
    lstm: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] | None = None  # a recurrent actor's LSTM layers
    # (each: kernel, recurrent kernel, bias)
    extractor: Callable[[np.ndarray], np.ndarray] | None = None  # the features extractor, frozen (`frozen_extractor`)
    numpy_extractor: bool = False  # the extractor runs numpy's BLAS at small batches (`kppo.agent.numpy_conv`)


Read = Callable[[object], np.ndarray]  # a variable -> its value in numpy


def _numpy(variable) -> np.ndarray:
    return variable.numpy()


def _dense(layer, read: Read) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(read(layer.kernel), np.float32), np.asarray(read(layer.bias), np.float32)


def snapshot(actor: Actor, lstm=None, read: Read = _numpy) -> ActorWeights:
    """The actor's current weights (and its LSTM's, given a recurrent agent's `LSTMCells`, its `ActorLSTM` or its
    `TorchLSTMCell`), copied to numpy (later training does not change the snapshot). `read`: a variable's value
    (default: the variable's own; a population member's weights are read from its stacked tensors instead). The
    features extractor is the actor's, or the one its LSTM reads."""
    activation = actor.hidden[0].activation.__name__ if actor.hidden else "linear"
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {', '.join(ACTIVATIONS)} for host acting, got {activation!r}")
    extractor, in_numpy = None, False
    layer = actor_extractor(actor, lstm)
    if layer is not None:
        extractor, in_numpy = acting_extractor(layer, frozen_extractor(layer, read), read)
    return ActorWeights(
        hidden=[_dense(layer, read) for layer in actor.hidden],
        activation=activation,
        head=_dense(actor.head, read),
        log_std=read(actor.log_std) if actor.gaussian and actor.log_std_head is None else None,
        log_std_head=_dense(actor.log_std_head, read) if actor.log_std_head is not None else None,
        sde_log_std=read(actor.sde_log_std) if actor.state_dependent_noise else None,
        lstm=None if lstm is None else _lstm(_actor_cell(lstm), read),
        extractor=extractor,
        numpy_extractor=in_numpy,
    )


def stack_weights(members: list[ActorWeights]) -> ActorWeights:
    """Members' snapshots as one, each array with a leading member axis (biases [M, 1, out], so `head_params` and
    `lstm_step` run every member's observations [M, N, D] in one batched matmul per layer); the extractors run per
    member (`member_extractor`). `member_params` takes one member's parameters back out."""
    first = members[0]

    def stack(*arrays):
        arrays = [np.asarray(a) for a in arrays]
        return np.stack([a[None] if a.ndim == 1 else a for a in arrays])  # biases [M, 1, out]; log-std [M, 1, A]

    def stacked(field):
        values = [getattr(m, field) for m in members]
        return None if values[0] is None else tf.nest.map_structure(stack, *values)

    return first._replace(
        hidden=[tuple(map(stack, *layers)) for layers in zip(*[m.hidden for m in members])],
        head=stacked("head"),
        log_std=stacked("log_std"),
        log_std_head=stacked("log_std_head"),
        sde_log_std=stacked("sde_log_std"),
        lstm=stacked("lstm"),
        extractor=None if first.extractor is None else member_extractor([m.extractor for m in members if m.extractor]),
    )


def member_extractor(extractors: list[Callable]) -> Callable[[np.ndarray], np.ndarray]:
    """Members' features extractors as one call on observations [M, N, ...] -> features [M, N, F]."""

    def call(obs: np.ndarray) -> np.ndarray:
        return np.stack([extract(rows) for extract, rows in zip(extractors, obs)])

    return call


def member_params(weights: ActorWeights, params, index: int):
    """Member `index`'s actor parameters, out of those `head_params` computed with the stacked `weights`
    (`stack_weights`): each [N, ...], as that member's own snapshot computes them."""
    if weights.log_std is not None:  # state-independent: stacked [M, 1, A]; one member's is [A]
        mean, log_std = params
        return mean[index], log_std[index, 0]
    # a plain tuple, not tf.nest: this runs at every host step, and tf.nest.map_structure's Python overhead is a visible
    # share of one (docs/benchmarks/speed.md, "Measurements behind the defaults")
    return tuple(x[index] for x in params) if isinstance(params, tuple) else params[index]


_COMPILED_EXTRACTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def frozen_extractor(layer, read: Read = _numpy) -> Callable[[np.ndarray], np.ndarray]:
    """`layer` (a features extractor: convolutions, which numpy would run slower than TensorFlow) as one compiled
    call per batch on a copy of its current weights: later training does not change it. One tf.function per layer,
    traced once per batch shape, reads the copied weights through Keras' StatelessScope; each call goes straight to
    that shape's concrete function, skipping the tf.function's dispatch: the same numbers, a faster `predict` on one
    frame (`docs/benchmarks/images.md`, "Measurements behind the defaults")."""
    values = [tf.constant(read(v)) for v in layer.variables]
    forward = _COMPILED_EXTRACTORS.get(layer)
    if forward is None:

        def run(obs, weights):
            with keras.StatelessScope(state_mapping=list(zip(layer.variables, weights))):
                return layer(obs)

        forward = _COMPILED_EXTRACTORS[layer] = tf.function(run, autograph=False)
    concrete: dict[tuple, Callable] = {}

    def call(obs: np.ndarray) -> np.ndarray:
        key = (obs.shape, obs.dtype.str)
        if key not in concrete:
            concrete[key] = forward.get_concrete_function(tf.TensorSpec(obs.shape, obs.dtype), values)
        return concrete[key](tf.constant(obs), values).numpy()

    return call


def _actor_cell(lstm):
    """The actor's `TorchLSTMCell` of an `LSTMCells`, an `ActorLSTM` or the cell itself."""
    if hasattr(lstm, "cells"):
        return lstm.cells[0]
    return getattr(lstm, "cell", lstm)


def _lstm(cell, read: Read = _numpy) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """A `TorchLSTMCell` as numpy, per layer (kernel, recurrent kernel, bias): its two biases summed."""
    layers = []
    for layer in range(cell.num_layers):
        kernel, recurrent, input_bias, recurrent_bias = cell.layer_weights(layer)
        layers.append(
            (
                np.asarray(read(kernel), np.float32),
                np.asarray(read(recurrent), np.float32),
                np.asarray(read(input_bias) + read(recurrent_bias), np.float32),
            )
        )
    return tuple(layers)


def lstm_step(lstm: tuple, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, tuple]:
    """`TorchLSTMCell` in numpy (gates i, f, g, o; sigmoid and tanh), layer after layer: (the last layer's h', which
    the actor reads, (h', c')), every layer's state side by side in the last axis as the cell keeps them."""
    units = lstm[0][1].shape[-2]
    hs, cs = [], []
    for layer, (kernel, recurrent, bias) in enumerate(lstm):
        columns = slice(layer * units, (layer + 1) * units)
        i, f, g, o = np.split(x @ kernel + h[..., columns] @ recurrent + bias, 4, axis=-1)
        cs.append(_sigmoid(f) * c[..., columns] + _sigmoid(i) * np.tanh(g))
        hs.append(x := _sigmoid(o) * np.tanh(cs[-1]))
    if len(lstm) == 1:
        return x, (hs[0], cs[0])
    return x, (np.concatenate(hs, axis=-1), np.concatenate(cs, axis=-1))


def actor_input(weights: ActorWeights, obs: np.ndarray, memory: tuple, episode_start: np.ndarray | None):
    """(what the actor's MLP reads, the actor memory after the step): the features extractor's output at `obs`
    (`obs` itself without one) for an MLP agent; a recurrent agent's LSTM output on them, its memory (h, c) restarted
    from zeros where `episode_start`."""
    features = actor_features(weights, obs)
    if weights.lstm is None:
        return features, memory
    h, c = memory
    if episode_start is not None:
        h, c = np.where(episode_start[..., None], 0.0, h), np.where(episode_start[..., None], 0.0, c)
    return lstm_step(weights.lstm, features, h, c)


def actor_features(weights: ActorWeights, obs: np.ndarray) -> np.ndarray:
    """The features extractor's output (float32 [B, F]) at `obs`, or `obs` without one: what an MLP actor's MLP
    reads, and a recurrent actor's LSTM."""
    return obs if weights.extractor is None else weights.extractor(obs)


def actor_params(weights: ActorWeights, obs: np.ndarray):
    """`Actor.call` in numpy (an MLP actor): obs float32 [B, D] -> logits, (mean, log_std) or (mean, latent,
    sde_log_std); a state-independent log_std stays [A] (Keras broadcasts it to [B, A])."""
    return head_params(weights, actor_features(weights, obs))


def head_params(weights: ActorWeights, features: np.ndarray):
    """`Actor.from_features` in numpy: the actor's parameters from its extractor's output (`actor_features`)."""
    activation = ACTIVATIONS[weights.activation]
    for kernel, bias in weights.hidden:
        features = activation(features @ kernel + bias)
    out = features @ weights.head[0] + weights.head[1]
    if weights.sde_log_std is not None:
        return out, features, weights.sde_log_std
    if weights.log_std_head is not None:
        return out, features @ weights.log_std_head[0] + weights.log_std_head[1]
    if weights.log_std is not None:
        return out, weights.log_std  # [A]: broadcasts against the means [B, A]
    return out


def network_input(
    stats: Moments,
    obs: np.ndarray,
    normalize_obs: bool,
    columns: np.ndarray | None = None,
    norm: normalization.Constants = normalization.DEFAULTS,
) -> np.ndarray:
    """`kppo.rollout.native.network_input` in numpy; `columns`: the normalized ones (None: all)."""
    if normalize_obs:
        return normalization.normalize_np(stats, obs, norm.clip_obs, columns, norm.epsilon)
    obs = np.asarray(obs)
    return obs if obs.dtype == np.uint8 else obs.astype(np.float32, copy=False)  # images stay bytes (`obs_dtype`)


def key_rng(key) -> np.random.Generator:
    """The numpy generator of a stateless key (int32 [2], as `tf.random.stateless_*` take): `default_rng([k0, k1])`
    with each half read as uint32; an int seed s is the key [s, 0]. How keys turn into numpy draws everywhere a
    `NumpyActor` samples (the host rollout, `kppo.Policy.predict`)."""
    if isinstance(key, (int, np.integer)):
        key = [int(key), 0]
    key = np.asarray(key)
    if key.shape != (2,):
        raise ValueError(f"rng: expected an int seed or a key of shape [2], got shape {key.shape}")
    return np.random.default_rng(key.astype(np.uint32).tolist())


class NumpyActor(NamedTuple):
    """Acting in numpy from a snapshot: what the host rollout, host evaluation and `kppo.Policy.predict` call."""

    weights: ActorWeights
    dist: ActionDistribution
    normalize_obs: bool
    norm_columns: np.ndarray | None = None  # the columns normalization applies to (None: all)
    norm: normalization.Constants = normalization.DEFAULTS  # its clip and epsilon

    def params(self, stats: Moments, obs: np.ndarray):
        """The actor's parameters (see `actor_params`) at raw observations `obs` float32 [B, D] (an MLP actor)."""
        return actor_params(self.weights, network_input(stats, obs, self.normalize_obs, self.norm_columns, self.norm))

    def initial_memory(self, num_envs: int) -> tuple:
        """A recurrent actor's zero (h, c) for `num_envs` envs; () for an MLP actor."""
        if self.weights.lstm is None:
            return ()
        width = sum(recurrent.shape[-2] for _, recurrent, _ in self.weights.lstm)  # layers * units
        return tuple(np.zeros((num_envs, width), np.float32) for _ in range(2))

    def env_action(
        self,
        stats: Moments,
        obs: np.ndarray,
        mask: np.ndarray | None = None,
        memory: tuple = (),
        episode_start: np.ndarray | None = None,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, tuple]:
        """(actions in env units at raw observations `obs` float32 [B, D], among the actions `mask` (bool
        [B, mask_size]) allows: the mode of the policy, or a draw from `rng`; the actor memory after the step: a
        recurrent actor's (h, c), each [B, units], restarted from zeros where `episode_start` (bool [B]), () for an
        MLP actor)."""
        features, memory = actor_input(
            self.weights,
            network_input(stats, obs, self.normalize_obs, self.norm_columns, self.norm),
            memory,
            episode_start,
        )
        params = self.dist.masked_np(head_params(self.weights, features), mask)
        action = self.dist.mode_np(params) if rng is None else self.dist.sample_np(params, rng)
        return self.dist.to_env_np(action), memory

    def deterministic_env_action(
        self, stats: Moments, obs: np.ndarray, mask: np.ndarray | None = None, memory: tuple = ()
    ) -> tuple[np.ndarray, tuple]:
        """(the mode of the policy at raw observations `obs`, among the actions `mask` allows, in env units; the
        actor memory after the step: a recurrent actor's (h, c), () otherwise)."""
        return self.env_action(stats, obs, mask, memory)


def make_numpy_actor(
    actor: Actor,
    dist: ActionDistribution,
    normalize_obs: bool,
    lstm=None,
    norm_columns: np.ndarray | None = None,
    norm: normalization.Constants = normalization.DEFAULTS,
) -> NumpyActor:
    """A `NumpyActor` from the actor's current weights (and a recurrent agent's `LSTMCells` or its cell)."""
    return NumpyActor(snapshot(actor, lstm), dist, normalize_obs, norm_columns, norm)


class MemberActors(NamedTuple):
    """A population's members acting as one `NumpyActor` (what `kppo.rollout.gymnasium.evaluation_episodes` calls):
    member m acts on the m-th block of `num_envs // members` envs with its own statistics (`stats` with a member
    axis)."""

    actors: list[NumpyActor]

    @property
    def weights(self) -> ActorWeights:
        return self.actors[0].weights

    def initial_memory(self, num_envs: int) -> tuple:
        memories = [a.initial_memory(num_envs // len(self.actors)) for a in self.actors]
        return tuple(np.concatenate(parts) for parts in zip(*memories))

    def deterministic_env_action(
        self, stats: Moments, obs: np.ndarray, mask: np.ndarray | None = None, memory: tuple = ()
    ) -> tuple[np.ndarray, tuple]:
        count = len(self.actors)

        def rows(x, m):
            return None if x is None else np.split(x, count)[m]

        acted = [
            actor.deterministic_env_action(
                Moments(*(x[m] for x in stats)), rows(obs, m), rows(mask, m), tuple(rows(h, m) for h in memory)
            )
            for m, actor in enumerate(self.actors)
        ]
        actions = np.concatenate([a for a, _ in acted])
        return actions, tuple(np.concatenate(parts) for parts in zip(*[mem for _, mem in acted]))
