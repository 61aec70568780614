"""The errors reference (docs/reference/errors.md, written by hand: the messages live next to each check) names a
test for every case; each named test file exists."""

from __future__ import annotations

import re

from tests.docs.helpers import ROOT

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
