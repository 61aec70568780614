"""A recurrent agent's LSTM cells, as sb3-contrib's RecurrentPPO builds them: torch.nn.LSTM's cell and stacked layers
(`TorchLSTMCell`), the actor's and the critic's cells with the features extractor they read (`LSTMCells`), and a
policy's path through them (`ActorLSTM`)."""

from __future__ import annotations

import math
from typing import Any

import keras

from kppo.agent.features import extract, extract_shape, features_dim


class TorchLSTMCell(keras.layers.Layer):
    """torch.nn.LSTM's cell (`num_layers` stacked layers, as sb3-contrib builds it with `n_lstm_layers`): in each layer,
    gates i, f, g, o from x @ kernel + h @ recurrent_kernel + input_bias + recurrent_bias; c' = sig(f) c + sig(i)
    tanh(g), h' = sig(o) tanh(c'); layer l > 0 reads layer l - 1's h'.
    Every weight starts U(+-1/sqrt(units)), no forget-gate offset. The two biases are torch's b_ih and b_hh: the
    forward pass only sees their sum, but Adam steps each, so the sum learns at twice the step of one bias, as in
    sb3-contrib (and both count in the global gradient norm). Called as Keras' LSTMCell: (x, [h, c]) -> (h' of the
    last layer, (h', c')), where h and c hold every layer's state side by side, [B, layers * units] (layer l's in
    columns l * units to (l + 1) * units: `state_size`), so the memory is two tensors whatever the depth.
    Layer 0's weights are `kernel`, `recurrent_kernel`, `input_bias`, `recurrent_bias` (a one-layer cell is what it
    was); layer l's carry the suffix `_l` (`layer_weights`).
    `biases=1`: one `bias`, the layout of Keras' LSTMCell, which kppo used before; only for reading agents saved then
    (`kppo.agent.agent.read_any_cells` moves them into a two-bias cell)."""

    def __init__(self, units: int, seed: int = 0, biases: int = 2, num_layers: int = 1, **kwargs: Any):
        super().__init__(**kwargs)
        self.units, self.seed, self.biases, self.num_layers = int(units), int(seed), int(biases), int(num_layers)
        if self.num_layers < 1 or (self.num_layers > 1 and self.biases != 2):
            raise ValueError(f"num_layers: expected an integer >= 1 (one-bias cells: 1), got {num_layers!r}")

    @property
    def bias_names(self) -> list[str]:
        return ["input_bias", "recurrent_bias"] if self.biases == 2 else ["bias"]

    @property
    def state_size(self) -> int:
        """The width of h and of c: every layer's units side by side."""
        return self.num_layers * self.units

    def weight_names(self, layer: int) -> list[str]:
        """The attribute names of layer `layer`'s weights: kernel, recurrent kernel, then the biases."""
        suffix = f"_{layer}" if layer else ""
        return [name + suffix for name in ("kernel", "recurrent_kernel", *self.bias_names)]

    def layer_weights(self, layer: int) -> list:
        """Layer `layer`'s weights (variables), in `weight_names` order."""
        return [getattr(self, name) for name in self.weight_names(layer)]

    def build(self, input_shape):
        bound = 1.0 / math.sqrt(self.units)
        for layer in range(self.num_layers):
            width = int(input_shape[-1]) if layer == 0 else self.units
            biases = [(4 * self.units,)] * len(self.bias_names)
            shapes = [(width, 4 * self.units), (self.units, 4 * self.units), *biases]
            for k, (name, shape) in enumerate(zip(self.weight_names(layer), shapes)):
                initializer = keras.initializers.RandomUniform(-bound, bound, seed=self.seed + 100 * layer + k)
                setattr(self, name, self.add_weight(shape=shape, initializer=initializer, name=name))
        self.built = True

    def call(self, inputs, states):
        if self.num_layers == 1:
            return self._layer_step(0, inputs, *states)
        hs, cs, x = [], [], inputs
        for layer in range(self.num_layers):
            columns = slice(layer * self.units, (layer + 1) * self.units)
            x, (h, c) = self._layer_step(layer, x, states[0][:, columns], states[1][:, columns])
            hs.append(h)
            cs.append(c)
        return x, (keras.ops.concatenate(hs, axis=-1), keras.ops.concatenate(cs, axis=-1))

    def _layer_step(self, layer: int, x, h, c):
        """Layer `layer` on its input `x` and its state (h, c) -> (h', (h', c'))."""
        kernel, recurrent_kernel, *biases = self.layer_weights(layer)
        z = keras.ops.matmul(x, kernel) + keras.ops.matmul(h, recurrent_kernel)
        for bias in biases:
            z = z + bias
        i, f, g, o = keras.ops.split(z, 4, axis=-1)
        c = keras.ops.sigmoid(f) * c + keras.ops.sigmoid(i) * keras.ops.tanh(g)
        h = keras.ops.sigmoid(o) * keras.ops.tanh(c)
        return h, (h, c)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "seed": self.seed,
            "biases": self.biases,
            "num_layers": self.num_layers,
        }


class ActorLSTM(keras.layers.Layer):
    """A recurrent actor's path to its MLP: the features extractor the LSTMs read (if any), then the actor's
    `TorchLSTMCell`; called as the cell is, (obs, [h, c]) -> (output, (h, c)). It holds no weights of its own: a
    view of an agent's layers that a `Policy` and its artifacts act through (`LSTMCells.actor_lstm`)."""

    def __init__(self, cell: TorchLSTMCell, extractor: keras.layers.Layer | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.cell = cell
        if extractor is not None:
            self.extractor = extractor
        self.built = True  # no weights of its own; the cell and the extractor come built

    @property
    def units(self) -> int:
        return self.cell.units

    @property
    def num_layers(self) -> int:
        return self.cell.num_layers

    @property
    def state_size(self) -> int:
        return self.cell.state_size

    def call(self, obs, states):
        return self.cell(extract(self, obs), states)


class LSTMCells(keras.Model):
    """The LSTM cells of a recurrent agent (sb3-contrib's MlpLstmPolicy): the actor's, and the critic's when it has
    its own, each `layers` deep (sb3-contrib's `n_lstm_layers`). The actor (and that critic) MLP reads the cell's
    output (a `shared` critic the actor cell's, without backpropagating into it: sb3-contrib's `shared_lstm`); a
    memory is (h, c) per cell, [B, layers * units] each (`state_size`).
    torch.nn.LSTM's cells and initialization (`TorchLSTMCell`), as sb3-contrib leaves its LSTMs (its orthogonal init
    covers the MLPs and heads only).
    `extractor`: a features extractor both cells read the observations through, run once a step (sb3-contrib's
    CnnLstmPolicy: a NatureCNN shared by the two LSTMs, `share_features_extractor=True`); a critic without a cell
    reads its features too (`features`). `critic_extractor`: the critic's own extractor (sb3-contrib's
    `share_features_extractor=False`: `pi_features_extractor` before the actor's LSTM, `vf_features_extractor`
    before the critic's LSTM, or before the critic's MLP when it has no cell)."""

    def __init__(
        self,
        units: int,
        critic_cell: bool = True,
        seed: int = 0,
        biases: int = 2,
        shared: bool = False,
        num_layers: int = 1,
        extractor: keras.layers.Layer | None = None,
        critic_extractor: keras.layers.Layer | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.units, self.critic_cell, self.seed = int(units), bool(critic_cell), int(seed)
        if extractor is not None:  # unset otherwise: the attribute would change the checkpoints' object graph
            self.extractor = extractor
        if critic_extractor is not None and critic_extractor is not extractor:
            if shared:  # sb3-contrib asserts it: a shared LSTM reads one extractor
                raise ValueError("critic_extractor: expected None with shared=True (a shared LSTM reads one extractor)")
            self.critic_extractor = critic_extractor
        self.shared = bool(shared)  # the critic reads the actor cell's output, gradient stopped (sb3-contrib)
        self.num_layers = int(num_layers)
        self.cells = [
            TorchLSTMCell(self.units, seed + 10 * i, biases, self.num_layers, name=f"{role}_lstm")
            for i, role in enumerate(["actor", "critic"][: 1 + self.critic_cell])
        ]

    @property
    def state_size(self) -> int:
        """The width of each cell's h and c: every layer's units side by side."""
        return self.num_layers * self.units

    def _critic_extractor(self) -> keras.layers.Layer | None:
        """The critic's own features extractor, None when it reads the actor's (or none)."""
        return getattr(self, "critic_extractor", None)

    def build(self, input_shape):
        shape = extract_shape(self, input_shape)
        critic = self._critic_extractor()
        critic_shape = shape if critic is None else (None, features_dim(critic, int(input_shape[-1])))
        self.features_width = int(critic_shape[-1])  # what a critic without a cell reads
        for cell, cell_shape in zip(self.cells, (shape, critic_shape)):
            cell.build(cell_shape)
        self.built = True

    def features(self, obs):
        """What the critic's side reads at observations `obs` [B, D]: its own extractor's output, the shared
        extractor's, or `obs` (a critic without a cell reads these)."""
        critic = self._critic_extractor()
        return extract(self, obs) if critic is None else critic(obs)

    def actor_lstm(self) -> ActorLSTM:
        """The actor's path through the LSTM (its cell after the features extractor): what a policy acts with."""
        return ActorLSTM(self.cells[0], getattr(self, "extractor", None))

    def call(self, obs, memory):
        """One step of every cell from `memory` (h, c per cell) -> (outputs per cell, new memory)."""
        outputs, new, features = [], [], extract(self, obs)
        critic_features = features if self._critic_extractor() is None else self.features(obs)
        for i, cell in enumerate(self.cells):
            out, (h, c) = cell(critic_features if i else features, [memory[2 * i], memory[2 * i + 1]])
            outputs.append(out)
            new += [h, c]
        return outputs, tuple(new)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "critic_cell": self.critic_cell,
            "seed": self.seed,
            "shared": self.shared,
            "num_layers": self.num_layers,
        }
