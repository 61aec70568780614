"""The runner interface, and what every runner builds the same way from a Config: rollout and update settings, root
keys. The training iteration every runner runs is `kppo.update.ppo.iteration_step`, its schedules
`kppo.update.schedules`.

A runner owns an environment kind (TF-native stepped in compiled code, gymnasium stepped on the host, either one
replicated under tf.distribute) and exposes `run_iterations(state, n, on_step) -> Iterations` and
`evaluation_round(obs_stats, round, total_steps, diagnostics)`; the loop (`kppo.training.train.run_loop`) only sees this
interface.
"""

from __future__ import annotations

import copy
from typing import Any
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.agent import Agent
from kppo.config.options import Config
from kppo.rollout.gymnasium import StepHook
from kppo.rollout.native import RolloutSettings
from kppo.core.types import Batch, Diagnostics, EvalTrajectory, Rollout, RunnerState
from kppo.update.ppo import Iterations, UpdateSettings, flatten
from kppo.update.schedules import ScheduleFn, is_constant

EvalMetricsFn = Callable[[tf.Tensor, Diagnostics, EvalTrajectory], dict]


class Runner:
    """Everything the loop needs for one kind of environment: the agent, the runner state, the spaces and the training
    env, and the methods below. Subclasses: `native.NativeRunner` (TF-native envs on one device),
    `replicated.ReplicatedRunner` (the same under a tf.distribute strategy), `host.HostRunner` (gymnasium envs),
    `population.PopulationRunner` (members stacked on an axis)."""

    #: run_iterations calls the step hook after every vector-env step (gymnasium envs stepped on the host)
    steps_on_host: bool = False
    #: the tf.distribute strategy the state is distributed over, or None
    strategy: Any = None
    #: `iteration -> Schedules`, what every iteration's update reads; `schedules_from_config`: it is the Config's own
    config: Config
    schedule_fn: ScheduleFn
    schedules_from_config: bool = True

    def __init__(
        self, agent: Agent, state: Any, observation_space: gym.spaces.Space, action_space: gym.spaces.Space, env: Any
    ):
        self.agent = agent
        self.state = state  # RunnerState (per-replica values under a strategy, stacked members in a population)
        self.observation_space, self.action_space = observation_space, action_space
        self.env = env  # the training env: a kppo.envs.VecEnv or a kppo.gym_envs.vector.GymVecEnv

    def run_iterations(self, state: Any, n: int, on_step: StepHook | None = None) -> Iterations:
        """n training iterations from `state` (`iteration_step` each)."""
        raise NotImplementedError

    def evaluation_round(
        self, obs_stats: Any, round_index: int, total_steps: int, diag: Diagnostics
    ) -> tuple[Any, dict]:
        """One deterministic evaluation round: (EvalResult, extra metrics)."""
        raise NotImplementedError

    def warmup(self) -> None:
        """Compiles the evaluation early (the loop runs it in a background thread while training compiles)."""

    def close(self) -> None:
        """Closes the envs the runner made."""

    def schedule_value(self, name: str, state: Any) -> Any:
        """The last iteration's scheduled `name` (a `Schedules` field), as reported (`train/learning_rate`,
        `train/clip_range`): the Config's number itself while its schedule is constant and the Config schedules the
        run, else `schedule_fn` at the state's last iteration (a population: per member)."""
        if self.schedules_from_config and is_constant(self.config, name):
            return getattr(self.config, name)
        value = np.asarray(getattr(self.schedule_fn(last_iteration(self.view(state))), name))
        return float(value) if value.ndim == 0 else value

    def clip_range(self, state: Any) -> Any:
        """The last iteration's clip range (a population: per member)."""
        return self.schedule_value("clip_range", state)

    def view(self, state: Any) -> RunnerState:
        """One replica's (or member's) runner state: what metrics, evaluation and checkpoints read."""
        return state

    def learning_rate(self, state: Any) -> Any:
        """The last iteration's learning rate (a population: per member)."""
        return self.schedule_value("learning_rate", state)

    def with_state(self, state: Any) -> Runner:
        """The same runner starting from `state` (a resume, or SB3's `learn` continuing)."""
        runner = copy.copy(self)
        runner.state = state
        return runner


def last_iteration(state: RunnerState) -> tf.Tensor:
    """The index of the state's last completed iteration (0 before the first)."""
    return tf.maximum(state.iteration - 1, 0)


def rollout_settings(config: Config) -> RolloutSettings:
    return RolloutSettings(
        config.num_steps,
        config.gamma,
        config.gae_lambda,
        config.normalize_obs,
        config.normalize_reward,
        config.sde_sample_freq,
        config.action_masks,
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
    return tuple(tf.unstack(tf.random.experimental.stateless_split(tf.constant([seed, 0], tf.int32), 3)))


#: Gradient steps per iteration from which the host path compiles the update with XLA when `Config.jit_update` is None:
#: per gradient step XLA measured 79 vs 216 us (Pendulum, batch 64) and 485 vs 549 us (HalfCheetah, 2x256), no slower at
#: batch 512 (CartPole), for ~0.8 s more compilation (benchmarks/host_breakdown.py). On the TF-native path the update
#: runs inside the compiled loop, where an XLA call measured slower (README, XLA flags). Never for a CNN: XLA's CPU
#: kernels for convolution filter gradients made a NatureCNN update 15 s a gradient step against 0.2 s without XLA
#: (Pong, 8 envs; benchmarks/cnn_speed.py, 2026-12-01).
XLA_UPDATE_MIN_GRADIENT_STEPS = 64


def jit_update(config: Config, on_host: bool) -> bool:
    """Whether the update is XLA-compiled: `config.jit_update`, or when None, by the measured rule above."""
    if config.jit_update is not None:
        return config.jit_update
    convolutional = config.features_extractor != "flatten"  # XLA's CPU conv filter gradients: ~100x slower
    steps = config.num_epochs * config.num_minibatches
    return on_host and not convolutional and steps >= XLA_UPDATE_MIN_GRADIENT_STEPS


def maybe_compile(fn: Callable, jit: bool) -> Callable:
    """XLA-compiled tf.function when `jit`, else the plain function (inlined into the caller's graph)."""
    return tf.function(fn, jit_compile=True, autograph=False) if jit else fn
