"""How the kit's command lines fail: one line on standard error naming the tool, and exit status 2, for every
failure that is the user's input or environment (a missing file, a damaged artifact, an unknown env, a missing
extra)."""

from __future__ import annotations

import sys

#: What a user's input or environment raises through the kit (LiteRT's and gymnasium's errors are among these).
USER_ERRORS = (ValueError, RuntimeError, OSError, ImportError, KeyError)


def fail(tool: str, error: BaseException) -> int:
    """Prints `tool: <the error's message on one line>` to standard error; returns the exit status, 2."""
    message = " ".join(str(error).split()) or type(error).__name__
    print(f"{tool}: {message}", file=sys.stderr)
    return 2
