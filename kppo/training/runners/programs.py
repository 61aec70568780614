"""The compiled programs of TF-native populations, kept between runs: one owner (`ProgramCache`), bounded.

A population's iterations and evaluation are `tf.function`s that take its variables as arguments, so two populations
of the same shapes (`shape_key`: every Config field but the seed and the sweepable values, the env's name and the
member count) can run the same traced and compiled functions on their own variables. `PROGRAMS` keeps those functions
for the process (shards of one search build their runners at once and share them); a caller's `programs` dict keeps
whole runners, whose variables a later population of those shapes is assigned into (`population.reuse`).

Both are bounded by `KEPT_PROGRAMS` entries, the oldest evicted first. Eviction only drops the cache's reference: a
runner holds its own functions, so a population that is running when its entry goes keeps running, and the next
population of those shapes traces and compiles again.
"""

from __future__ import annotations

import threading
from typing import Any
from collections.abc import Callable

from kppo.config.options import Config
from kppo.config.population import shape_key

__all__ = ["KEPT_PROGRAMS", "PROGRAMS", "ProgramCache", "keep", "program_key"]

#: Entries a cache (and a caller's `programs` dict) keeps: a search over spaces that change shapes compiles one program
#: per shape, and each holds its traced graphs and XLA executables.
KEPT_PROGRAMS = 4


def program_key(env: Any, configs: list[Config]) -> tuple | None:
    """What a compiled population program depends on: the env's name, the member count and `shape_key`; None (no
    reuse) for an env object, which may change between calls."""
    if not isinstance(env, str):
        return None
    return env, len(configs), shape_key(configs[0])


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

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The one cache of the process.
PROGRAMS = ProgramCache()
