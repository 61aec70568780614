"""The loop over iterations, written once (`drive`): in-graph as a `tf.while_loop`, or in Python, where a step hook
that stops the rollout ends the call before its update. `Iterations` is what a call of n iterations returns."""

from __future__ import annotations

from typing import Any, NamedTuple
from collections.abc import Callable

from kppo._tf import tf
from kppo.core.types import Diagnostics
from kppo.rollout.gymnasium import RolloutStopped
from kppo.update.diagnostics import add_diagnostics

__all__ = ["Iterations", "drive"]


class Iterations(NamedTuple):
    """What a call of n iterations returns (`drive`, `Runner.run_iterations`)."""

    state: Any  # the runner state after the completed iterations (host path: at the stop, if stopped)
    diagnostics: Diagnostics | None  # summed over the completed iterations; None when none completed
    completed: int  # iterations completed (rollout and update)
    stopped: bool = False  # the step hook stopped a rollout (no update for it)


def drive(iteration: Callable, carry: Any, n, zeros: Diagnostics | None = None) -> Iterations:
    """The loop over iterations, written once: n calls of `iteration(carry) -> (carry, Diagnostics)`, their
    diagnostics summed. With `zeros` (the accumulator's zero, e.g. with a member axis) in-graph as a `tf.while_loop`
    (n may be a tensor, so a shorter last call does not retrace); without, in Python, where a step hook that stops
    the rollout (`RolloutStopped`, the one stop path of callbacks) ends the call at that step, before its update."""
    if zeros is not None:

        def body(i, carry, total):
            carry, diag = iteration(carry)
            return i + 1, carry, add_diagnostics(total, diag)

        _, carry, total = tf.while_loop(lambda i, *_: i < n, body, (tf.constant(0), carry, zeros))
        return Iterations(carry, total, n)
    total, completed = None, 0
    for _ in range(int(n)):
        try:
            carry, diag = iteration(carry)
        except RolloutStopped as stop:
            return Iterations(carry._replace(rollout=stop.state), total, completed, stopped=True)
        total, completed = add_diagnostics(total, diag), completed + 1
    return Iterations(carry, total, completed)
