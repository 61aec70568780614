"""The documentation site builds with warnings as errors (no broken link, anchor or reference), offline, with the
generated reference pages in its navigation; and it reads as it should: no list run into its paragraph, no code
block wider than the content column, no table without a header row (checked in the HTML), and the main pages fit a
desktop window and a phone in Chromium (through Playwright; the test skips, saying why, where either is missing)."""

from __future__ import annotations

import html as htmllib
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.docs.helpers import ROOT, load_hook, run


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, timeout=600)
    return out


def test_strict_build(site):
    assert (site / "index.html").exists()
    assert (site / "search" / "search_index.json").exists(), "the search index is missing"


def test_generated_pages_are_built(site):
    hook = load_hook()
    for module in hook.modules():
        assert (site / "reference" / "api" / module / "index.html").exists(), f"no API page for {module}"
    for page in ("config", "metrics", "errors", "capabilities"):
        assert (site / "reference" / page / "index.html").exists()
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert "Every message the tests check" in errors and "clip_range_vf: expected a positive number" in errors
    home = (site / "index.html").read_text()
    assert "capability table" not in home and "<td>gymnasium</td>" in home  # the marker became the table


def test_builds_offline(site):
    """No web fonts, scripts or styles fetched from elsewhere when a page opens (links to other sites are fine)."""
    for page in site.rglob("*.html"):
        html = page.read_text()
        remote = re.findall(r"<(?:script|link)[^>]+(?:src|href)=\"(https?://[^\"]+)\"", html)
        remote = [url for url in remote if not re.search(r"<link[^>]+rel=\"canonical\"", html) or "fonts" in url]
        assert not [u for u in remote if "fonts" in u or u.endswith((".js", ".css"))], f"{page}: fetches {remote}"


# --- rendering: what a reader sees ----------------------------------------------------------------------------------

#: Monospace characters a code block shows in the content column at a desktop width (measured in Chromium with the
#: Material theme: 81 at 1280 and 1920 px wide); `test_pages_fit_desktop_and_phone` measures the same in a browser.
CODE_COLUMNS = 80
#: The pages written by hand (the generated API and repository-file pages are the code's, not prose).
HAND_WRITTEN = sorted(
    p.relative_to(ROOT / "docs").with_suffix("").as_posix()
    for p in (ROOT / "docs").rglob("*.md")
    if "hooks" not in p.parts
)


def _html(site: Path, page: str) -> str:
    path = site / ("index.html" if page == "index" else f"{page.removesuffix('/index')}/index.html")
    return path.read_text()


def _content(html: str) -> str:
    """The article of a page (Material's `md-content`), without the navigation around it."""
    start = html.find('<article class="md-content__inner')
    return html[start : html.find("</article>", start)] if start >= 0 else html


def _text(fragment: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", fragment))


def _pages(site: Path, pages=HAND_WRITTEN):
    return [(page, _content(_html(site, page))) for page in pages]


def test_no_list_runs_into_its_paragraph(site):
    """A Markdown list needs a blank line before it; without one its `- ` lines stay inside the paragraph."""
    found = []
    for page, html in _pages(site):
        for paragraph in re.findall(r"<p>(.*?)</p>", html, re.S):
            for line in _text(paragraph).splitlines()[1:]:
                if re.match(r"\s*(?:[-*+]|\d+\.)\s+\S", line):
                    found.append(f"{page}: {line.strip()[:60]!r}")
    assert not found, "list items inside a paragraph (add a blank line before the list):\n" + "\n".join(found)


@pytest.mark.parametrize("page", HAND_WRITTEN)
def test_code_blocks_fit_the_content_column(site, page):
    found = []
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", _content(_html(site, page)), re.S):
        for line in _text(block).splitlines():
            if len(line) > CODE_COLUMNS:
                found.append(f"{len(line)} characters: {line[:60]!r}...")
    assert not found, f"{page}: code lines wider than the content column ({CODE_COLUMNS} characters):\n" + "\n".join(
        found
    )


def test_every_table_has_a_header_row(site):
    found = []
    for page, html in _pages(site):
        for table in re.findall(r"<table>(.*?)</table>", html, re.S):
            head = re.search(r"<thead>(.*?)</thead>", table, re.S)
            if head is None or not _text(head.group(1)).strip():
                found.append(f"{page}: a table whose header row is empty: {_text(table).split()[:6]}")
        for paragraph in re.findall(r"<p>(.*?)</p>", html, re.S):
            if re.search(r"^\s*\|.*\|\s*$", _text(paragraph), re.M):
                found.append(f"{page}: a table that did not render (no header or delimiter row?)")
    assert not found, "\n".join(found)


#: The pages a new reader opens first, checked in a browser.
MAIN_PAGES = [
    "index",
    "guides/getting-started",
    "guides/sb3",
    "guides/functional-api",
    "guides/populations",
    "guides/recurrent-and-masks",
    "guides/images",
    "guides/export",
    "guides/distributed",
    "guides/cli",
    "guides/tuning",
    "reference/capabilities",
    "reference/errors",
    "results",
    "ppo",
]
#: (name, width, height): a desktop window and a phone.
VIEWPORTS = [("desktop", 1280, 800), ("phone", 390, 844)]
#: The check that runs in the page: a function of `checkCode` (its `//` comment lines left out for Playwright).
LAYOUT = (
    "\n".join(
        line for line in (Path(__file__).parent / "layout.js").read_text().splitlines() if not line.startswith("//")
    )
    .strip()
    .rstrip(";")
)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_pages_fit_desktop_and_phone(site):
    """In Chromium at a desktop and a phone width: the page never scrolls sideways, nothing in the article reaches
    past it (tables and code scroll inside their own boxes), a table header never breaks inside a word, and at the
    desktop width every code block fits its box."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (the docs extra)")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    found = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            for viewport, width, height in VIEWPORTS:
                tab = browser.new_page(viewport={"width": width, "height": height})
                for page in MAIN_PAGES:
                    path = site / ("index.html" if page == "index" else f"{page}/index.html")
                    tab.goto(path.as_uri())
                    for problem in tab.evaluate(LAYOUT, viewport == "desktop"):
                        found.append(f"{page} ({viewport}, {width} px): {problem}")
                tab.close()
        finally:
            browser.close()
    assert not found, "\n".join(found)
