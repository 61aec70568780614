"""Runs several documentation scripts in one fresh Python process (test_readme.py, test_guides.py): a process that
imports TensorFlow costs seconds, so the scripts share one, each still as its own `__main__` with fresh globals in
its own working directory (a script that leans on another's names or files fails as it would for a user)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.docs.helpers import run

RUNNER = """\
import contextlib, io, json, os, sys, traceback
jobs, out = json.load(open(sys.argv[1])), sys.argv[2]
results = {}
for name, cwd, code in jobs:
    os.chdir(cwd)
    printed = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"<{name}>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as stop:
        if stop.code not in (None, 0):
            error = traceback.format_exc()
    except BaseException:
        error = traceback.format_exc()
    results[name] = {"error": error, "stdout": printed.getvalue()[-3000:]}
    with open(out, "w") as handle:
        json.dump(results, handle)
"""


def run_scripts(jobs: list[tuple[str, Path, str]], workdir: Path, timeout: float) -> dict[str, dict]:
    """Runs each (name, working directory, code) in order in one `python -c` process; returns, per name, its
    traceback as "error" (None when it ran through) and the end of what it printed as "stdout". A name missing from
    the result did not get to run (the process died before it)."""
    spec, out = workdir / "jobs.json", workdir / "results.json"
    spec.write_text(json.dumps([[name, str(cwd), code] for name, cwd, code in jobs]))
    process = run([sys.executable, "-c", RUNNER, str(spec), str(out)], cwd=workdir, timeout=timeout)
    results = json.loads(out.read_text()) if out.exists() else {}
    for name, _, _ in jobs:
        results.setdefault(name, {"error": f"not run: the process ended first\n{process.stderr[-3000:]}", "stdout": ""})
    return results


def check(result: dict, what: str) -> None:
    """Fails with the script's traceback and output unless it ran through."""
    assert result["error"] is None, f"{what} failed:\n{result['stdout']}\n{result['error']}"
