"""The runner interface (`Runner`); what every runner reads of a Config, resolved once, and builds the same way from
it (rollout and update settings, root keys, which programs XLA compiles) is `settings`. The training iteration every
runner runs is `kppo.update.iteration.make_iteration`, its schedules `kppo.update.schedules`.

A runner owns an environment kind (TF-native stepped in compiled code, gymnasium stepped on the host, either one
replicated under tf.distribute, or a population of members) and exposes `run_iterations(state, n, on_step) ->
Iterations` and `evaluation_round(obs_stats, round, total_steps, diagnostics)` (written once, here: a runner supplies
only how its episodes run, `evaluation_episodes`); the loop (`kppo.training.loop.run_loop`) only sees this interface.
"""

from __future__ import annotations

import copy
from typing import Any
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.agent import Agent
from kppo.rollout.gymnasium import StepHook
from kppo.core.types import Diagnostics, EvalResult, EvalTrajectory, RunnerState
from kppo.update.driver import Iterations
from kppo.update.schedules import ScheduleFn, is_constant
from kppo.training.runners.settings import RunSpec

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
    #: the run's resolved Config; `iteration -> Schedules`, what every iteration's update reads;
    #: `schedules_from_config`: it is the Config's own
    spec: RunSpec
    schedule_fn: ScheduleFn
    schedules_from_config: bool = True
    #: `(total_steps, diagnostics, eval trajectory) -> dict of tensors`, the caller's extra metrics of a round
    eval_metrics_fn: EvalMetricsFn | None = None

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
        """One deterministic evaluation round, every runner's: (EvalResult, the extra metrics `eval_metrics_fn`
        computes from the round's trajectory)."""
        result, trajectory = self.evaluation_episodes(obs_stats, round_index)
        if self.eval_metrics_fn is None:
            return result, {}
        return result, self.eval_metrics_fn(tf.constant(total_steps, tf.int64), diag, trajectory)

    def evaluation_episodes(self, obs_stats: Any, round_index: int) -> tuple[EvalResult, Any]:
        """Round `round_index`'s deterministic episodes on `obs_stats`: (EvalResult, EvalTrajectory or None)."""
        raise NotImplementedError

    def warmup(self) -> None:
        """Compiles the evaluation early (the loop runs it in a background thread while training compiles)."""

    def trace(self) -> None:
        """Traces the programs of the first training call and of `warmup` now, in the calling thread, before the
        warm-up thread starts. TensorFlow names the functions a trace builds from one process-wide counter, which
        every thread's ops advance; two traces at once would name them in whatever order the threads ran, and XLA's
        persistent compile cache, keyed by the compiled program's names, would miss in every new process."""

    def close(self) -> None:
        """Closes the envs the runner made."""

    def schedule_value(self, name: str, state: Any) -> Any:
        """The last iteration's scheduled `name` (a `Schedules` field), as reported (`train/learning_rate`,
        `train/clip_range`): the Config's number itself while its schedule is constant and the Config schedules the
        run, else `schedule_fn` at the state's last iteration (a population: per member)."""
        if self.schedules_from_config and is_constant(self.spec.schedule, name):
            return self.spec.schedule.bases[name]
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

    def member_state(self, state: Any, index: int) -> RunnerState:
        """A population's member `index`'s runner state (populations only)."""
        raise NotImplementedError(f"{type(self).__name__} runs no population")

    def with_state(self, state: Any) -> Runner:
        """The same runner starting from `state` (a resume, or SB3's `learn` continuing)."""
        runner = copy.copy(self)
        runner.state = state
        return runner


def last_iteration(state: RunnerState) -> tf.Tensor:
    """The index of the state's last completed iteration (0 before the first)."""
    return tf.maximum(state.iteration - 1, 0)
