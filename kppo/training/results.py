"""What `kppo.train` returns (`PPOResult`, `PopulationResult`: the trained agent, its statistics and metric columns)
and what callbacks see as `self.model` while it runs (`TrainingModel`); a population's members."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from kppo.agent import checkpoint
from kppo.agent.agent import Agent, make_policy
from kppo.agent.policy import ObsScaling, Policy
from kppo.config.options import Config, Sweep
from kppo.core.types import RunnerState
from kppo.training.runners.settings import agent_spec
from kppo.training.runners import Runner


@dataclasses.dataclass
class PPOResult:
    """What `train` returns (rex's PPOResult).

    Attributes:
        config: the Config the run used.
        runner_state: env state, last observations, normalization statistics, RNG key, iteration counter.
        metrics: one row per evaluation round: name -> numpy array [eval_rounds] (see `METRICS`).
        agent: actor, critic, optimizer and distribution (what a checkpoint saves).
        observation_space, action_space: of one env.
        timings: compile_s (first compiled calls), run_s (the rest), total_s (both, excluding setup).
        interrupted: True when `should_stop` ended the run early.
        stopped: True when a callback returned False.
    """

    config: Config
    runner_state: RunnerState
    metrics: dict[str, np.ndarray]
    agent: Agent
    observation_space: gym.spaces.Space
    action_space: gym.spaces.Space
    timings: dict[str, float]
    interrupted: bool = False
    stopped: bool = False

    @property
    def obs_scaling(self) -> ObsScaling:
        return self.policy.obs_scaling

    @functools.cached_property
    def policy(self) -> Policy:
        """The trained policy with the final statistics; SB3's `predict` makes it usable by `evaluate_policy`."""
        return make_policy(
            self.agent,
            self.runner_state.rollout.obs_stats,
            agent_spec(self.config),
            self.observation_space,
            self.action_space,
        )

    @property
    def act_scaling(self):
        return self.policy.act_scaling


@dataclasses.dataclass
class PopulationResult:
    """What `train` returns for several seeds or a `Config.sweep`: one `PPOResult` per member, in member order
    (grid points in order, seeds fastest).

    Attributes:
        members: each member's result (its config, final runner state, metrics, agent: policy and export as usual).
        metrics: one row per evaluation round: name -> array [eval_rounds, members] (shared counters: [eval_rounds];
            `time/steps_per_s` counts one member's steps).
        timings, interrupted: of the whole program.
    """

    members: list[PPOResult]
    metrics: dict[str, np.ndarray]
    timings: dict[str, float]
    interrupted: bool = False

    @property
    def configs(self) -> list[Config]:
        return [member.config for member in self.members]

    @property
    def summary(self) -> dict[str, dict[str, np.ndarray]]:
        """Per metric with a value per member: its mean, std and min over the members, per round."""
        return {
            name: {"mean": values.mean(axis=1), "std": values.std(axis=1), "min": values.min(axis=1)}
            for name, values in self.metrics.items()
            if values.ndim == 2
        }


class TrainingModel:
    """What callbacks see as `self.model` during `kppo.train`: `num_timesteps`, `predict` (the current policy),
    `save` (an agent directory), `get_env` and `logger` (None)."""

    def __init__(self, runner: Runner, config: Config):
        self.runner, self.config = runner, config
        self.runner_state = runner.state
        self.num_timesteps = int(runner.view(runner.state).iteration) * config.rollout_size
        self.logger = None
        self._policy: Policy | None = None
        self._policy_state: Any = None  # the runner state `_policy` was made from

    @property
    def policy(self) -> Policy:
        """The current policy: made once per runner state (the weights and statistics change only between runner
        calls, when `runner_state` is set), so `predict` in a callback costs a numpy forward pass, not a snapshot of
        the weights. Stochastic `predict` calls draw from the keys [config.seed, n], n counting on across states."""
        if self._policy is None or self._policy_state is not self.runner_state:
            stats = self.runner.view(self.runner_state).rollout.obs_stats
            policy = make_policy(
                self.runner.agent,
                stats,
                agent_spec(self.config),
                self.runner.observation_space,
                self.runner.action_space,
            )
            if self._policy is not None:  # the rebuilt policy keeps counting its predict calls
                policy.keys = self._policy.keys
            policy.seed = self.config.seed
            self._policy, self._policy_state = policy, self.runner_state
        return self._policy

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
        action_masks: Any = None,
    ):
        return self.policy.predict(observation, state, episode_start, deterministic, action_masks)

    def save(self, path: str | Path) -> None:
        stats = self.runner.view(self.runner_state).rollout
        checkpoint.save(
            path,
            self.config.to_yaml(),
            self.runner.agent,
            stats.obs_stats,
            stats.return_stats,
            self.runner.observation_space,
            self.runner.action_space,
        )

    def get_env(self) -> Any:
        """The gymnasium vector env of a gymnasium run; the `kppo.envs.VecEnv` of a TF-native one."""
        return getattr(self.runner.env, "vec_env", self.runner.env)


def metric_columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """Metric rows -> name: array over rounds (a population's per-member metrics: [rounds, members])."""
    return {name: np.asarray([row[name] for row in rows]) for name in rows[0]} if rows else {}


def population_members(config: Config | Sweep | list[Config] | None, seed: Any) -> list[Config]:
    """The members' configs: every point of a sweep (or the config) with every seed (`seed`: an int or a list); a
    list of Configs is the members as they are."""
    if isinstance(config, (list, tuple)):
        if seed is not None:
            raise ValueError(f"seed: expected None with a list of member configs (each has its seed), got {seed!r}")
        if not config or not all(isinstance(c, Config) for c in config):
            raise TypeError(f"config: expected a non-empty list of kppo.Config, got {config!r}")
        return list(config)
    sweep = config if isinstance(config, Sweep) else Sweep(Config() if config is None else config, {})
    seeds = [sweep.config.seed] if seed is None else [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    if not seeds:
        raise ValueError(f"seed: expected at least one seed, got {seed!r}")
    return sweep.members([int(s) for s in seeds])


def is_population(config: Any, seed: Any) -> bool:
    return isinstance(config, (Sweep, list, tuple)) or isinstance(seed, (list, tuple, range, np.ndarray))
