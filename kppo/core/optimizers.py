"""Adam as Keras computes it, or as torch computes it (Stable-Baselines3's optimizer).

The two differ only in where epsilon enters. Keras (and optax) step by lr * sqrt(1 - b2^t) / (1 - b1^t) * m /
(sqrt(v) + eps); torch.optim.Adam by lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), i.e. Keras' formula
with eps scaled by sqrt(1 - b2^t). On the first step (b2 = 0.999) Keras moves a weight by lr * g / (|g| + 31.6 eps),
torch by lr * g / (|g| + eps): for eps = 1e-5 and |g| = 1.6e-3, Keras' step is 0.84x torch's.
"""

from __future__ import annotations

from typing import NamedTuple

import keras
from keras import ops

from kppo._tf import tf

#: Adam's epsilon in kppo, as in SB3 (its PPO passes eps=1e-5 to torch.optim.Adam) and purejaxrl.
ADAM_EPSILON = 1e-5


class TorchAdam(keras.optimizers.Adam):
    """Keras' Adam with torch.optim.Adam's update (epsilon added after the bias correction, torch's operation order)."""

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr, gradient = ops.cast(learning_rate, dtype), ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        bias_correction1 = 1 - ops.power(ops.cast(self.beta_1, dtype), step)
        bias_correction2 = 1 - ops.power(ops.cast(self.beta_2, dtype), step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))  # torch: lerp
        self.assign(v, ops.add(ops.multiply(v, self.beta_2), ops.multiply(ops.square(gradient), 1 - self.beta_2)))
        denom = ops.add(ops.divide(ops.sqrt(v), ops.sqrt(bias_correction2)), self.epsilon)
        self.assign_sub(variable, ops.multiply(ops.divide(m, denom), lr / bias_correction1))


def make_optimizer(style: str, learning_rate: float) -> keras.optimizers.Optimizer:
    """Adam with epsilon 1e-5 in `style` ('keras' or 'torch', `Config.adam_style`)."""
    adam = TorchAdam if style == "torch" else keras.optimizers.Adam
    return adam(learning_rate=learning_rate, epsilon=ADAM_EPSILON)


class AdamState(NamedTuple):
    """Adam's state as tensors (the functional update `adam_step`, used where weights are tensors, not variables:
    populations): first and second moments per weight, in the weights' order, and the steps taken."""

    m: list
    v: list
    steps: tf.Tensor  # float32 scalar


def initial_adam_state(params: list) -> AdamState:
    return AdamState([tf.zeros_like(p) for p in params], [tf.zeros_like(p) for p in params], tf.constant(0.0))


def adam_state_of(optimizer: keras.optimizers.Adam, variables: list) -> AdamState:
    """A built Keras Adam's state for `variables` as tensors."""

    def slots(kind):
        return [tf.convert_to_tensor(kind[optimizer._get_variable_index(v)]) for v in variables]

    return AdamState(
        slots(optimizer._momentums), slots(optimizer._velocities), tf.cast(optimizer.iterations, tf.float32)
    )


def assign_adam_state(optimizer: keras.optimizers.Adam, variables: list, state: AdamState) -> None:
    """Sets a built Keras Adam's moments and step count (the inverse of `adam_state_of`)."""
    for variable, m, v in zip(variables, state.m, state.v):
        index = optimizer._get_variable_index(variable)
        optimizer._momentums[index].assign(m)
        optimizer._velocities[index].assign(v)
    optimizer.iterations.assign(tf.cast(state.steps, optimizer.iterations.dtype))


def adam_step(
    style: str,
    params: list,
    grads: list,
    state: AdamState,
    learning_rate,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = ADAM_EPSILON,
) -> tuple[list, AdamState]:
    """One Adam step on tensors, computing what `make_optimizer(style, ...)` computes on variables (Keras' order of
    operations for 'keras', `TorchAdam`'s for 'torch'). Returns (new weights, new state)."""
    steps = state.steps + 1.0
    bias_correction1 = 1.0 - tf.pow(beta_1, steps)
    bias_correction2 = 1.0 - tf.pow(beta_2, steps)
    new_params, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, state.m, state.v):
        m = m + (g - m) * (1.0 - beta_1)
        if style == "torch":
            v = v * beta_2 + tf.square(g) * (1.0 - beta_2)
            p = p - (m / (tf.sqrt(v) / tf.sqrt(bias_correction2) + epsilon)) * (learning_rate / bias_correction1)
        else:
            v = v + (tf.square(g) - v) * (1.0 - beta_2)
            alpha = learning_rate * tf.sqrt(bias_correction2) / bias_correction1
            p = p - (m * alpha) / (tf.sqrt(v) + epsilon)
        new_params.append(p)
        new_m.append(m)
        new_v.append(v)
    return new_params, AdamState(new_m, new_v, steps)
