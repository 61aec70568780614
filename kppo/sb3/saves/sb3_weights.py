"""SB3's policy `state_dict` (torch names and layouts, numpy arrays) onto a kppo agent's Keras variables.

    SB3 (torch)                                       kppo (Keras)
    mlp_extractor.policy_net.{2i}.weight [out, in]    actor.hidden[i].kernel [in, out] (transposed), .bias
    mlp_extractor.value_net.{2i}.*                    critic.hidden[i]
    action_net.*, value_net.*                         actor.head, critic.head
    log_std [A] / gSDE [latent, A or 1]               actor.log_std / actor.sde_log_std
    features_extractor.cnn.{0,2,4}.weight [o,i,h,w]   the NatureCNN's convs[k].kernel [h, w, i, o]
    features_extractor.linear.0.weight [512, C*H*W]   its linear.kernel [H*W*C, 512] (rows from torch's CHW flatten
                                                      to kppo's HWC flatten)
    pi_ / vf_features_extractor.*                     the actor's / critic's extractor (share_features_extractor
                                                      =False); a shared one's aliases must equal features_extractor
    lstm_actor.weight_ih_l0, weight_hh_l0 [4u, .]     memory.cells[0].kernel, .recurrent_kernel (transposed; torch's
    lstm_actor.bias_ih_l0, bias_hh_l0                 gate order i, f, g, o is kppo's), .input_bias, .recurrent_bias
    lstm_actor.*_l{k} (n_lstm_layers > 1)             memory.cells[0].kernel_{k}, ... (`TorchLSTMCell.layer_weights`)
    lstm_critic.*                                     memory.cells[1]
    critic.weight, critic.bias (sb3-contrib without   folded into the critic's first Dense (no activation between
    a critic LSTM: a Linear before the critic's MLP)  them: one affine map)

Every kppo variable receives exactly one tensor and every tensor of the state_dict is used (or is an alias of one
used): otherwise a one-line ValueError names the file and the names that have no counterpart, so a policy kppo
cannot rebuild (a user's torch extractor, another architecture) is refused rather than half loaded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kppo.agent.agent import Agent, feature_extractors
from kppo.agent.extractors import ConvTower, conv_output, hwc

Pairs = list[tuple[Any, np.ndarray, str]]  # (Keras variable, value in Keras layout, the torch name it came from)


class _Reader:
    """Takes tensors out of a state_dict by name, remembering which it used."""

    def __init__(self, state_dict: dict[str, np.ndarray], source: str):
        self.state_dict, self.source = state_dict, source
        self.used: set[str] = set()

    def take(self, name: str) -> np.ndarray:
        if name not in self.state_dict:
            raise ValueError(
                f"{self.source}: expected the tensor {name!r} for kppo's networks, found none (the policy holds "
                f"{_short(sorted(self.state_dict))})"
            )
        self.used.add(name)
        return np.asarray(self.state_dict[name])

    def has(self, name: str) -> bool:
        return name in self.state_dict


def _short(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _dense(layer: Any, reader: _Reader, prefix: str) -> Pairs:
    return [
        (layer.kernel, reader.take(f"{prefix}.weight").T, f"{prefix}.weight"),
        (layer.bias, reader.take(f"{prefix}.bias"), f"{prefix}.bias"),
    ]


def _tower(tower: ConvTower, reader: _Reader, prefix: str) -> Pairs:
    """A NatureCNN / SmallCNN: SB3's `cnn` Sequential (convolutions at 0, 2, 4 between ReLUs) and `linear.0`."""
    pairs: Pairs = []
    for k, conv in enumerate(tower.convs):
        name = f"{prefix}.cnn.{2 * k}"
        pairs.append((conv.kernel, reader.take(f"{name}.weight").transpose(2, 3, 1, 0), f"{name}.weight"))
        pairs.append((conv.bias, reader.take(f"{name}.bias"), f"{name}.bias"))
    h, w, _ = hwc(tower.observation_shape)
    spec = tuple((c.filters, c.kernel_size[0], c.strides[0]) for c in tower.convs)
    height, width = conv_output(h, spec), conv_output(w, spec)
    weight = reader.take(f"{prefix}.linear.0.weight")
    out, channels = weight.shape[0], weight.shape[1] // (height * width)
    kernel = weight.reshape(out, channels, height, width).transpose(2, 3, 1, 0).reshape(-1, out)
    pairs.append((tower.linear.kernel, kernel, f"{prefix}.linear.0.weight"))
    pairs.append((tower.linear.bias, reader.take(f"{prefix}.linear.0.bias"), f"{prefix}.linear.0.bias"))
    return pairs


def _extractor(layer: Any, reader: _Reader, prefix: str) -> Pairs:
    """The features extractor `layer` (kppo's `Preprocessed` around a tower) from SB3's module `prefix`."""
    inner = getattr(layer, "extractor", layer)
    if isinstance(inner, ConvTower):
        return _tower(inner, reader, prefix)
    if inner.trainable_variables:
        raise ValueError(
            f"{reader.source}: kppo's features extractor {type(inner).__name__} has weights this reader does not "
            f"map from SB3's {prefix} (NatureCNN is read)"
        )
    return []


def _feature_extractors(agent: Agent) -> tuple[Any, Any]:
    """(the actor's features extractor, the critic's), a recurrent agent's two when they are separate (sb3-contrib's
    `share_features_extractor=False`: `pi_` / `vf_features_extractor`)."""
    lstm = agent.lstm
    critic = getattr(lstm, "critic_extractor", None)
    if lstm is not None and critic is not None:
        return lstm.extractor, critic
    return feature_extractors(agent)


def _extractors(agent: Agent, reader: _Reader) -> Pairs:
    actor_x, critic_x = _feature_extractors(agent)
    if actor_x is None:
        return []
    if critic_x is actor_x:
        return _extractor(actor_x, reader, "features_extractor")
    pairs = _extractor(actor_x, reader, "pi_features_extractor")
    return pairs + _extractor(critic_x, reader, "vf_features_extractor")


#: torch.nn.LSTM's names of one layer's weights (suffix `_l{k}` for layer k), in `TorchLSTMCell.layer_weights` order.
LSTM_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def lstm_weights(agent: Agent) -> list[tuple[Any, str, bool]]:
    """(Keras variable, torch name, transposed between the two) of every LSTM weight of a recurrent agent, layer by
    layer (none for an MLP agent): the kernels are transposed, the biases not."""
    if agent.lstm is None:
        return []
    return [
        (variable, f"lstm_{role}.{name}_l{layer}", name.startswith("weight"))
        for cell, role in zip(agent.lstm.cells, ("actor", "critic"))
        for layer in range(cell.num_layers)
        for variable, name in zip(cell.layer_weights(layer), LSTM_NAMES)
    ]


def _lstm(agent: Agent, reader: _Reader) -> Pairs:
    pairs: Pairs = []
    for variable, name, transposed in lstm_weights(agent):
        value = reader.take(name)
        pairs.append((variable, value.T if transposed else value, name))
    return pairs


def _critic(agent: Agent, reader: _Reader) -> Pairs:
    """The critic's towers and head; sb3-contrib's `critic` Linear (no critic LSTM) folded into the first layer."""
    layers = [*agent.critic.hidden, agent.critic.head]
    names = [f"mlp_extractor.value_net.{2 * i}" for i in range(len(agent.critic.hidden))] + ["value_net"]
    pairs = [pair for layer, name in zip(layers, names) for pair in _dense(layer, reader, name)]
    if reader.has("critic.weight"):
        first_kernel, first_bias = pairs[0][1], pairs[1][1]
        pre_kernel, pre_bias = reader.take("critic.weight").T, reader.take("critic.bias")
        pairs[0] = (pairs[0][0], pre_kernel.astype(np.float64) @ first_kernel, "critic.weight")
        pairs[1] = (pairs[1][0], pre_bias.astype(np.float64) @ first_kernel + first_bias, "critic.bias")
    return pairs


def sb3_pairs(agent: Agent, state_dict: dict[str, np.ndarray], source: str) -> Pairs:
    """(variable, value, torch name) for every variable of `agent` from SB3's `state_dict` (see the module
    docstring); one-line ValueErrors for a missing tensor, a tensor left over, or a shape that differs."""
    reader = _Reader(state_dict, source)
    actor = agent.actor
    pairs = _extractors(agent, reader) + _lstm(agent, reader)
    for i, layer in enumerate(actor.hidden):
        pairs += _dense(layer, reader, f"mlp_extractor.policy_net.{2 * i}")
    pairs += _dense(actor.head, reader, "action_net")
    pairs += _critic(agent, reader)
    if getattr(actor, "state_dependent_noise", False):
        pairs.append((actor.sde_log_std, reader.take("log_std"), "log_std"))
    elif getattr(actor, "log_std", None) is not None:
        pairs.append((actor.log_std, reader.take("log_std"), "log_std"))
    _check_left_over(reader)
    _check_every_variable(agent, pairs, source)
    return pairs


def _check_left_over(reader: _Reader) -> None:
    """Tensors not used must be aliases of used ones (SB3 registers one extractor under several names)."""
    twins: dict[str, list[str]] = {}
    for name in reader.used:
        if "features_extractor." in name:
            twins.setdefault(name.split(".", 1)[1], []).append(name)
    left = []
    for name in sorted(set(reader.state_dict) - reader.used):
        head, _, suffix = name.partition(".")
        candidates = twins.get(suffix, []) if head.endswith("features_extractor") else []
        if not any(np.array_equal(reader.state_dict[name], reader.state_dict[twin]) for twin in candidates):
            left.append(name)
    if left:
        raise ValueError(
            f"{reader.source}: holds weights kppo's networks have no place for: {_short(left)} (a policy "
            f"architecture kppo does not build)"
        )


def _check_every_variable(agent: Agent, pairs: Pairs, source: str) -> None:
    targets = {id(v) for v in agent.variables}
    given = [id(v) for v, _, _ in pairs]
    if len(given) != len(set(given)) or set(given) != targets:
        missing = [v.path for v in agent.variables if id(v) not in set(given)]
        raise ValueError(f"{source}: kppo's variables {missing} receive no SB3 tensor")
    for variable, value, name in pairs:
        if tuple(variable.shape) != tuple(value.shape):
            raise ValueError(
                f"{source}: {name}: expected shape {tuple(variable.shape)} (Keras layout) for {variable.path}, "
                f"got {tuple(value.shape)}"
            )


def assign_sb3_weights(agent: Agent, state_dict: dict[str, np.ndarray], source: str) -> None:
    """Assigns SB3's `state_dict` to `agent` (checked first: nothing is assigned when a check fails)."""
    for variable, value, _ in sb3_pairs(agent, state_dict, source):
        variable.assign(np.asarray(value, np.float32))


# --- the other direction: a kppo agent's variables as SB3's state_dict (names and torch layouts) ---


def _dense_out(layer: Any, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}.weight": layer.kernel.numpy().T, f"{prefix}.bias": layer.bias.numpy()}


def _tower_out(tower: ConvTower, prefix: str) -> dict[str, np.ndarray]:
    """`_tower` inverted: kernels [h, w, i, o] -> [o, i, h, w]; the linear's HWC rows -> torch's CHW columns."""
    out: dict[str, np.ndarray] = {}
    for k, conv in enumerate(tower.convs):
        out[f"{prefix}.cnn.{2 * k}.weight"] = conv.kernel.numpy().transpose(3, 2, 0, 1)
        out[f"{prefix}.cnn.{2 * k}.bias"] = conv.bias.numpy()
    h, w, _ = hwc(tower.observation_shape)
    spec = tuple((c.filters, c.kernel_size[0], c.strides[0]) for c in tower.convs)
    height, width = conv_output(h, spec), conv_output(w, spec)
    kernel = tower.linear.kernel.numpy()
    channels, features = kernel.shape[0] // (height * width), kernel.shape[1]
    out[f"{prefix}.linear.0.weight"] = (
        kernel.reshape(height, width, channels, features).transpose(3, 2, 0, 1).reshape(features, -1)
    )
    out[f"{prefix}.linear.0.bias"] = tower.linear.bias.numpy()
    return out


def _extractors_out(agent: Agent) -> dict[str, np.ndarray]:
    """The extractors under SB3's names: a shared one as `features_extractor` and its two aliases, as SB3 registers
    it; separate ones as `pi_` / `vf_features_extractor`, the actor's also as `features_extractor` (SB3's alias)."""
    actor_x, critic_x = _feature_extractors(agent)
    if actor_x is None:
        return {}

    def tower(layer: Any, prefix: str) -> dict[str, np.ndarray]:
        inner = getattr(layer, "extractor", layer)
        if isinstance(inner, ConvTower):
            return _tower_out(inner, prefix)
        if inner.trainable_variables:
            raise ValueError(
                f"state_dict: expected kppo's NatureCNN / SmallCNN or a weightless extractor, got "
                f"{type(inner).__name__} (a user's layer has no SB3 parameter names; get_parameters() has its weights)"
            )
        return {}

    if critic_x is actor_x:
        shared = tower(actor_x, "features_extractor")
        aliases = {
            f"{alias}.{name.split('.', 1)[1]}": value
            for alias in ("pi_features_extractor", "vf_features_extractor")
            for name, value in shared.items()
        }
        return {**shared, **aliases}
    actor = tower(actor_x, "pi_features_extractor")  # SB3 registers the actor's as `features_extractor` too
    alias = {f"features_extractor.{name.split('.', 1)[1]}": value for name, value in actor.items()}
    return {**alias, **actor, **tower(critic_x, "vf_features_extractor")}


def extractor_aliases(agent: Agent) -> tuple[str, ...]:
    """The SB3 module names that hold one and the same features extractor of `agent`: all three for a shared one,
    `features_extractor` and `pi_features_extractor` for separate ones (SB3's `features_extractor` is the actor's)."""
    actor_x, critic_x = _feature_extractors(agent)
    if actor_x is None:
        return ()
    if critic_x is actor_x:
        return ("features_extractor", "pi_features_extractor", "vf_features_extractor")
    return ("features_extractor", "pi_features_extractor")


def sb3_state_dict(agent: Agent) -> dict[str, np.ndarray]:
    """The agent's variables as SB3's `policy.state_dict()`: the names `sb3_pairs` reads, torch's layouts, numpy
    arrays (`assign_sb3_weights` reads it back exactly)."""
    out = _extractors_out(agent)
    for variable, name, transposed in lstm_weights(agent):
        out[name] = variable.numpy().T if transposed else variable.numpy()
    actor, critic = agent.actor, agent.critic
    for i, layer in enumerate(actor.hidden):
        out.update(_dense_out(layer, f"mlp_extractor.policy_net.{2 * i}"))
    for i, layer in enumerate(critic.hidden):
        out.update(_dense_out(layer, f"mlp_extractor.value_net.{2 * i}"))
    out.update(_dense_out(actor.head, "action_net"))
    out.update(_dense_out(critic.head, "value_net"))
    if getattr(actor, "state_dependent_noise", False):
        out["log_std"] = actor.sde_log_std.numpy()
    elif getattr(actor, "log_std", None) is not None:
        out["log_std"] = actor.log_std.numpy()
    return out
