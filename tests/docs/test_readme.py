"""README.md is the front door: at most 200 lines, its links resolve, and every command and code block in it runs
as written (its training budgets are short, and the text says so)."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

from tests.docs.helpers import ROOT, code_blocks, run

README = ROOT / "README.md"
BLOCKS = code_blocks(README)
INSTALL = "python3 -m venv .venv && . .venv/bin/activate"
#: README lines that cannot run inside the test suite as written, what runs instead, and why. A substitute whose
#: line is no longer in the README fails `test_substitutes_are_current`.
SUBSTITUTES = {
    # The suite cannot run itself from inside a test; collecting it checks the command and every test module.
    "python -m pytest": ("python -m pytest --collect-only -q -n 0", ROOT),
}


def _commands(code: str) -> list[str]:
    """The shell commands of a block, one per line (`\\` continuations joined, comments kept for bash)."""
    return [c for c in code.replace("\\\n", " ").splitlines() if c.strip() and not c.lstrip().startswith("#")]


def _line(command: str) -> str:
    return command.split("  #")[0].strip()


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the front door stays at 200 at most"


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_every_block_is_tested():
    languages = {lang for lang, _ in BLOCKS}
    assert languages <= {"sh", "python"}, f"README.md has blocks in {languages - {'sh', 'python'}}: test them here"


def test_substitutes_are_current():
    lines = {_line(c) for lang, code in BLOCKS if lang == "sh" for c in _commands(code)}
    for line in SUBSTITUTES:
        assert line in lines, f"SUBSTITUTES names {line!r}, no longer a README command"


@pytest.mark.parametrize("index", [i for i, (lang, _) in enumerate(BLOCKS) if lang == "python"])
def test_python_block_runs(index, tmp_path):
    run([sys.executable, "-c", BLOCKS[index][1]], cwd=tmp_path, timeout=600)


def test_shell_blocks_run_in_order(tmp_path):
    """The README's shell blocks, in order, in one working directory (the deployment block uses the run the first
    one trains); the install block runs under the `install` marker (test_install_block)."""
    ran = []
    for lang, code in BLOCKS:
        if lang != "sh" or INSTALL in code:
            continue
        for command in _commands(code):
            line = _line(command)
            if line in SUBSTITUTES:
                substitute, cwd = SUBSTITUTES[line]
                run(substitute, cwd=cwd, shell=True)
            else:
                run(command, cwd=tmp_path, shell=True)
            ran.append(line)
    assert any(line.startswith("kppo train") for line in ran), "the README's quick start trains nothing"
    assert (tmp_path / "runs" / "cartpole" / "policy.tflite").exists()


@pytest.mark.install
def test_install_block(tmp_path):
    """The install block as written, in a copy of the checkout (a fresh virtualenv; TensorFlow's install: minutes)."""
    (block,) = [code for lang, code in BLOCKS if lang == "sh" and INSTALL in code]
    copy = tmp_path / "kppo"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "dist", "*.egg-info", "runs", "site", "__pycache__", "bench_out"
        ),
    )
    run(block + "\nkppo --help\nkppo-latency --help\n", cwd=copy, shell=True, timeout=1800)
