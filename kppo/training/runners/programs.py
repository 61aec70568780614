"""The compiled programs of TF-native populations, kept between runs: one owner (`ProgramCache`), bounded.

A population's iterations and evaluation are `tf.function`s that take its variables as arguments, so two populations
of the same shapes (`shape_key`: every Config field but the seed and the sweepable values, the env's name and the
member count) can run the same traced and compiled functions on their own variables. `PROGRAMS` keeps those functions
for the process (shards of one search build their runners at once and share them); a caller's `programs` dict keeps
whole runners, whose variables a later population of those shapes is assigned into (`population.reuse`).

Both are bounded by `KEPT_PROGRAMS` entries, the oldest evicted first. Eviction only drops the cache's reference: a
runner holds its own functions, so a population that is running when its entry goes keeps running, and the next
population of those shapes traces and compiles again.

A single run's programs (`run_programs`: the native runner's iterations and evaluation, the host runner's rollout
finish and update) are kept the same way in `RUN_PROGRAMS`, by `run_key` (the runner kind, the spaces, every Config
field but the seed and those only the loop reads, a TF-native run's env name): a later run of that key calls them on
its own agent's variables (`kppo.core.rebinding.Rebound`), computing bit for bit what its own trace would, without
tracing or compiling.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple
from collections.abc import Callable, Sequence

import gymnasium as gym

from kppo._tf import tf
from kppo.config.options import Config
from kppo.config.population import shape_key
from kppo.core.rebinding import Rebound, rebinding_supported
from kppo.training.runners.settings import RunSpec

__all__ = [
    "IN_THE_KIND",
    "KEPT_PROGRAMS",
    "KEPT_RUN_PROGRAMS",
    "LOOP_ONLY",
    "PROGRAMS",
    "RUN_PROGRAMS",
    "ProgramCache",
    "keep",
    "program_key",
    "run_key",
    "run_programs",
    "space_key",
]

#: Entries a cache (and a caller's `programs` dict) keeps: a search over spaces that change shapes compiles one program
#: per shape, and each holds its traced graphs and XLA executables.
KEPT_PROGRAMS = 4
#: Entries of `RUN_PROGRAMS`: a single run's programs are smaller (one agent, no member axis), and a session of runs
#: (a test suite, a notebook trying settings) cycles through more configurations.
KEPT_RUN_PROGRAMS = 16


def program_key(env: Any, configs: list[Config]) -> tuple | None:
    """What a compiled population program depends on: the env's name, the member count, `shape_key` and the device
    its ops run on (a `tf.device` scope around the runner's making); None (no reuse) for an env object, which may
    change between calls."""
    if not isinstance(env, str):
        return None
    return env, len(configs), shape_key(configs[0]), _device()


def _device() -> str:
    """The device ops run on now (a `tf.device` scope around a runner's making): part of every kept program's key."""
    return tf.zeros([]).device


def keep(kept: dict, key: Any, value: Any, bound: int = KEPT_PROGRAMS) -> None:
    """`kept[key] = value`, the oldest entries evicted first so that at most `bound` remain."""
    kept.pop(key, None)
    while len(kept) >= bound:
        del kept[next(iter(kept))]
    kept[key] = value


class ProgramCache:
    """The process's compiled population functions by `program_key`, at most `bound` of them (oldest evicted)."""

    def __init__(self, bound: int = KEPT_PROGRAMS):
        if bound < 1:
            raise ValueError(f"bound: expected at least 1 kept program, got {bound}")
        self.bound = bound
        self._entries: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        return key in self._entries

    def shared(self, key: Any, make: Callable[[Any], Any]) -> Any:
        """`make(functions)` with the functions kept for `key` (None when there are none: `make` builds them, and
        its result's `functions` are kept). Thread-safe: shards that start together share one compilation."""
        with self._lock:
            functions = self._entries.get(key)
            made = make(functions)
            if functions is None:
                keep(self._entries, key, made.functions, self.bound)
            return made

    def get(self, key: Any) -> Any:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            keep(self._entries, key, value, self.bound)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The one cache of the process.
PROGRAMS = ProgramCache()
#: The process's single-run programs (`run_programs`).
RUN_PROGRAMS = ProgramCache(KEPT_RUN_PROGRAMS)


def space_key(space: gym.spaces.Space) -> Any:
    """A space as a traced program sees it: its kind, shapes, dtypes and bounds (every value, where a repr may
    abbreviate), its subspaces the same way."""
    if isinstance(space, gym.spaces.Dict):
        return "Dict", tuple((name, space_key(sub)) for name, sub in space.spaces.items())
    if isinstance(space, gym.spaces.Tuple):
        return "Tuple", tuple(space_key(sub) for sub in space.spaces)
    if isinstance(space, gym.spaces.Box):
        return "Box", space.shape, str(space.dtype), space.low.tobytes(), space.high.tobytes()
    return repr(space)


#: Config fields no traced program reads: the seed (the runner state's keys and the initial weights are arguments and
#: variables) and what only the loop around the programs reads (`training.loop`, `training.plan`: when to evaluate,
#: checkpoint and print, how many iterations a call runs: a tensor argument).
LOOP_ONLY = ("seed", "eval_freq", "checkpoint_every", "iterations_per_call", "verbose")
#: Fields the runner kind of a key already says: `env_backend` ("auto" resolves to "native" or "gymnasium", which
#: is the kind), so a run of "auto" and one of the backend it resolves to share their programs.
IN_THE_KIND = ("env_backend",)


def run_key(kind: str, spaces: Sequence[gym.spaces.Space], spec: RunSpec, env: str = "") -> tuple:
    """What a single run's traced programs depend on: the runner kind, the spaces, every Config field but `LOOP_ONLY`
    and `IN_THE_KIND` and, for a TF-native run, the env's name (its steps are traced into the programs)."""
    fields = tuple((k, v) for k, v in spec.fields if k not in LOOP_ONLY and k not in IN_THE_KIND)
    return kind, env, tuple(space_key(space) for space in spaces), fields


class _Kept(NamedTuple):
    owner: list  # the variables the functions were traced on (`Agent.program_variables`)
    functions: tuple  # the tf.functions


def run_programs(key: tuple | None, variables: list, make: Callable[[], tuple]) -> tuple:
    """`make()`'s tf.functions for a run whose programs read `variables`: the functions kept for `key` (on the device
    ops run on now), bound to `variables` (`Rebound`), or, the first time (and for a None key), `make()`'s own, kept
    for the next run of the key. A run whose variables differ in shape from the kept ones traces its own (not kept)."""
    if key is None or not rebinding_supported():
        return make()
    key = (*key, _device())
    kept = RUN_PROGRAMS.get(key)
    if kept is None:
        functions = make()
        RUN_PROGRAMS.put(key, _Kept(variables, functions))
        return functions
    if not Rebound.fits(kept.owner, variables):
        return make()

    def own(index: int) -> Callable[[], Callable]:
        return lambda: make()[index]

    return tuple(Rebound(function, kept.owner, variables, own(i)) for i, function in enumerate(kept.functions))
