"""Adam as Keras computes it, or as torch computes it (Stable-Baselines3's optimizer).

The two differ only in where epsilon enters. Keras (and optax) step by lr * sqrt(1 - b2^t) / (1 - b1^t) * m /
(sqrt(v) + eps); torch.optim.Adam by lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), i.e. Keras' formula
with eps scaled by sqrt(1 - b2^t). On the first step (b2 = 0.999) Keras moves a weight by lr * g / (|g| + 31.6 eps),
torch by lr * g / (|g| + eps): for eps = 1e-5 and |g| = 1.6e-3, Keras' step is 0.84x torch's.
"""

from __future__ import annotations

import keras
from keras import ops

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
