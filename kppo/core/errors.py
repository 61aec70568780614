"""What kppo's one-line messages quote of an exception they name (imports nothing from kppo)."""

from __future__ import annotations


def first_line(err: BaseException, sep: str = ": ") -> str:
    """The first line of `err`'s message after `sep` ("" for an empty message)."""
    lines = str(err).strip().splitlines()
    return f"{sep}{lines[0].strip()}" if lines else ""


def reason(err: BaseException) -> str:
    """The first line of `err`'s message, or its type's name when it has none."""
    return first_line(err, sep="") or type(err).__name__
