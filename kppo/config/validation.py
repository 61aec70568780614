"""A Config's values checked on construction (`validate`): each field's range or choices, and the rules that tie
fields together; a failure is one line naming the field, what was expected and what was received (`check`)."""

from __future__ import annotations

from typing import Any

from kppo.config.choices import (
    ACTIVATIONS,
    ADAM_STYLES,
    BIAS_INITS,
    DISTRIBUTE,
    ENV_BACKENDS,
    FEATURES_EXTRACTORS,
    KERNEL_INITS,
    OPTIMIZERS,
    VECTORIZATIONS,
    VF_CLIP_MODES,
)
from kppo.config.fields import ConfigFields
from kppo.config.schedules import SCHEDULED, SCHEDULES

__all__ = ["INT_BOUNDS", "check", "validate"]

INT32_MAX = 2**31 - 1  # the iteration counter, the step keys' seed, the envs' and rows' indices are int32 tensors
INT64_MAX = 2**63 - 1  # the timestep counters are int64

#: The largest value of each integer field, and of the derived counts that index int32 tensors. Past them a run would
#: overflow a counter, an index or a stateless key (and never end, or fail deep inside TensorFlow), or ask for
#: networks and batches no device holds.
INT_BOUNDS = {
    "num_envs": 2**20,
    "num_steps": 2**24,
    "total_timesteps": INT64_MAX,
    "num_epochs": 2**16,
    "num_minibatches": 2**24,
    "advantage_std_ddof": 1,
    "num_hidden_layers": 256,
    "num_hidden_units": 2**20,
    "features_dim": 2**20,
    "sde_sample_freq": INT32_MAX,
    "lstm_hidden_size": 2**20,
    "n_lstm_layers": 256,
    "lstm_sequence_length": 2**24,
    "frame_stack": 1024,
    "num_eval_envs": 2**20,
    "eval_freq": INT32_MAX,
    "verbose": 2,
    "seed": INT32_MAX,
    "checkpoint_every": INT32_MAX,
    "iterations_per_call": INT32_MAX,
}

#: Derived counts and their bounds: (name in messages, the property, bound).
DERIVED_BOUNDS = (
    ("num_envs * num_steps", "rollout_size", INT32_MAX),
    ("total_timesteps / (num_envs * num_steps)", "num_iterations", INT32_MAX),
)


def check_bounds(c: ConfigFields) -> None:
    """Every integer field within `INT_BOUNDS`, and the derived counts within `DERIVED_BOUNDS`."""
    for name, bound in INT_BOUNDS.items():
        value = getattr(c, name)
        if value is not None:
            check(value <= bound, name, f"an integer <= {bound:,}", value)
    for name, attribute, bound in DERIVED_BOUNDS:
        check(getattr(c, attribute) <= bound, name, f"at most {bound:,}", getattr(c, attribute))


def check(ok: bool, name: str, expected: str, got: Any) -> None:
    if not ok:
        raise ValueError(f"{name}: expected {expected}, got {got!r}")


def validate(c: ConfigFields) -> None:
    for name in (
        "num_envs",
        "num_steps",
        "num_epochs",
        "num_minibatches",
        "num_hidden_units",
        "num_eval_envs",
        "eval_freq",
        "iterations_per_call",
        "frame_stack",
    ):
        check(getattr(c, name) >= 1, name, "an integer >= 1", getattr(c, name))
    check(c.distribute in DISTRIBUTE, "distribute", f"one of {DISTRIBUTE}", c.distribute)
    check(c.checkpoint_every >= 0, "checkpoint_every", "an integer >= 0", c.checkpoint_every)
    check(c.num_hidden_layers >= 0, "num_hidden_layers", "an integer >= 0", c.num_hidden_layers)
    check(c.learning_rate > 0, "learning_rate", "a positive number", c.learning_rate)
    for name in SCHEDULED.values():
        check(getattr(c, name) in SCHEDULES, name, f"one of {tuple(SCHEDULES)}", getattr(c, name))
    check(0 <= c.gamma <= 1, "gamma", "a number in [0, 1]", c.gamma)
    check(c.norm_gamma is None or 0 <= c.norm_gamma <= 1, "norm_gamma", "null or a number in [0, 1]", c.norm_gamma)
    check(0 <= c.gae_lambda <= 1, "gae_lambda", "a number in [0, 1]", c.gae_lambda)
    check(c.clip_range > 0, "clip_range", "a positive number", c.clip_range)
    for name in ("clip_obs", "clip_reward", "norm_epsilon"):
        check(getattr(c, name) > 0, name, "a positive number", getattr(c, name))
    if c.clip_range_vf is not None:
        check(c.clip_range_vf > 0, "clip_range_vf", "a positive number or None", c.clip_range_vf)
    check(c.env_backend in ENV_BACKENDS, "env_backend", f"one of {ENV_BACKENDS}", c.env_backend)
    check(c.vectorization in VECTORIZATIONS, "vectorization", f"one of {VECTORIZATIONS}", c.vectorization)
    check(c.vf_clip_mode in VF_CLIP_MODES, "vf_clip_mode", f"one of {VF_CLIP_MODES}", c.vf_clip_mode)
    if c.target_kl is not None:
        check(c.target_kl > 0, "target_kl", "a positive number or None", c.target_kl)
    for name in ("ent_coef", "vf_coef"):
        check(getattr(c, name) >= 0, name, "a number >= 0", getattr(c, name))
    check(c.max_grad_norm > 0, "max_grad_norm", "a positive number", c.max_grad_norm)
    check(c.activation in ACTIVATIONS, "activation", f"one of {ACTIVATIONS}", c.activation)
    check(c.kernel_init in KERNEL_INITS, "kernel_init", f"one of {KERNEL_INITS}", c.kernel_init)
    check(c.bias_init in BIAS_INITS, "bias_init", f"one of {BIAS_INITS}", c.bias_init)
    check(c.adam_style in ADAM_STYLES, "adam_style", f"one of {ADAM_STYLES}", c.adam_style)
    check(c.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", c.optimizer)
    check(c.optimizer_eps >= 0, "optimizer_eps", "a number >= 0", c.optimizer_eps)
    for name in ("adam_beta_1", "adam_beta_2"):
        check(0 <= getattr(c, name) < 1, name, "a number in [0, 1)", getattr(c, name))
    check(0 <= c.sgd_dampening <= 1, "sgd_dampening", "a number in [0, 1]", c.sgd_dampening)
    check(0 <= c.rmsprop_alpha <= 1, "rmsprop_alpha", "a number in [0, 1]", c.rmsprop_alpha)
    check(c.optimizer_momentum >= 0, "optimizer_momentum", "a number >= 0", c.optimizer_momentum)
    check(c.weight_decay >= 0, "weight_decay", "a number >= 0", c.weight_decay)
    check(
        c.weight_decay == 0 or c.optimizer != "adam" or c.adam_style == "torch",
        "weight_decay",
        "0 with adam_style 'keras' (torch's L2 term is built for adam_style 'torch')",
        c.weight_decay,
    )
    check(
        not c.sgd_nesterov or (c.optimizer_momentum > 0 and c.sgd_dampening == 0),
        "sgd_nesterov",
        "False unless optimizer_momentum > 0 and sgd_dampening == 0 (as torch.optim.SGD)",
        c.sgd_nesterov,
    )
    check(c.advantage_std_ddof in (0, 1), "advantage_std_ddof", "0 or 1", c.advantage_std_ddof)
    check(c.verbose in (0, 1, 2), "verbose", "0, 1 or 2", c.verbose)
    check(c.seed >= 0, "seed", "an integer >= 0", c.seed)
    check(
        c.sde_sample_freq == -1 or c.sde_sample_freq >= 1, "sde_sample_freq", "-1 or an integer >= 1", c.sde_sample_freq
    )
    check(
        c.rollout_size > 1 or not c.normalize_advantage,
        "num_envs * num_steps",
        "more than 1 with normalize_advantage=True (advantage normalization)",
        c.rollout_size,
    )
    check(
        c.rollout_size % c.num_minibatches == 0,
        "num_minibatches",
        f"a divisor of num_envs * num_steps = {c.rollout_size}",
        c.num_minibatches,
    )
    check(
        c.box_actions in ("rescale", "clip") and not (c.squash and c.box_actions == "clip"),
        "box_actions",
        "'rescale' or 'clip' ('rescale' with squash: tanh, then [low, high])",
        c.box_actions,
    )
    check(c.recurrent in (None, "lstm"), "recurrent", "null or 'lstm'", c.recurrent)
    check(
        c.features_extractor in FEATURES_EXTRACTORS,
        "features_extractor",
        f"one of {FEATURES_EXTRACTORS}",
        c.features_extractor,
    )
    check(c.features_dim is None or c.features_dim >= 1, "features_dim", "null or an integer >= 1", c.features_dim)
    check(
        c.recurrent is None or c.features_extractor == "flatten" or c.share_features_extractor or not c.shared_lstm,
        "share_features_extractor",
        "True with shared_lstm=True (a shared LSTM reads one features extractor)",
        c.share_features_extractor,
    )
    check(c.lstm_hidden_size >= 1, "lstm_hidden_size", "an integer >= 1", c.lstm_hidden_size)
    check(c.n_lstm_layers >= 1, "n_lstm_layers", "an integer >= 1", c.n_lstm_layers)
    check(
        c.lstm_sequence_length >= 0 and (c.lstm_sequence_length == 0 or c.num_steps % c.lstm_sequence_length == 0),
        "lstm_sequence_length",
        f"0 or a divisor of num_steps = {c.num_steps}",
        c.lstm_sequence_length,
    )
    if c.recurrent is not None:
        check(c.lstm_batching in ("sequences", "rotated"), "lstm_batching", "'sequences' or 'rotated'", c.lstm_batching)
        check(
            not (c.shared_lstm and c.enable_critic_lstm),
            "shared_lstm",
            "False with enable_critic_lstm=True (the critic's LSTM is shared, its own, or none: sb3-contrib asserts)",
            c.shared_lstm,
        )
        check(
            c.lstm_batching == "sequences" or c.lstm_sequence_length == 0,
            "lstm_sequence_length",
            "0 with lstm_batching='rotated' (its windows are num_envs * num_steps / num_minibatches steps)",
            c.lstm_sequence_length,
        )
        sequences = c.num_envs * (c.num_steps // (c.lstm_sequence_length or c.num_steps))
        check(
            c.lstm_batching == "rotated" or sequences % c.num_minibatches == 0,
            "num_minibatches",
            f"a divisor of the {sequences} sequences (num_envs x num_steps / lstm_sequence_length; recurrent "
            f"minibatches are whole sequences)",
            c.num_minibatches,
        )
    check(
        c.total_timesteps >= c.rollout_size,
        "total_timesteps",
        f"at least one rollout (num_envs * num_steps = {c.rollout_size})",
        c.total_timesteps,
    )
    check_bounds(c)
