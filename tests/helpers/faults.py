"""Faults the hardening tests inject: a file-size limit on this process (`file_size_limit`) or on a child process
(`limited`). Python ignores SIGXFSZ, so a write past the limit fails with EFBIG ("File too large")."""

from __future__ import annotations

import contextlib
import resource


@contextlib.contextmanager
def file_size_limit(limit: int):
    """This process's writes past `limit` bytes fail (the soft limit; restored on exit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def limited(limit: int):
    """A `preexec_fn` that sets the child's file-size limit to `limit` bytes."""
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
