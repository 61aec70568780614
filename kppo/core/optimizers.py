"""Adam as Keras computes it, or as torch computes it (Stable-Baselines3's optimizer); torch's RMSprop and SGD and
SB3's RMSpropTFLike (`optimizer_class` of SB3's policies) computed as torch computes them.

The two differ only in where epsilon enters. Keras steps by lr * sqrt(1 - b2^t) / (1 - b1^t) * m /
(sqrt(v) + eps); torch.optim.Adam by lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), i.e. Keras' formula
with eps scaled by sqrt(1 - b2^t). On the first step (b2 = 0.999) Keras moves a weight by lr * g / (|g| + 31.6 eps),
torch by lr * g / (|g| + eps): for eps = 1e-5 and |g| = 1.6e-3, Keras' step is 0.84x torch's. optax's
`scale_by_adam` (purejaxrl, rex, gymnax-blines) is torch's order: m_hat / (sqrt(v_hat) + eps), both moments
bias-corrected first.

The others, with g the gradient plus torch's L2 term `weight_decay * w` (torch adds it to the gradient, also for
Adam; Keras' `weight_decay` is decoupled, AdamW-style, so it is not used here; torch.optim.AdamW is `TorchAdam` with
its decoupled decay: w -= lr * weight_decay * w, then Adam's step), rho = `alpha`, mu = `momentum`:

    torch.optim.RMSprop  v = rho v + (1 - rho) g^2 (v starts at 0); d = sqrt(v) + eps (centered: sqrt(v - a^2) + eps,
                         a = rho a + (1 - rho) g); mu = 0: w -= lr g / d; else b = mu b + g / d, w -= lr b.
    keras RMSprop        the same v, but d = sqrt(v + eps) (eps inside the root) and its momentum accumulates
                         lr g / d (the same steps only while lr is constant); not used for torch's RMSprop.
    RMSpropTFLike        (stable_baselines3.common.sb2_compat.rmsprop_tf_like, TF1's RMSProp as stable-baselines
                         used it) v starts at 1, not 0, and d = sqrt(v + eps) (centered: sqrt(v - a^2 + eps));
                         momentum as torch's (b = mu b + g / d, w -= lr b).
    torch.optim.SGD      mu = 0: w -= lr g; else b = g on the first step, then b = mu b + (1 - dampening) g;
                         w -= lr (g + mu b) with nesterov, else w -= lr b. (Keras' SGD keeps m = mu m - lr g: the
                         same steps only while lr is constant and dampening is 0.)

First step of RMSprop for one weight, rho = 0.99, eps = 1e-5, |g| = 1e-3: torch divides by 0.1 |g| + eps = 1.1e-4,
Keras by sqrt(0.01 g^2 + eps) = 3.2e-3 (29x smaller steps), RMSpropTFLike by sqrt(0.99 + 0.01 g^2 + eps) = 0.995
(about lr g: v's start at 1 makes early steps small, the point of SB2's recipe).
"""

from __future__ import annotations

import math

from typing import NamedTuple

import keras
from keras import ops

from kppo._tf import tf

#: Adam's epsilon in kppo, as in SB3 (its PPO passes eps=1e-5 to torch.optim.Adam) and purejaxrl.
ADAM_EPSILON = 1e-5
#: `Config.optimizer`'s values: the update each names (module docstring).
OPTIMIZERS = ("adam", "adamw", "rmsprop", "rmsprop_tf", "sgd")


class OptimizerSpec(NamedTuple):
    """What builds the optimizer (`Config`'s optimizer fields): `name` one of `OPTIMIZERS`; `eps` of Adam and the
    RMSprops; `beta_1`, `beta_2` Adam's; `alpha` (smoothing), `centered` the RMSprops'; `momentum` of the RMSprops
    and SGD; `dampening`, `nesterov` SGD's; `weight_decay` torch's L2 term, added to the gradient (for "adamw",
    torch.optim.AdamW's decoupled decay: w -= lr * weight_decay * w before the Adam step)."""

    name: str = "adam"
    eps: float = ADAM_EPSILON
    beta_1: float = 0.9
    beta_2: float = 0.999
    alpha: float = 0.99
    momentum: float = 0.0
    centered: bool = False
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0


def _with_l2(gradient, variable, weight_decay: float):
    """torch's `weight_decay`: g + weight_decay * w, in the variable's dtype."""
    gradient = ops.cast(gradient, variable.dtype)
    return gradient if not weight_decay else ops.add(gradient, ops.multiply(variable, weight_decay))


def torch_bias_correction(beta: float, step):
    """1 - beta ** step as torch computes it (in double precision), to float32 rounding: -expm1(step * log(beta)),
    log(beta) taken in Python. float32's 1 - 0.999 ** step is 1.3e-5 too small at step 1 (every early step of a
    float32 Adam 6.6e-6 shorter than torch's); no float64 op is needed, so it runs on TPUs too."""
    return -ops.expm1(ops.multiply(step, math.log(float(beta))))


class TorchAdam(keras.optimizers.Adam):
    """Keras' Adam with torch.optim.Adam's update (epsilon added after the bias correction, torch's operation order);
    `l2`: torch's `weight_decay` (added to the gradient); `decoupled`: torch.optim.AdamW's `weight_decay` (the weight
    shrunk by lr * decoupled first, then the Adam step)."""

    def __init__(self, *args, l2: float = 0.0, decoupled: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.l2, self.decoupled = float(l2), float(decoupled)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr, gradient = ops.cast(learning_rate, dtype), _with_l2(gradient, variable, self.l2)
        if self.decoupled:
            self.assign(variable, ops.multiply(variable, ops.subtract(1.0, ops.multiply(lr, self.decoupled))))
        step = ops.cast(self.iterations + 1, dtype)
        bias_correction1 = torch_bias_correction(self.beta_1, step)
        bias_correction2 = torch_bias_correction(self.beta_2, step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))  # torch: lerp
        self.assign(v, ops.add(ops.multiply(v, self.beta_2), ops.multiply(ops.square(gradient), 1 - self.beta_2)))
        denom = ops.add(ops.divide(ops.sqrt(v), ops.sqrt(bias_correction2)), self.epsilon)
        self.assign_sub(variable, ops.multiply(ops.divide(m, denom), lr / bias_correction1))


class TorchRMSprop(keras.optimizers.Optimizer):
    """torch.optim.RMSprop's update (eps outside the square root, momentum on g / d; module docstring); with
    `tf_like`, SB3's RMSpropTFLike (v starts at 1, eps inside the square root)."""

    def __init__(
        self,
        learning_rate: float = 0.01,
        alpha: float = 0.99,
        eps: float = 1e-8,
        momentum: float = 0.0,
        centered: bool = False,
        l2: float = 0.0,
        tf_like: bool = False,
        name: str = "torch_rmsprop",
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.alpha, self.eps, self.momentum = float(alpha), float(eps), float(momentum)
        self.centered, self.l2, self.tf_like = bool(centered), float(l2), bool(tf_like)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._square_avgs = self.add_optimizer_variables(var_list, "square_avg", "ones" if self.tf_like else "zeros")
        self._grad_avgs = self.add_optimizer_variables(var_list, "grad_avg") if self.centered else []
        self._buffers = self.add_optimizer_variables(var_list, "momentum_buffer") if self.momentum > 0 else []

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        lr, gradient = ops.cast(learning_rate, variable.dtype), _with_l2(gradient, variable, self.l2)
        v = self._square_avgs[index]
        self.assign(v, ops.add(ops.multiply(v, self.alpha), ops.multiply(ops.square(gradient), 1 - self.alpha)))
        square = v
        if self.centered:
            a = self._grad_avgs[index]
            self.assign(a, ops.add(ops.multiply(a, self.alpha), ops.multiply(gradient, 1 - self.alpha)))
            square = ops.subtract(v, ops.square(a))
        if self.tf_like:
            denom = ops.sqrt(ops.add(square, self.eps))
        else:
            denom = ops.add(ops.sqrt(square), self.eps)
        step = ops.divide(gradient, denom)
        if self.momentum > 0:
            b = self._buffers[index]
            self.assign(b, ops.add(ops.multiply(b, self.momentum), step))
            step = b
        self.assign_sub(variable, ops.multiply(step, lr))

    def get_config(self):
        return {
            **super().get_config(),
            "alpha": self.alpha,
            "eps": self.eps,
            "momentum": self.momentum,
            "centered": self.centered,
            "l2": self.l2,
            "tf_like": self.tf_like,
        }


class RMSpropTFLike(TorchRMSprop):
    """SB3's `RMSpropTFLike` (stable_baselines3.common.sb2_compat.rmsprop_tf_like: TF1's RMSProp, the square average
    starting at 1 and eps inside the square root) as a Keras optimizer: `policy_kwargs=dict(optimizer_class=
    kppo.RMSpropTFLike, optimizer_kwargs=dict(alpha=0.99, eps=1e-5, weight_decay=0))` as with SB3's class, or on its
    own (`l2` is torch's `weight_decay`)."""

    def __init__(
        self,
        learning_rate: float = 0.01,
        alpha: float = 0.99,
        eps: float = 1e-8,
        momentum: float = 0.0,
        centered: bool = False,
        l2: float = 0.0,
        name: str = "rmsprop_tf_like",
        **kwargs,
    ):
        kwargs.pop("tf_like", None)  # from_config gives it back
        super().__init__(learning_rate, alpha, eps, momentum, centered, l2, tf_like=True, name=name, **kwargs)


class TorchSGD(keras.optimizers.Optimizer):
    """torch.optim.SGD's update (module docstring): the momentum buffer starts as the first gradient."""

    def __init__(
        self,
        learning_rate: float = 0.001,
        momentum: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
        l2: float = 0.0,
        name: str = "torch_sgd",
        **kwargs,
    ):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.momentum, self.dampening, self.nesterov, self.l2 = float(momentum), float(dampening), nesterov, float(l2)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._buffers = self.add_optimizer_variables(var_list, "momentum_buffer") if self.momentum > 0 else []

    def update_step(self, gradient, variable, learning_rate):
        lr, gradient = ops.cast(learning_rate, variable.dtype), _with_l2(gradient, variable, self.l2)
        step = gradient
        if self.momentum > 0:
            b = self._buffers[self._get_variable_index(variable)]
            later = ops.add(ops.multiply(b, self.momentum), ops.multiply(gradient, 1 - self.dampening))
            self.assign(b, ops.where(ops.equal(self.iterations, 0), gradient, later))
            step = ops.add(gradient, ops.multiply(b, self.momentum)) if self.nesterov else b
        self.assign_sub(variable, ops.multiply(step, lr))

    def get_config(self):
        return {
            **super().get_config(),
            "momentum": self.momentum,
            "dampening": self.dampening,
            "nesterov": self.nesterov,
            "l2": self.l2,
        }


def make_optimizer(style: str, learning_rate: float, spec: OptimizerSpec | None = None) -> keras.optimizers.Optimizer:
    """The optimizer `spec` names (default: Adam with epsilon 1e-5) at `learning_rate`; Adam in `style` ('keras' or
    'torch', `Config.adam_style`), the others as torch computes them (module docstring)."""
    spec = spec or OptimizerSpec()
    if spec.name == "rmsprop" or spec.name == "rmsprop_tf":
        return TorchRMSprop(
            learning_rate,
            spec.alpha,
            spec.eps,
            spec.momentum,
            spec.centered,
            spec.weight_decay,
            spec.name == "rmsprop_tf",
        )
    if spec.name == "sgd":
        return TorchSGD(learning_rate, spec.momentum, spec.dampening, spec.nesterov, spec.weight_decay)
    betas = dict(beta_1=spec.beta_1, beta_2=spec.beta_2, epsilon=spec.eps)
    if spec.name == "adamw":  # torch.optim.AdamW: torch's order of operations, whatever the Adam style
        return TorchAdam(learning_rate=learning_rate, decoupled=spec.weight_decay, **betas)
    if style == "torch":
        return TorchAdam(learning_rate=learning_rate, l2=spec.weight_decay, **betas)
    return keras.optimizers.Adam(learning_rate=learning_rate, **betas)


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
    if style == "torch":
        bias_correction1, bias_correction2 = torch_bias_correction(beta_1, steps), torch_bias_correction(beta_2, steps)
    else:  # Keras' own float32 arithmetic
        bias_correction1, bias_correction2 = 1.0 - tf.pow(beta_1, steps), 1.0 - tf.pow(beta_2, steps)
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
