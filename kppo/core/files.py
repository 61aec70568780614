"""Files written so that a crash, a full disk or a file-size limit never leaves half of one: `atomic_file` writes a
hidden sibling and renames it over the target; `atomic_dir` does the same for a folder. A failed write is a one-line
OSError naming the target, and the target keeps what it held (imports nothing from kppo)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _failed(target: Path, err: OSError) -> OSError:
    text = str(err).strip()
    why = err.strerror or (text.splitlines()[0] if text else type(err).__name__)
    return OSError(f"{target}: could not write it ({why}); what it held before is kept")


@contextlib.contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yields a path to write in place of `target`, renamed over it when the block ends without an error."""
    target = Path(target)
    partial = target.with_name(f".{target.name}.partial")
    try:
        yield partial
        os.replace(partial, target)
    except OSError as err:
        raise _failed(target, err) from None
    finally:
        partial.unlink(missing_ok=True)


def _swap(staging: Path, target: Path, aside: Path) -> None:
    """`staging` renamed to `target`; an existing `target` moved aside first and put back if the rename fails."""
    if not target.exists():
        os.replace(staging, target)
        return
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(target, aside)
    try:
        os.replace(staging, target)
    except OSError:
        os.replace(aside, target)
        raise


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yields an empty folder to fill in place of `target`; it replaces `target` when the block ends without an
    error (the old folder is moved aside first and removed after)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    aside = target.with_name(f".{target.name}.old")
    try:
        yield staging
        _swap(staging, target, aside)
    except OSError as err:
        raise _failed(target, err) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(aside, ignore_errors=True)
