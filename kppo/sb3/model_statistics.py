"""`ModelStatistics`: the normalization statistics a Stable-Baselines3 model holds (a `BaseAlgorithm` mixin).

SB3 keeps them in its `VecNormalize` wrapper only; kppo bakes them into the policy, so a model carries them itself:
those its runner updates, those it will start from, or those a load read, and `use_vec_normalize` freezes a
wrapper's into a model without an env. A `VecNormalize` the model trains on reads and writes these
(`kppo.sb3.vec_normalize`): one set of statistics for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kppo.agent.policy import Policy
from kppo.config.options import Config
from kppo.core.types import Moments
from kppo.gym_envs.spaces import flat_dim
from kppo.sb3.vec_normalize import VecNormalize, frozen_statistics
from kppo.training.runners import Runner, Start

__all__ = ["ModelStatistics", "Stats"]

Stats = tuple[Moments, Moments]  # (observation statistics, return statistics)


class ModelStatistics:
    """The statistics of a model: running (`_runner`), pending (`_pending`, before the first `learn`) or loaded."""

    agent: Any
    config: Config | None
    runner_state: Any
    _runner: Runner | None
    _pending: Start | None
    _loaded_stats: Stats | None
    _gym_env: Any
    _policy: Policy | None
    _model_spaces: Any

    def statistics(self) -> Stats | None:
        """(observation statistics, return statistics) of the running or loaded model (None before it has networks):
        those `learn` updates, those it will start from (a model with an env before its first `learn`), or those a
        load read."""
        if self._runner is not None:
            return self.runner_state.rollout.obs_stats, self.runner_state.rollout.return_stats
        if self._pending is not None:
            assert self._pending.obs_stats is not None and self._pending.return_stats is not None  # set by _build
            return self._pending.obs_stats, self._pending.return_stats
        return self._loaded_stats

    def _set_statistics(self, obs_stats: Moments, return_stats: Moments) -> None:
        """Replaces the statistics `statistics()` returns (a `VecNormalize` the model uses updates them through its
        own resets and steps: one set of statistics for both)."""
        if self._runner is not None:
            rollout = self.runner_state.rollout._replace(obs_stats=obs_stats, return_stats=return_stats)
            self.runner_state = self.runner_state._replace(rollout=rollout)
            self._runner = self._runner.with_state(self.runner_state)
        elif self._pending is not None:
            self._pending = self._pending._replace(obs_stats=obs_stats, return_stats=return_stats)
        else:
            self._loaded_stats = (obs_stats, return_stats)
        self._policy = None

    def _statistics(self) -> Stats:
        """`statistics()` of a model with networks (running or loaded)."""
        stats = self.statistics()
        assert stats is not None, "the model has no networks yet"
        return stats

    def use_vec_normalize(self, vec_normalize: VecNormalize | str | Path) -> None:
        """kppo: freezes a VecNormalize's observation statistics into this model's policy without an env (what
        `kppo export model.zip --vecnormalize vec_normalize.pkl` does): a wrapper `VecNormalize.load` returned, or
        the file itself (kppo's JSON or SB3's `vec_normalize.pkl`, read as data). `predict` and `kppo.export` then
        take raw observations. A model with an env takes `VecNormalize.load(path, venv)` as its env instead."""
        if self._gym_env is not None:
            raise ValueError(
                "vec_normalize: expected a model without an env (this one has one: pass VecNormalize.load(path, "
                "venv) to set_env instead)"
            )
        if self.agent is None or self.config is None:
            raise ValueError("vec_normalize: the model has no networks yet; load() it first")
        fields, obs_stats, ret_stats = frozen_statistics(vec_normalize, flat_dim(self._model_spaces()[0]))
        self.config = self.config.replace(**fields)
        old_obs, old_returns = self._statistics()
        self._loaded_stats = (
            old_obs if obs_stats is None else obs_stats,
            old_returns if ret_stats is None else ret_stats,
        )
        self._policy = None
