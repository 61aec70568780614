"""Every guide's Python blocks run, in order, as one script per guide (a guide builds on its earlier blocks), with
the short budgets the guide states; so do the CLI guide's short-run shell block and the SB3 argument table's source.
The default suite's guides share one Python process, each script with fresh globals in its own directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.docs.helpers import ROOT, code_blocks, run
from tests.docs.scripts import check, run_scripts

GUIDES = sorted((ROOT / "docs" / "guides").glob("*.md"))
PYTHON_GUIDES = [g for g in GUIDES if "```python" in g.read_text()]
#: Shell blocks of the guides that run here (the others need a cluster, a TPU or a finished 500k-step run).
RUNNABLE_SHELL = {"cli.md": "kppo train cartpole --set total_timesteps=8192"}


def _script(path: Path) -> str:
    parts = []
    for i, (lang, code) in enumerate(code_blocks(path)):
        if lang == "python":
            parts.append(f"print('--- block {i} of {path.name}', flush=True)\n{code}")
    return "\n".join(parts)


#: Guides whose examples take 30-70 s here (several compiled programs each; images: an Atari CNN and a MinAtar run;
#: the README's tests already run a population, a mirrored run and the CLI's train-export path in the default suite,
#: tests/sb3/test_cnn_policy.py a CnnPolicy; tests/tuning a batched search and PBT): `-m slow`.
SLOW = {"populations", "recurrent-and-masks", "distributed", "images", "tuning"}


#: Files a guide's code reads, copied into its working directory: (source under the repository, name there).
GUIDE_FILES = {
    "sb3": [
        ("tests/fixtures/sb3/saved/pendulum_vecnorm.zip", "model.zip"),
        ("tests/fixtures/sb3/saved/pendulum_vecnorm.pkl", "vec_normalize.pkl"),
    ]
}


def _workdir(guide: Path, tmp_path: Path) -> Path:
    for source, name in GUIDE_FILES.get(guide.stem, []):
        (tmp_path / name).write_bytes((ROOT / source).read_bytes())
    return tmp_path


@pytest.fixture(scope="module")
def default_guides_ran(tmp_path_factory):
    """The default suite's guides, each as its own script in its own directory, in one Python process."""
    jobs = [
        (g.stem, _workdir(g, tmp_path_factory.mktemp(g.stem)), _script(g)) for g in PYTHON_GUIDES if g.stem not in SLOW
    ]
    return run_scripts(jobs, tmp_path_factory.mktemp("runner"), timeout=900 * len(jobs))


@pytest.mark.parametrize(
    "guide",
    [pytest.param(g, marks=pytest.mark.slow) if g.stem in SLOW else g for g in PYTHON_GUIDES],
    ids=lambda p: p.stem,
)
def test_guide_python_blocks_run(guide, tmp_path, request):
    assert _script(guide).count("--- block") == guide.read_text().count("```python"), "a block was not extracted"
    if guide.stem in SLOW:  # alone in its own process
        run([sys.executable, "-c", _script(guide)], cwd=_workdir(guide, tmp_path), timeout=900)
    else:
        check(request.getfixturevalue("default_guides_ran")[guide.stem], guide.name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNNABLE_SHELL))
def test_guide_shell_block_runs(name, tmp_path):
    (block,) = [code for lang, code in code_blocks(ROOT / "docs" / "guides" / name) if RUNNABLE_SHELL[name] in code]
    run(block, cwd=tmp_path, shell=True, timeout=900)
