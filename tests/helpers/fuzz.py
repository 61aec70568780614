"""The property-based (Hypothesis) targets' shared settings and contract.

Every fuzz target runs `CASES` examples in the default suite and `SLOW_CASES` under `-m slow` (the two profiles of
docs/reference/hardening.md). The default suite's examples are derandomized (seeded from each test's own code, so
every run tries the same ones and a red run is the change's, not the draw's); the slow profile draws fresh examples
each run, which is where new failures are found (each then becomes an `@example` of its target).

`fast` and `slow` are the settings decorators; `one_line` checks kppo's bad-input contract on an exception: a
non-empty message of one line that names what it refuses; `within` fails an example that hangs."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable

from hypothesis import HealthCheck, settings

CASES, SLOW_CASES = 500, 10_000

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def fast(cases: int = CASES):
    """The default suite's profile: `cases` examples (CASES unless a target's examples cost seconds each), the same
    ones every run."""
    return settings(max_examples=cases, derandomize=True, **_COMMON)


def slow(cases: int = SLOW_CASES):
    """The slow profile (`-m slow`): at least SLOW_CASES examples over a module's targets."""
    return settings(max_examples=cases, **_COMMON)


def one_line(message: str, names: Iterable[str] = ()) -> None:
    """Asserts `message` is kppo's one-line refusal: non-empty, no newline, no traceback, and (when `names` is given)
    mentioning at least one of them (a field, a file, an argument)."""
    assert message.strip(), "an empty message"
    assert "\n" not in message.strip(), f"not one line: {message!r}"
    # Python's own header, not the word: a refusal may quote a user's argument that happens to be "Traceback".
    assert "Traceback (most recent call last)" not in message, f"a traceback: {message!r}"
    names = [str(name) for name in names]
    if names:
        assert any(name in message for name in names), f"names none of {names}: {message!r}"


class Hang(AssertionError):
    """An example ran past its time limit: the fuzz targets count it as a failure (a hang), never wait."""


@contextlib.contextmanager
def within(seconds: float):
    """Fails the example with `Hang` if the block runs longer than `seconds` (SIGALRM; the main thread only, which is
    where pytest and its xdist workers run tests)."""

    def alarm(signum, frame):
        raise Hang(f"an example ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
