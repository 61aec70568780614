"""README.md is the front door: at most 200 lines, its links resolve, and every command and code block in it runs
as written (its training budgets are short, and the text says so)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.docs.helpers import FENCED, ROOT, code_blocks, run
from tests.docs.scripts import check, run_scripts

README = ROOT / "README.md"
BLOCKS = code_blocks(README)
INSTALL = "python3 -m venv .venv && . .venv/bin/activate"
#: README lines that cannot run inside the test suite as written, what runs instead, and why. A substitute whose
#: line is no longer in the README fails `test_substitutes_are_current`.
SUBSTITUTES = {
    # The suite cannot run itself from inside a test. Collecting one module checks the command with the project's
    # settings, plugins and conftest; that every module imports is the running suite's own collection.
    "python -m pytest": ("python -m pytest --collect-only -q -n 0 tests/docs/test_readme.py", ROOT),
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


PYTHON_BLOCKS = [i for i, (lang, _) in enumerate(BLOCKS) if lang == "python"]


@pytest.fixture(scope="module")
def python_blocks_ran(tmp_path_factory):
    """Every Python block as its own script (fresh globals, its own empty directory), all in one Python process."""
    jobs = [(f"block {i}", tmp_path_factory.mktemp(f"block{i}"), BLOCKS[i][1]) for i in PYTHON_BLOCKS]
    return run_scripts(jobs, tmp_path_factory.mktemp("runner"), timeout=600 * len(jobs))


@pytest.mark.parametrize("index", PYTHON_BLOCKS)
def test_python_block_runs(index, python_blocks_ran):
    check(python_blocks_ran[f"block {index}"], f"README.md's Python block {index}")


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


INSTALL_BLOCKS = [code for lang, code in BLOCKS if lang == "sh" and INSTALL in code]


def test_the_install_section_has_a_user_install_and_a_developer_install():
    """A user installs the built wheels (no editable checkout) with the extras named; a developer the checkout."""
    user = [code for code in INSTALL_BLOCKS if ".whl[" in code and " -e " not in code]
    developer = [code for code in INSTALL_BLOCKS if "pip install -e" in code]
    assert len(user) == 1 and len(developer) == 1, "README.md: expected a wheel install block and an editable one"
    assert "kppo_runtime" in user[0] and "[eval]" in user[0], "the user install names the kit and its eval extra"


def test_the_headings_match_their_blocks():
    """A heading that counts its commands ("Two commands: ...") counts the commands of the block under it."""
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    sections = re.split(r"^## ", README.read_text(), flags=re.M)[1:]
    for section in sections:
        heading, _, body = section.partition("\n")
        count = re.match(r"(\w+) commands?\b", heading, re.I)
        if count and count.group(1).lower() in words:
            blocks = code_blocks_of(body)
            commands = _commands(blocks[0]) if blocks else []
            assert len(commands) == words[count.group(1).lower()], f"'## {heading}' sits over {len(commands)} commands"


def code_blocks_of(text: str) -> list[str]:
    return [m.group(2) for m in FENCED.finditer(text)]


@pytest.mark.install
@pytest.mark.parametrize("index", range(len(INSTALL_BLOCKS)), ids=["user", "developer"][: len(INSTALL_BLOCKS)])
def test_install_block(index, tmp_path):
    """An install block as written, in a copy of the checkout (a fresh virtualenv; TensorFlow's install: minutes)."""
    block = INSTALL_BLOCKS[index]
    copy = tmp_path / "kppo"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "build", "dist", "*.egg-info", "runs", "site", "__pycache__", "bench_out"
        ),
    )
    run(block + "\nkppo --help\nkppo-latency --help\n", cwd=copy, shell=True, timeout=1800)
