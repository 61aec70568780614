"""The errors reference: its hand-written guide (docs/reference/errors.md) names a test for every case, and each
named test file exists; the list after it is generated from the tests' `pytest.raises(..., match=...)`."""

from __future__ import annotations

import re

from tests.docs.helpers import ROOT, load_hook

PAGE = ROOT / "docs" / "reference" / "errors.md"


def _rows() -> list[list[str]]:
    rows = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("| ") and not line.startswith(("| input", "|---")):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))])
    return rows


def test_every_case_names_an_existing_test():
    rows = _rows()
    assert len(rows) >= 40
    for row in rows:
        files = [f.strip() for f in row[-1].split(",") if f.strip()]
        assert files, f"no test named for {row[0]!r}"
        for name in files:
            assert (ROOT / "tests" / name).is_file(), f"errors.md: {row[0]!r} names tests/{name}, which does not exist"


def test_the_message_list_is_read_from_the_tests(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_x.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('value, message', [(1, 'a: expected one'), (2, 'a: expected two')])\n"
        "def test_cases(value, message):\n"
        "    with pytest.raises(ValueError, match=message):\n"
        "        pass\n\n"
        "def test_literal():\n"
        "    with pytest.raises(KeyError, match='b|c'):\n"
        "        pass\n\n"
        "def helper():\n"
        "    pytest.raises(ValueError, match='not a test')\n"
    )
    hook = load_hook()
    rows = hook.checked_messages(tmp_path)
    assert [(r["test"], r["exception"], r["pattern"]) for r in rows] == [
        ("test_cases", "ValueError", "a: expected one"),
        ("test_cases", "ValueError", "a: expected two"),
        ("test_literal", "KeyError", "b|c"),
    ]
    table = hook.messages_table(rows)
    assert "| `b\\|c` | `KeyError` | sub/test_x.py::test_literal |" in table  # the pipe escaped for the table


def test_the_real_list_holds_the_messages_the_suite_checks():
    patterns = {r["pattern"] for r in load_hook().checked_messages()}
    assert len(patterns) > 100
    assert any(p.startswith("clip_range_vf: expected a positive number") for p in patterns)
