"""The capability table cannot drift from the tests: the matrix covers every env x run x agent cell, every run kind is
run by the test module the page names, and the home page shows the table and names every agent and run kind."""

from __future__ import annotations

import importlib.util
import itertools
import re

from tests.docs.helpers import ROOT
from tests.helpers import capabilities


def _hook():
    spec = importlib.util.spec_from_file_location("kppo_docs_capabilities", ROOT / "docs" / "hooks" / "capabilities.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _hook()


def test_the_matrix_read_from_source_is_the_one_the_tests_import():
    m = hook.matrix()
    assert m["ENV_KINDS"] == capabilities.ENV_KINDS and m["AGENT_KINDS"] == capabilities.AGENT_KINDS
    assert m["RUN_KINDS"] == capabilities.RUN_KINDS and m["CELLS"] == capabilities.CELLS
    assert set(m["CELLS"]) == set(itertools.product(m["ENV_KINDS"], m["AGENT_KINDS"]))


def test_every_run_kind_is_parametrized_by_the_test_module_the_page_names():
    for run in capabilities.RUN_KINDS:
        source = (ROOT / hook.TESTS[run]).read_text()
        assert f'cells("{run}")' in source, f"{hook.TESTS[run]} does not run the {run} cells"
    cells = {cell for run in capabilities.RUN_KINDS for cell in capabilities.cells(run)}
    assert len(cells) == 24


def _tables() -> list[list[str]]:
    """The body rows of each table the hook writes, in order."""
    tables, current = [], None
    for line in hook.capability_table().splitlines():
        if line.startswith("|---"):
            current = []
            tables.append(current)
        elif line.startswith("| ") and current is not None:
            current.append(line)
        elif not line.startswith("|"):
            current = None
    return tables


def test_the_table_has_a_row_per_env_and_agent_kind_and_a_column_per_run_kind():
    rows = _tables()[0]
    assert len(rows) == len(capabilities.CELLS)
    assert all(row.count("✓") == len(capabilities.RUN_KINDS) for row in rows)
    assert rows[0].startswith("| TF-native | MLP |") and rows[-1].startswith("| gymnasium | masked |")


def test_the_home_page_shows_the_table_and_its_paragraph_names_every_kind():
    home = (ROOT / "docs" / "index.md").read_text()
    assert hook.TABLE_MARKER in home and "(reference/capabilities.md)" in home
    built = re.search(r"^What is built:(.*?)\n\n", home, re.S | re.M).group(1)
    for label in [*hook.AGENT_LABELS.values(), "gymnasium", "TF-native", "populations", "tf.distribute"]:
        assert label in built, f"docs/index.md's What is built names no {label!r}"


def test_every_limit_is_marked_and_its_refusal_is_in_the_source():
    """Each row below the grid says ✓, refused or not yet per kind of env, links a guide that exists, and names the
    start of a one-line error that kppo's source raises (so the row goes when the limit does)."""
    source = "\n".join(p.read_text() for p in sorted((ROOT / "kppo").rglob("*.py")))
    rows = _tables()[1]
    assert len(rows) == len(hook.LIMITS) >= 4
    marks = {hook.DONE, hook.REFUSED, hook.NOT_YET}
    for what, native, gymnasium, _why, guide, message in hook.LIMITS:
        assert {native, gymnasium} <= marks and {hook.REFUSED, hook.NOT_YET} & {native, gymnasium}, what
        assert (ROOT / "docs" / guide.split("#")[0]).is_file(), f"{what}: links {guide}, which does not exist"
        assert message in source, f"{what}: no error {message!r} in kppo/ any more: update LIMITS"
    assert any(hook.REFUSED in row for row in rows) and any(hook.NOT_YET in row for row in rows)
