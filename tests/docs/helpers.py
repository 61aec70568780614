"""Shared by the docs tests: the hook module (docs/hooks/reference.py) and the fenced code blocks of a Markdown file."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def load_hook():
    """docs/hooks/reference.py, the generator of the reference pages, imported as a module."""
    spec = importlib.util.spec_from_file_location("kppo_docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_blocks(path: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a Markdown file, in order."""
    return [(m.group(1), m.group(2)) for m in FENCED.finditer(path.read_text())]


def env() -> dict:
    """This interpreter's virtualenv first on PATH (so `kppo`, `python` and the kit's commands are its own)."""
    out = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    out["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{out.get('PATH', '')}"
    out.pop("PYTHONPATH", None)
    return out


def run(cmd: list[str] | str, cwd: Path, timeout: float = 600, shell: bool = False) -> subprocess.CompletedProcess:
    """Runs `cmd`; fails the test with the end of its output unless it exits 0."""
    args = ["bash", "-euo", "pipefail", "-c", cmd] if shell else cmd
    out = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd!r} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out
