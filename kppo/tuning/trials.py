"""Where Optuna's ask/tell meets the compiled population: a group of asked trials (with every seed of each) trains as
one `kppo.train` population, each evaluation round is reported to each trial (the mean over its seeds), the pruner is
asked after every round, and each trial is told its value when the run ends.

A pruned trial is told at once (other processes see it), and its members stop counting; they keep stepping inside
the compiled program, whose member count is a shape: refilling a slot with a new trial would recompile it and give
the newcomer fewer steps than its peers. A group whose trials are all pruned stops early.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np

from kppo.config.options import Config
from kppo.core.errors import reason
from kppo.tuning.storage import CUT
from kppo.training.runners.population import shape_key
from kppo.training.train import train

__all__ = ["Pending", "group_by_shape", "run_group"]


@dataclass
class Pending:
    """An asked trial, its parameters and config, and what its evaluation rounds gave so far."""

    trial: Any
    params: dict[str, Any]
    config: Config
    members: list[int] = field(default_factory=list)  # its columns in the population
    history: list[float] = field(default_factory=list)
    done: bool = False


def group_by_shape(pending: list[Pending]) -> list[list[Pending]]:
    """The trials grouped by `shape_key`, in asking order."""
    groups: dict[tuple, list[Pending]] = {}
    for item in pending:
        groups.setdefault(shape_key(item.config), []).append(item)
    return list(groups.values())


def _objective(history: list[float], rounds: int) -> float:
    """The mean of the last `rounds` evaluation rounds (RL-Zoo's objective is the last one)."""
    return float(np.mean(history[-rounds:]))


class _Reporter:
    """Each round's returns to each live trial: report, ask the pruner, tell the pruned."""

    def __init__(self, study: Any, pending: list[Pending], log: Callable[[Pending, str], None]):
        self.study, self.pending, self.log = study, pending, log

    def on_eval(self, row: dict) -> None:
        import optuna

        returns = np.atleast_1d(np.asarray(row["eval/mean_returns"], np.float64))
        for item in self.pending:
            if item.done:
                continue
            value = float(returns[item.members].mean())
            item.trial.report(value, step=len(item.history))
            item.history.append(value)
            if math.isfinite(value) and item.trial.should_prune():
                item.done = True
                self.study.tell(item.trial, state=optuna.trial.TrialState.PRUNED)
                self.log(item, f"pruned after {len(item.history)} rounds at {value:.2f}")

    def should_stop(self) -> bool:
        return all(item.done for item in self.pending)


def _fail(study: Any, pending: list[Pending], attr: str, why: str, log: Callable[[Pending, str], None]) -> None:
    import optuna

    for item in pending:
        if not item.done:
            item.trial.set_user_attr(attr, why)
            study.tell(item.trial, state=optuna.trial.TrialState.FAIL)
            item.done = True
            log(item, f"failed: {why}")


def run_group(
    env: Any,
    study: Any,
    pending: list[Pending],
    seeds: list[int],
    objective_rounds: int,
    log: Callable[[Pending, str], None],
    programs: dict | None = None,
) -> None:
    """Trains the group's trials x seeds as one run and tells each trial its value (or pruned, or failed);
    `programs`: the compiled populations of earlier groups, which a group of the same shapes reuses."""
    configs: list[Config] = []
    for item in pending:
        item.members = list(range(len(configs), len(configs) + len(seeds)))
        configs += [item.config.replace(seed=seed, verbose=0) for seed in seeds]
    reporter = _Reporter(study, pending, log)
    start = time.perf_counter()
    try:
        train(
            env,
            configs if len(configs) > 1 else configs[0],
            on_eval=reporter.on_eval,
            should_stop=reporter.should_stop,
            programs=programs,
        )
    except (ValueError, TypeError, FloatingPointError, OSError) as err:  # this trial's config or run, not the study
        _fail(study, pending, "error", reason(err), log)
        return
    except BaseException:  # Ctrl-C or a kill: these trials are cut, and `--resume` runs them again
        _fail(study, pending, CUT, "interrupted", log)
        raise
    wall = time.perf_counter() - start
    for item in pending:
        if item.done:
            continue
        item.trial.set_user_attr("wall_s", round(wall, 3))
        item.trial.set_user_attr("batch", len(pending))
        if not item.history or not math.isfinite(_objective(item.history, objective_rounds)):
            _fail(study, [item], "error", f"no finite evaluation (rounds: {item.history})", log)
            continue
        value = _objective(item.history, objective_rounds)
        study.tell(item.trial, value)
        item.done = True
        log(item, f"value {value:.2f}")
