"""One PPO iteration, written once for every runner: keys -> schedules -> rollout + GAE -> update -> diagnostics.

`make_iteration` assembles it from two parts a runner supplies: `begin` (the keys, the schedules and the collection:
on one device, on each replica, or for every member of a population at once) and `update` (where the update runs:
the agent's Keras variables, the replicas' all-reduced steps, or every member's weights as tensors). Everything else
(the key split, the schedules, the diagnostics) is this module's, so a single run, a replica and a population member
compute one iteration the same way. `iteration_step` is the single run's.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo._tf import tf
from kppo.core import counter_rng
from kppo.core.types import Diagnostics, Rollout, RunnerState
from kppo.update.diagnostics import rollout_diagnostics, with_update
from kppo.update.ppo import UpdateStats
from kppo.update.schedules import ScheduleFn, Schedules

__all__ = ["Begun", "iteration_keys", "iteration_step", "make_iteration", "single_begin", "start_iteration"]


class Begun(NamedTuple):
    """What the first half of an iteration hands its update: the carry after the rollout, what the update reads
    (`work`), the rollout's diagnostics and the iteration's learning rate."""

    carry: Any
    work: Any
    diagnostics: Diagnostics
    learning_rate: tf.Tensor


def make_iteration(begin: Callable[[Any], Begun], update: Callable[[Any, Any], tuple[Any, UpdateStats]]) -> Callable:
    """The one iteration: `carry -> (carry, Diagnostics)`.

    Args:
        begin: `carry -> Begun`: keys, schedules and the rollout (`start_iteration`, once or per replica or member).
        update: `(carry, work) -> (carry, UpdateStats)`: the update of what `begin` collected.
    """

    def iteration(carry):
        begun = begin(carry)
        carry, stats = update(begun.carry, begun.work)
        return carry, with_update(begun.diagnostics, stats, begun.learning_rate)

    return iteration


def iteration_keys(key: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """An iteration's keys from the runner's: (the next iteration's, the rollout's, the update's)."""
    key, key_rollout, key_update = tf.unstack(counter_rng.split(key, 3))
    return key, key_rollout, key_update


def start_iteration(schedule_fn: ScheduleFn, collect: Callable, state: RunnerState):
    """The first half of an iteration (what each replica runs under a strategy): keys, schedules, rollout + GAE.

    Returns (state after the iteration, Rollout, the update's key, Schedules)."""
    key, key_rollout, key_update = iteration_keys(state.key)
    schedules = schedule_fn(state.iteration)
    rollout_state, rollout = collect(state.rollout, key_rollout)
    return RunnerState(rollout_state, key, state.iteration + 1), rollout, key_update, schedules


def single_begin(schedule_fn: ScheduleFn, collect: Callable) -> Callable[[RunnerState], Begun]:
    """A single run's `begin`: `start_iteration`; the update reads (Rollout, the update's key, Schedules)."""

    def begin(state: RunnerState) -> Begun:
        state, rollout, key_update, schedules = start_iteration(schedule_fn, collect, state)
        return Begun(state, (rollout, key_update, schedules), rollout_diagnostics(rollout), schedules.learning_rate)

    return begin


def iteration_step(
    schedule_fn: ScheduleFn,
    collect: Callable,
    update: Callable[[Rollout, tf.Tensor, Schedules], UpdateStats],
    state: RunnerState,
) -> tuple[RunnerState, Diagnostics]:
    """A single run's iteration (`make_iteration` of `single_begin` and `update`): inside the native runner's
    compiled loop, and eagerly in the host runner.

    Args:
        schedule_fn: `iteration -> Schedules` (`kppo.update.schedules`).
        collect: `(rollout state, key) -> (rollout state, Rollout)` (`kppo.rollout`).
        update: `(Rollout, key, Schedules) -> UpdateStats` (`ppo_update` on the flattened rollout, compiled or not).
    """

    def on_one_device(state: RunnerState, work: tuple) -> tuple[RunnerState, UpdateStats]:
        return state, update(*work)

    return make_iteration(single_begin(schedule_fn, collect), on_one_device)(state)
