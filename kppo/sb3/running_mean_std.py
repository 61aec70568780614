"""SB3's `RunningMeanStd` (stable_baselines3/common/running_mean_std.py): the running mean, variance and count of a
stream of arrays, in float64, merged by Chan's parallel rule (`kppo.core.normalization.merge`, the rule kppo's
compiled normalization uses too). A `VecNormalize`'s `obs_rms` and `ret_rms` are these: copies of the statistics
the wrapper (or the model that took it) holds, which write an update back to it (`sink`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from kppo.core import normalization
from kppo.core.types import Moments

Sink = Callable[["RunningMeanStd"], None]


class RunningMeanStd:
    """SB3's `RunningMeanStd(epsilon=1e-4, shape=())`: mean 0, var 1 and count `epsilon` before any update;
    `update(batch)` merges a batch's mean and population variance over its first axis, `update_from_moments` given
    moments, `combine` another instance's; `copy` is independent. Iterating gives (mean, var, count)."""

    def __init__(self, epsilon: float = 1e-4, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = float(epsilon)
        #: called with this instance after every update: a `VecNormalize`'s statistics take it (None: nothing)
        self.sink: Sink | None = None

    @classmethod
    def of(cls, mean: Any, var: Any, count: Any, sink: Sink | None = None) -> RunningMeanStd:
        """An instance holding these moments (as float64 arrays)."""
        rms = cls(float(np.asarray(count)))
        rms.mean, rms.var, rms.sink = np.asarray(mean, np.float64), np.asarray(var, np.float64), sink
        return rms

    def __iter__(self) -> Iterator[Any]:
        return iter((self.mean, self.var, self.count))

    def __repr__(self) -> str:
        return f"RunningMeanStd(mean={self.mean!r}, var={self.var!r}, count={self.count!r})"

    def copy(self) -> RunningMeanStd:
        """The same moments, in new arrays, written back nowhere."""
        return RunningMeanStd.of(self.mean.copy(), self.var.copy(), self.count)

    def combine(self, other: RunningMeanStd) -> None:
        """Merges `other`'s moments into these."""
        self.update_from_moments(other.mean, other.var, other.count)

    def update(self, arr: Any) -> None:
        """Merges the moments of `arr` (a batch: its first axis are the samples) into these."""
        batch = np.asarray(arr, np.float64)
        self.update_from_moments(batch.mean(axis=0), batch.var(axis=0), batch.shape[0])

    def update_from_moments(self, batch_mean: Any, batch_var: Any, batch_count: float) -> None:
        """Merges moments of `batch_count` samples into these (Chan's rule)."""
        mine = Moments(self.mean, self.var, self.count)
        theirs = Moments(np.asarray(batch_mean, np.float64), np.asarray(batch_var, np.float64), float(batch_count))
        mean, var, count = normalization.merge(mine, theirs)
        self.mean, self.var, self.count = np.asarray(mean, np.float64), np.asarray(var, np.float64), float(count)
        if self.sink is not None:
            self.sink(self)
