"""mkdocs hook: the capability table (every kind of env x run x agent), generated at every build from the matrix the
tests run (tests/helpers/capabilities.py, read from its source, not imported), as the page `reference/capabilities.md`
and on the home page in place of `TABLE_MARKER`.

Each ticked cell is a test that trains a short run and checks what must be true of it
(tests/training/test_capabilities.py, tests/replicated/test_capabilities.py). The functions are plain (no mkdocs
objects) so that `tests/docs` can call them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "tests" / "helpers" / "capabilities.py"
PAGE = "reference/capabilities.md"
TABLE_MARKER = "<!-- capability table -->"
ENV_LABELS = {"native": "TF-native", "gymnasium": "gymnasium"}
AGENT_LABELS = {"mlp": "MLP", "lstm": "LSTM", "cnn": "CNN", "masked": "masked"}
RUN_LABELS = {"single": "one run", "population": "population", "mirrored": "`tf.distribute` (mirrored)"}
TESTS = {
    "single": "tests/training/test_capabilities.py",
    "population": "tests/training/test_capabilities.py",
    "mirrored": "tests/replicated/test_capabilities.py",
}


def matrix() -> dict:
    """The module-level literals of tests/helpers/capabilities.py: ENV_KINDS, RUN_KINDS, AGENT_KINDS, CELLS."""
    names = {"ENV_KINDS", "RUN_KINDS", "AGENT_KINDS", "CELLS"}
    found = {}
    for node in ast.parse(MATRIX.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if getattr(target, "id", None) in names and node.value is not None:
            found[target.id] = ast.literal_eval(node.value)
    missing = names - set(found)
    if missing:
        raise LookupError(f"{MATRIX.relative_to(ROOT)}: expected literals {sorted(missing)}")
    return found


def capability_table() -> str:
    """The Markdown table: a row per (env kind, agent kind), a column per run kind, what each row trains on."""
    m = matrix()
    runs = m["RUN_KINDS"]
    lines = [
        "| env | agent | " + " | ".join(RUN_LABELS[r] for r in runs) + " | the tests train on |",
        "|---|---|" + "---|" * len(runs) + "---|",
    ]
    for env in m["ENV_KINDS"]:
        for agent in m["AGENT_KINDS"]:
            cells = " | ".join("✓" for _ in runs)
            lines.append(f"| {ENV_LABELS[env]} | {AGENT_LABELS[agent]} | {cells} | {m['CELLS'][(env, agent)]} |")
    return "\n".join(lines) + "\n"


def capabilities_page() -> str:
    m = matrix()
    count = len(m["ENV_KINDS"]) * len(m["RUN_KINDS"]) * len(m["AGENT_KINDS"])
    tests = ", ".join(f"`{path}`" for path in sorted(set(TESTS.values())))
    return "\n".join(
        [
            "# What runs with what",
            "",
            f"Every kind of env x every kind of run x every kind of agent: {count} cells. Generated at every build",
            "from the matrix the tests run (`tests/helpers/capabilities.py`): each ✓ is a test that trains a short",
            "run with `kppo.train` and checks that every rollout ran, every update applied gradient steps, losses and",
            "evaluations are finite, the policy acts inside its action space, an LSTM policy returns its memory, a CNN",
            "agent holds convolution kernels, a masked policy never samples a masked action, a population's members",
            f"differ and a mirrored run's replicas stay identical ({tests}; test id `env-run-agent`, e.g.",
            "`gymnasium-population-lstm`).",
            "",
            capability_table(),
            "A population is many seeds and swept values in one program ([populations](../guides/populations.md)),",
            "`tf.distribute` runs on 2 CPU devices in the tests ([several devices](../guides/distributed.md)).",
            "",
        ]
    )


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=capabilities_page()))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "index.md":
        if TABLE_MARKER not in markdown:
            raise ValueError(f"docs/index.md: expected the marker {TABLE_MARKER!r} for the capability table")
        markdown = markdown.replace(TABLE_MARKER, capability_table())
    return markdown
