"""A Config resolved, in one place, into the read-only form the runners read (`RunSpec`, made by `resolve`): what the
layers below training take (the agent's spec, the rollout's and the update's settings, the schedules, the
normalization constants) and what the runners decide from (the envs, the seed, the devices, which programs XLA
compiles, every default applied); and what every runner builds the same way from it: the batch the update reads and
the root keys of a seed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kppo._tf import tf
from kppo.agent.spec import AgentSpec
from kppo.config.options import Config
from kppo.config.population import SWEEPABLE
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


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A Config resolved for the runners, once (`resolve`), with every default applied: what the layers below read
    (`agent`, `rollout`, `update`, `schedule`) and what a runner decides from. No runner reads a Config field."""

    env: str  # the env a run is given none of
    seed: int
    num_envs: int
    num_eval_envs: int
    agent: AgentSpec
    rollout: RolloutSettings
    update: UpdateSettings
    schedule: ScheduleSpec
    sequence_length: int  # a recurrent update's sequences: steps each (the rollout's num_steps when unset)
    rotated: bool  # a recurrent update's batches are sb3-contrib's rotated windows of rows
    recurrent: bool
    adam_style: str
    sweep_values: tuple  # the `SWEEPABLE` fields' values, in that order (a population member's own)
    # the envs
    vectorization: str
    verbose: int
    fixed_init: bool
    offset_step: bool
    normalize_obs_keys: tuple[str, ...] | None
    env_backend: str
    atari_wrapper: bool
    frame_stack: int
    # the devices and the compilation
    distribute: str
    devices: tuple[str, ...] | None
    jit_rollout: bool
    jit_eval: bool  # a single run's evaluation round under XLA (`Config.jit_eval` None: not)
    jit_population_eval: bool  # a population's (None: under XLA, measured)
    jit_native_update: bool  # `jit_update(config, on_host=False)`
    jit_host_update: bool  # `jit_update(config, on_host=True)`
    jit_population: bool  # `population_jit(config)`
    fields: tuple  # every Config field as (name, repr(value)), sorted: what kept programs are keyed by

    @property
    def update_rows_per_env(self) -> int:
        """The rows each env adds to the update's batch: its steps, or for a recurrent agent's sequences, its
        sequences."""
        steps = self.rollout.num_steps
        return steps // self.sequence_length if self.recurrent and not self.rotated else steps


def resolve(config: Config) -> RunSpec:
    """`config` as the runners read it (`RunSpec`)."""
    return RunSpec(
        env=config.env,
        seed=config.seed,
        num_envs=config.num_envs,
        num_eval_envs=config.num_eval_envs,
        agent=agent_spec(config),
        rollout=rollout_settings(config),
        update=update_settings(config),
        schedule=schedule_spec(config),
        sequence_length=config.lstm_sequence_length or config.num_steps,
        rotated=config.lstm_batching == "rotated",
        recurrent=config.recurrent is not None,
        adam_style=config.adam_style,
        sweep_values=tuple(getattr(config, name) for name in SWEEPABLE),
        vectorization=config.vectorization,
        verbose=config.verbose,
        fixed_init=config.fixed_init,
        offset_step=config.offset_step,
        normalize_obs_keys=config.normalize_obs_keys,
        env_backend=config.env_backend,
        atari_wrapper=config.atari_wrapper,
        frame_stack=config.frame_stack,
        distribute=config.distribute,
        devices=config.devices,
        jit_rollout=config.jit_rollout,
        jit_eval=bool(config.jit_eval),
        jit_population_eval=config.jit_eval is not False,
        jit_native_update=jit_update(config, on_host=False),
        jit_host_update=jit_update(config, on_host=True),
        jit_population=population_jit(config),
        fields=tuple(sorted((k, repr(v)) for k, v in config.to_dict().items())),
    )


def update_batch(spec: RunSpec, rollout: Rollout) -> Batch:
    """The rollout as the update reads it (`update.flatten`; a recurrent agent's sequences, chunks or rows)."""
    return flatten(rollout, spec.sequence_length, spec.rotated)
