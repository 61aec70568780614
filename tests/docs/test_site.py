"""The documentation site builds with warnings as errors (no broken link, anchor or reference), offline, with the
generated reference pages in its navigation."""

from __future__ import annotations

import re
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
