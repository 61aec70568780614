"""A Config resolved into what the layers below training read, in one place: the agent's spec (`agent_spec`), the
rollout's and the update's settings, the schedules, the normalization constants; and what every runner builds the same
way from it: the batch the update reads, the root keys of a seed, and whether the update is XLA-compiled
(`jit_update`, a measured rule)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kppo._tf import tf
from kppo.agent.spec import AgentSpec
from kppo.config.options import Config
from kppo.config.schedules import SCHEDULED
from kppo.core import normalization
from kppo.core import counter_rng
from kppo.core.optimizers import OptimizerSpec
from kppo.core.types import Batch, Rollout
from kppo.rollout.native import RolloutSettings
from kppo.update.ppo import UpdateSettings, flatten
from kppo.update.schedules import ScheduleSpec


def optimizer_spec(config: Config) -> OptimizerSpec:
    """The optimizer fields of `config` (`kppo.core.optimizers.OptimizerSpec`)."""
    return OptimizerSpec(
        config.optimizer,
        config.optimizer_eps,
        config.adam_beta_1,
        config.adam_beta_2,
        config.rmsprop_alpha,
        config.optimizer_momentum,
        config.rmsprop_centered,
        config.sgd_dampening,
        config.sgd_nesterov,
        config.weight_decay,
    )


#: The AgentSpec fields read from the Config option of the same name (all but the optimizer's, gathered above).
_SAME_NAME = tuple(f.name for f in dataclasses.fields(AgentSpec) if f.name != "optimizer")


def agent_spec(config: Config) -> AgentSpec:
    """What building `config`'s agent reads of it."""
    return AgentSpec(**{name: getattr(config, name) for name in _SAME_NAME}, optimizer=optimizer_spec(config))


def norm_constants(config: Config) -> normalization.Constants:
    """A Config's VecNormalize constants: `clip_obs`, `clip_reward`, `norm_epsilon` and `norm_gamma`."""
    gamma = None if config.norm_gamma is None else float(config.norm_gamma)
    return normalization.Constants(float(config.clip_obs), float(config.clip_reward), float(config.norm_epsilon), gamma)


def rollout_settings(config: Config) -> RolloutSettings:
    return RolloutSettings(
        config.num_steps,
        config.gamma,
        config.gae_lambda,
        config.normalize_obs,
        config.normalize_reward,
        config.sde_sample_freq,
        config.action_masks,
        norm=norm_constants(config),
    )


def schedule_spec(config: Config) -> ScheduleSpec:
    """What the schedules read of `config` (`kppo.update.schedules`): the scheduled values, their schedules, the run's
    iterations and the value clipping range."""
    return ScheduleSpec(
        {name: getattr(config, name) for name in SCHEDULED},
        {name: getattr(config, field) for name, field in SCHEDULED.items()},
        config.num_iterations,
        config.clip_range_vf,
    )


def update_batch(config: Config, rollout: Rollout) -> Batch:
    """The rollout as `config`'s update reads it (`update.flatten`; a recurrent agent's sequences, chunks or rows)."""
    return flatten(rollout, config.lstm_sequence_length, config.lstm_batching == "rotated")


def update_settings(config: Config) -> UpdateSettings:
    """The update's settings (the scheduled ones are replaced by each iteration's `Schedules`)."""
    return UpdateSettings(
        config.num_epochs,
        config.num_minibatches,
        config.clip_range,
        config.clip_range_vf,
        config.vf_clip_mode,
        config.ent_coef,
        config.vf_coef,
        config.max_grad_norm,
        config.normalize_advantage,
        config.target_kl,
        config.advantage_std_ddof,
        config.num_steps if config.lstm_batching == "rotated" else 0,
    )


def root_keys(seed: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(reset, train, eval) keys derived from the seed."""
    return tuple(tf.unstack(counter_rng.split(tf.constant([seed, 0], tf.int32), 3)))


#: Gradient steps per iteration from which the host path compiles the update with XLA when `Config.jit_update` is None:
#: from there a gradient step is faster under XLA and the longer compilation pays off (benchmarks/host_breakdown.py).
#: On the TF-native path the update runs inside the compiled loop, where an XLA call is slower. Never for a CNN: XLA's
#: CPU kernels for convolution filter gradients are far slower (benchmarks/cnn_speed.py). The figures:
#: docs/benchmarks/speed.md, "Measurements behind the defaults".
XLA_UPDATE_MIN_GRADIENT_STEPS = 64


def jit_update(config: Config, on_host: bool) -> bool:
    """Whether the update is XLA-compiled: `config.jit_update`, or when None, by the rule above."""
    if config.jit_update is not None:
        return config.jit_update
    convolutional = config.features_extractor != "flatten"  # XLA's CPU conv filter gradients are slow
    steps = config.num_epochs * config.num_minibatches
    return on_host and not convolutional and steps >= XLA_UPDATE_MIN_GRADIENT_STEPS


def population_jit(config: Config) -> bool:
    """Whether a population's program (every member's iteration under `tf.vectorized_map`) is XLA-compiled:
    `config.jit_rollout`, except for recurrent members (vectorizing the gradient of the LSTM replay's loop makes pfor
    keep its intermediates in TensorLists of variants, which XLA's CPU compiler has no kernel for:
    `TensorListReserve ... element_dtype=DT_VARIANT`) and convolutional ones (XLA's CPU kernels for the vectorized
    per-member convolutions are slower: benchmarks/cnn_population.py, docs/benchmarks/populations.md)."""
    return config.jit_rollout and config.recurrent is None and config.features_extractor == "flatten"


def maybe_compile(fn: Callable, jit: bool) -> Callable:
    """XLA-compiled tf.function when `jit`, else the plain function (inlined into the caller's graph)."""
    return tf.function(fn, jit_compile=True, autograph=False) if jit else fn
