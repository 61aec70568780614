"""Adam as Keras and as torch compute it (`kppo.core.optimizers`), against the formulas in float64."""

from pathlib import Path

import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.optimizers import (
    OptimizerSpec,
    adam_state_of,
    adam_step,
    assign_adam_state,
    initial_adam_state,
    make_optimizer,
)

GRADIENTS = [np.array([1.6e-3, -2e-5, 0.3]), np.array([-1e-3, 4e-5, 0.1]), np.array([2e-3, 0.0, -0.2])]


def _reference(
    style: str, lr: float = 3e-4, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-5, decoupled: float = 0.0
) -> list:
    x, m, v, out = np.array([0.5, -0.25, 1.0]), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADIENTS, start=1):
        x = x * (1 - lr * decoupled)  # torch.optim.AdamW: the decay first, on the weight
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        if style == "torch":  # torch.optim.Adam: eps after the bias correction
            x = x - lr / bc1 * m / (np.sqrt(v) / np.sqrt(bc2) + eps)
        else:  # Keras: eps before it
            x = x - lr * np.sqrt(bc2) / bc1 * m / (np.sqrt(v) + eps)
        out.append(x.copy())
    return out


@pytest.mark.parametrize("style", ["keras", "torch"])
def test_adam_steps_follow_the_formula_of_its_style(style):
    variable = tf.Variable(np.array([0.5, -0.25, 1.0], np.float32))
    optimizer = make_optimizer(style, 3e-4)
    for g, want in zip(GRADIENTS, _reference(style)):
        optimizer.apply_gradients([(tf.constant(g, tf.float32), variable)])
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("style", ["keras", "torch"])
def test_adamw_decays_the_weights_before_torchs_adam_step_whatever_the_adam_style(style):
    """torch.optim.AdamW (SB3's `optimizer_class=th.optim.AdamW`): w *= 1 - lr * weight_decay, then torch's Adam."""
    variable = tf.Variable(np.array([0.5, -0.25, 1.0], np.float32))
    optimizer = make_optimizer(style, 3e-2, OptimizerSpec("adamw", eps=1e-8, weight_decay=0.5))
    for g, want in zip(GRADIENTS, _reference("torch", lr=3e-2, eps=1e-8, decoupled=0.5)):
        optimizer.apply_gradients([(tf.constant(g, tf.float32), variable)])
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-6, atol=1e-9)


def test_the_first_keras_step_is_shorter_where_the_gradient_is_small():
    keras_step = 0.5 - _reference("keras")[0][0]
    torch_step = 0.5 - _reference("torch")[0][0]
    assert keras_step / torch_step == pytest.approx(0.84, abs=0.01)  # |g| = 1.6e-3, as the module docstring says


@pytest.mark.parametrize("style", ["keras", "torch"])
def test_the_functional_adam_step_equals_the_optimizer_of_its_style(style):
    variable = tf.Variable(np.array([0.5, -0.25, 1.0], np.float32))
    optimizer = make_optimizer(style, 3e-4)
    optimizer.build([variable])
    params, state = [tf.constant(variable.numpy())], initial_adam_state([variable])
    for g in GRADIENTS:
        grad = tf.constant(g, tf.float32)
        optimizer.apply_gradients([(grad, variable)])
        params, state = adam_step(style, params, [grad], state, 3e-4)
        np.testing.assert_allclose(params[0].numpy(), variable.numpy(), rtol=0, atol=1e-9)
    restored = adam_state_of(optimizer, [variable])
    np.testing.assert_allclose(restored.m[0].numpy(), state.m[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(restored.v[0].numpy(), state.v[0].numpy(), rtol=1e-6)
    assert float(restored.steps) == float(state.steps) == 3.0


def test_an_adam_state_assigned_to_an_optimizer_continues_where_it_left_off():
    params, state = [tf.constant([0.5, -0.25, 1.0])], initial_adam_state([tf.zeros(3)])
    for g in GRADIENTS[:2]:
        params, state = adam_step("keras", params, [tf.constant(g, tf.float32)], state, 3e-4)
    variable = tf.Variable(params[0])
    optimizer = make_optimizer("keras", 3e-4)
    optimizer.build([variable])
    assign_adam_state(optimizer, [variable], state)
    optimizer.apply_gradients([(tf.constant(GRADIENTS[2], tf.float32), variable)])
    np.testing.assert_allclose(variable.numpy(), _reference("keras")[2], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("case", range(4))
def test_rmsprop_tf_like_follows_sb3s_class_step_by_step(case):
    """`optimizer="rmsprop_tf"` against SB3's own RMSpropTFLike (tests/fixtures/sb3/rmsprop_tf_like.npz, recorded
    by record_rmsprop_tf_like.py with SB3 2.9.2 / torch 2.13): 12 steps, momentum 0 / 0.9, centered or not, with
    and without weight decay, gradients from 1e-4 to 10."""
    data = np.load(Path(__file__).parents[1] / "fixtures" / "sb3" / "rmsprop_tf_like.npz")
    momentum, centered, weight_decay = data[f"case{case}_settings"]
    spec = OptimizerSpec(
        "rmsprop_tf",
        1e-5,
        alpha=0.99,
        momentum=float(momentum),
        centered=bool(centered),
        weight_decay=float(weight_decay),
    )
    variable = tf.Variable(data["initial"])
    optimizer = make_optimizer("torch", 7e-4, spec)
    for gradient, want in zip(data["grads"], data[f"case{case}"]):
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
        np.testing.assert_allclose(variable.numpy(), want, rtol=0, atol=2e-7)


def test_the_public_rmsprop_tf_like_is_sb3s_class_on_its_own():
    """`kppo.RMSpropTFLike` used directly as a Keras optimizer: SB3's recorded steps (case 0), and it survives
    Keras' get_config / from_config."""
    import kppo

    data = np.load(Path(__file__).parents[1] / "fixtures" / "sb3" / "rmsprop_tf_like.npz")
    momentum, centered, weight_decay = data["case0_settings"]
    optimizer = kppo.RMSpropTFLike(
        7e-4, alpha=0.99, eps=1e-5, momentum=float(momentum), centered=bool(centered), l2=float(weight_decay)
    )
    variable = tf.Variable(data["initial"])
    for gradient, want in zip(data["grads"], data["case0"]):
        optimizer.apply_gradients([(tf.constant(gradient), variable)])
        np.testing.assert_allclose(variable.numpy(), want, rtol=0, atol=2e-7)
    again = kppo.RMSpropTFLike.from_config(optimizer.get_config())
    assert again.tf_like and again.eps == 1e-5
