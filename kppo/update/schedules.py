"""The scheduled values of a PPO iteration, computed once per iteration and passed in (`Schedules`): the one formula
of every Config schedule (`schedules_at`), and where the update reads them (`with_schedules`).

Every runner gets its schedules the same way: the iteration calls a schedule function `iteration -> Schedules`
(`config_schedules`: the Config's schedules in-graph; a population passes each member's own values as the bases;
the SB3 facade passes its host-evaluated callables) and hands the result to the update, which assigns the learning
rate to its optimizer (or steps a functional Adam with it) and reads the other fields in place of the settings'.
A new schedule is an entry of `kppo.config.schedules.SCHEDULES` and a line of `progress_factor`; a new scheduled
value a field here, a `SCHEDULED` entry and a Config field: no runner changes.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo._tf import tf
from kppo.config.schedules import SCHEDULED


class Schedules(NamedTuple):
    """One iteration's scheduled values, float32 scalars (a population member's own, inside its program);
    `clip_range_vf` is scheduled only by the SB3 facade (SB3's `clip_range_vf` schedule)."""

    learning_rate: Any
    clip_range: Any
    ent_coef: Any
    clip_range_vf: Any = None  # None: no value clipping (the update's settings say so too)


ScheduleFn = Callable[[Any], Schedules]


class ScheduleSpec(NamedTuple):
    """What the schedules read of a run's settings, resolved once (`kppo.training.runners.settings.schedule_spec`):
    each scheduled value's base (`SCHEDULED`'s keys) and schedule name, the run's iterations, and the value clipping
    range (None: none)."""

    bases: dict[str, float]
    kinds: dict[str, str]
    num_iterations: int
    clip_range_vf: float | None


def progress_factor(schedule: str, done: tf.Tensor) -> tf.Tensor | float:
    """The factor a schedule applies to its base value when the fraction `done` (float32, in [0, 1]) of the run's
    iterations came before: the formula of each `kppo.config.schedules.SCHEDULES` entry."""
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - done
    raise ValueError(f"schedule: expected one of the schedules of kppo.config.schedules, got {schedule!r}")


def scheduled(spec: ScheduleSpec, name: str, iteration, base=None) -> tf.Tensor:
    """`name`'s base value (or `base`: a population member's own value) at `iteration` (0-based) under its schedule
    (`spec.kinds[name]`, `progress_factor`): the one formula of every scheduled value on every runner.

    Linear: value * (1 - iteration / num_iterations), i.e. RL-Zoo's `lin_<value>` (value * progress_remaining) at
    SB3's progress_remaining = 1 - steps / total_timesteps with the steps done before the iteration's rollout, where
    kppo's SB3 facade evaluates SB3 schedules too. SB3's own `learn` counts the rollout just collected
    (`_update_current_progress_remaining` after `collect_rollouts`): one rollout later, 1 - (iteration + 1) /
    num_iterations."""
    base = tf.constant(spec.bases[name], tf.float32) if base is None else base
    schedule = spec.kinds[name]
    if schedule == "constant":
        return base
    return base * progress_factor(schedule, tf.cast(iteration, tf.float32) / float(spec.num_iterations))


def schedules_at(spec: ScheduleSpec, iteration, bases: Any = None) -> Schedules:
    """Every scheduled value at `iteration`; `bases` (any object with some of `SCHEDULED`'s names as attributes, e.g. a
    population's member values) replaces the run's numbers it names."""
    values = {name: scheduled(spec, name, iteration, getattr(bases, name, None)) for name in SCHEDULED}
    clip_vf = None if spec.clip_range_vf is None else tf.constant(spec.clip_range_vf, tf.float32)
    return Schedules(**values, clip_range_vf=clip_vf)


def config_schedules(spec: ScheduleSpec, bases: Any = None) -> ScheduleFn:
    """`iteration -> Schedules`: the run's schedules (`schedules_at`)."""
    return lambda iteration: schedules_at(spec, iteration, bases)


def is_constant(spec: ScheduleSpec, name: str) -> bool:
    return spec.kinds[name] == "constant"


def with_values(settings: Any, values: Any) -> Any:
    """`settings` (a NamedTuple) with every field that `values` (a NamedTuple) has too replaced by its value: a
    population member's own hyperparameters, or an iteration's schedules."""
    return settings._replace(**{name: getattr(values, name) for name in values._fields if name in settings._fields})


def with_schedules(settings: Any, schedules: Schedules) -> Any:
    """The update's settings (`kppo.update.ppo.UpdateSettings`) with this iteration's scheduled values in place of
    the run's (every `Schedules` field the settings have; the learning rate goes to the optimizer)."""
    return with_values(settings, schedules)
