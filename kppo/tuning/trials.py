"""Where Optuna's ask/tell meets the compiled population: a group of asked trials (with every seed of each) trains as
one `kppo.train` population, each evaluation round is reported to each trial (the mean over its seeds), the pruner is
asked after every round, and each trial is told its value when the run ends.

A pruned trial is told at once (other processes see it), and its members stop counting; they keep stepping inside
the compiled program, whose member count is a shape: refilling a slot with a new trial would recompile it and give
the newcomer fewer steps than its peers. A group whose trials are all pruned stops early.

On a machine with several cores a group of a TF-native env trains as `shard_count` populations of equal size at once,
one thread each, on one traced and compiled program (`population.make_native_population` shares it): a population's
rollout steps keep one core busy, and two shards fill two (`docs/benchmarks/tuning.md`, "Measurements behind the
defaults"). Their evaluation rounds are reported together, members in order, as one population reports them
(`_Shards`), so the study sees the same reports and the pruner decides the same.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

import numpy as np

from kppo.config.options import Config
from kppo.core.errors import reason
from kppo.tuning.storage import CUT
from kppo.training.runners import runner_kind
from kppo.config.population import check_members, shape_key
from kppo.training.runners.settings import resolve
from kppo.training.train import train

__all__ = ["Pending", "group_by_shape", "run_group", "shard_count"]

#: The fewest members a shard of a group holds: two shards of 4 CartPole members iterate faster than one population
#: of 8 (`docs/benchmarks/tuning.md`, "Measurements behind the defaults").
SHARD_MIN_MEMBERS = 4
#: Where a `programs` dict keeps its shards' own `programs` dicts (their runners hold their own variables).
_SHARD_PROGRAMS = "shards"


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


class _Shards:
    """The evaluation rounds of a group's shards, reported as one population's: a shard's row waits until every
    shard's row of that round is in, and the last to arrive reports their returns together, members in shard order.
    `fail` releases the waiting shards and stops them at their next call."""

    def __init__(self, count: int, reporter: _Reporter):
        self.rows: list[list[dict]] = [[] for _ in range(count)]
        self.reporter, self.reported, self.failed = reporter, 0, False
        self.lock = threading.Condition()

    def on_eval(self, shard: int, row: dict) -> None:
        with self.lock:
            self.rows[shard].append(row)
            round_index = len(self.rows[shard]) - 1
            if all(len(rows) > round_index for rows in self.rows):
                returns = [np.atleast_1d(np.asarray(rows[round_index]["eval/mean_returns"])) for rows in self.rows]
                try:
                    self.reporter.on_eval({"eval/mean_returns": np.concatenate(returns)})
                finally:
                    self.reported = round_index + 1
                    self.lock.notify_all()
            else:
                self.lock.wait_for(lambda: self.reported > round_index or self.failed)

    def should_stop(self) -> bool:
        return self.failed or self.reporter.should_stop()

    def fail(self) -> None:
        with self.lock:
            self.failed = True
            self.lock.notify_all()


def shard_count(env: Any, configs: list[Config], cores: int | None = None) -> int:
    """How many populations of equal size a group of `configs` trains at once: one a core (`cores`: this process's),
    each of at least `SHARD_MIN_MEMBERS` members; 1 unless the env is TF-native by name and the population
    XLA-compiled (where the shards share one compiled program)."""
    spec = resolve(configs[0])
    if not isinstance(env, str) or runner_kind(env, spec) != "native" or not spec.jit_population:
        return 1
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    count = min(cores, len(configs) // SHARD_MIN_MEMBERS)
    while count > 1 and len(configs) % count:
        count -= 1
    return max(count, 1)


def _train_shards(env: Any, configs: list[Config], reporter: _Reporter, count: int, programs: dict) -> None:
    """`configs` as `count` populations trained at once, one thread each; the first error of a shard is raised."""
    shards, size, errors = _Shards(count, reporter), len(configs) // count, []
    kept = programs.setdefault(_SHARD_PROGRAMS, {})

    def run(index: int) -> None:
        try:
            members = configs[index * size : (index + 1) * size]
            on_eval = functools.partial(shards.on_eval, index)
            train(env, members, on_eval=on_eval, should_stop=shards.should_stop, programs=kept.setdefault(index, {}))
        except BaseException as err:  # raised in the caller's thread below
            errors.append(err)
            shards.fail()

    threads = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        shards.fail()  # Ctrl-C in the caller: the shards stop at their next call
        raise
    if errors:
        raise errors[0]


def _fail(study: Any, pending: list[Pending], attr: str, why: str, log: Callable[[Pending, str], None]) -> None:
    import optuna

    for item in pending:
        if not item.done:
            item.trial.set_user_attr(attr, why)
            study.tell(item.trial, state=optuna.trial.TrialState.FAIL)
            item.done = True
            log(item, f"failed: {why}")


def reuses_programs(env: Any, configs: list[Config], programs: dict | None) -> bool:
    """Whether a group of one trains as a population of one member: on a TF-native env named by a string, when it
    can (`check_members`), so that the next trial of the same shapes (`--batch 1`) runs the compiled program of this
    one with its own weights and values instead of tracing and compiling again."""
    if programs is None or not isinstance(env, str) or runner_kind(env, resolve(configs[0])) != "native":
        return False
    try:
        check_members(configs)
    except ValueError:
        return False
    return True


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
    start, shards = time.perf_counter(), shard_count(env, configs)
    try:
        if shards > 1:
            _train_shards(env, configs, reporter, shards, {} if programs is None else programs)
        else:
            members = configs if len(configs) > 1 or reuses_programs(env, configs, programs) else configs[0]
            train(env, members, on_eval=reporter.on_eval, should_stop=reporter.should_stop, programs=programs)
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
