"""The pages speak to users: no word about how kppo is developed (its tracker's issues, working sessions, commits, the
machines lent for it, a clock timeline of the day's runs). Each pattern below says why a user has no part in it and
what to write instead; README.md, every page under docs/ and the generated capability page are read."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tests.docs.helpers import ROOT

#: (pattern, why it is not for a user, what to write instead). Matched case-insensitively against a page's text
#: outside its fenced code blocks.
INTERNAL = [
    (r"\bissues?(?:'s|s')?\b", "the project's tracker: a user never saw 'the issue'", "state the target itself"),
    (r"\bsessions?(?:'s|s')?\b", "how the work was scheduled", "say what shared the machine (e.g. 'a loaded machine')"),
    (r"\bhelpers?(?:'s|s') tests?\b", "a developer's helper and its tests", "say what shared the machine"),
    (r"\blent\b", "which machines were lent to the developers", "say which hardware was measured, and what was not"),
    (r"\bthis project(?:'s)?\b", "the developers' own setup", "name the machine (CPU model, cores)"),
    (r"\bworktree\b", "a git working tree of the developers", "name the version compared"),
    (r"\bcommits?\b", "the project's history: users see releases", "name the kppo version, or nothing"),
    (
        r"(?<![\w/.-])(?=[0-9a-f]{7,40}\b)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
        "a commit hash",
        "name the kppo version, or nothing",
    ),
    (r"\b(?:[01]?\d|2[0-3]):[0-5]\d\b", "a clock time: an hour-by-hour lab timeline", "give the date and the machine"),
    (r"\bthe seed(?:'s)? (?:code|project|`)", "the code kppo started from", "name the library itself"),
    (r"\b(?:TODO|FIXME|XXX)\b", "a note to the developers", "do it, or say what is not built yet"),
]
COMPILED = [(re.compile(p, 0 if "TODO" in p else re.I), why, instead) for p, why, instead in INTERNAL]
FENCED = re.compile(r"^```.*?^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)]


def _capabilities_page() -> str:
    spec = importlib.util.spec_from_file_location("kppo_docs_capabilities", ROOT / "docs" / "hooks" / "capabilities.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.capabilities_page()


def internal_lines(text: str) -> list[str]:
    """'line N: "match" (why; instead: ...)' for every internal word of a page (its fenced blocks left out)."""
    text = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, why, instead in COMPILED:
            for match in pattern.finditer(line):
                found.append(f"line {number}: {match.group(0)!r} ({why}; instead: {instead})")
    return found


def test_the_patterns_catch_what_they_name_and_leave_the_rest():
    caught = [
        "so the issue's 475 holds",
        "other sessions' test suites",
        "in the same session",
        "a helper's tests",
        "no accelerator was lent to this project's sessions",
        "Code: commit `f57db28`.",
        "(14:52, load 2.9-4.5)",
        "The seed's `lit_sb3`",
    ]
    for text in caught:
        assert internal_lines(text), text
    kept = [
        "`benchmarks/results/against_base/issue35_2026-12-02.json`",
        "a 1000000-step run, seeds 0-7",
        "`tests/helpers/fuzz.py`",
        "each seed's envs",
        "```sh\ngit switch --detach <old commit>\n```",
        "the SHA-256 `sha256`",
    ]
    for text in kept:
        assert not internal_lines(text), text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_speaks_to_users(page):
    found = internal_lines(page.read_text())
    if found:
        pytest.fail(f"{page.relative_to(ROOT)} speaks of how kppo is developed:\n" + "\n".join(found), pytrace=False)


def test_the_generated_capability_page_speaks_to_users():
    assert not internal_lines(_capabilities_page())
