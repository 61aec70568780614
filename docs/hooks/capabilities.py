"""mkdocs hook: the capability table (every kind of env x run x agent), generated at every build from the matrix the
tests run (tests/helpers/capabilities.py, read from its source, not imported), as the page `reference/capabilities.md`
and on the home page in place of `TABLE_MARKER`; below it, what is refused or not built yet (`LIMITS`), each with its
reason and a link to the guide that explains it.

Each ticked cell of the grid is a test that trains a short run and checks what must be true of it
(tests/training/test_capabilities.py, tests/replicated/test_capabilities.py); each refusal of `LIMITS` names the
start of the one-line error kppo raises, which tests/docs/test_capabilities.py finds in the source. The functions are
plain (no mkdocs objects) so that `tests/docs` can call them.
"""

from __future__ import annotations

import ast
import posixpath
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "tests" / "helpers" / "capabilities.py"
PAGE = "reference/capabilities.md"
TABLE_MARKER = "<!-- capability table -->"
ENV_LABELS = {"native": "TF-native", "gymnasium": "gymnasium"}
AGENT_LABELS = {"mlp": "MLP", "lstm": "LSTM", "cnn": "CNN", "masked": "masked"}
RUN_LABELS = {"single": "one run", "population": "population", "mirrored": "several devices"}
#: Where each run kind is explained (relative to docs/).
RUN_GUIDES = {
    "single": "guides/functional-api.md",
    "population": "guides/populations.md",
    "mirrored": "guides/distributed.md",
}
REFUSED, NOT_YET, DONE = "refused", "not yet", "✓"
#: What the grid does not show: (what, on TF-native envs, on gymnasium envs, why, the guide and anchor that explain
#: it (relative to docs/), the start of kppo's one-line error). Every refusal is a one-line error before training.
LIMITS = [
    (
        "exact resume (`resume=True`, `kppo train --resume`, Keras' `BackupAndRestore`)",
        DONE,
        REFUSED,
        "a gymnasium env's state lives in its Python objects or worker processes, which cannot be saved; "
        "checkpoints and `CheckpointCallback` still work",
        "guides/cli.md#checkpoints-and-resume",
        "resume: exact resume needs a TF-native env",
    ),
    (
        "population-based training (`kppo tune --pbt`)",
        DONE,
        REFUSED,
        "a member copies another member's env states, which a gymnasium env cannot hand over",
        "guides/tuning.md#population-based-training",
        "--pbt: needs a TF-native env",
    ),
    (
        "a population on several devices",
        NOT_YET,
        NOT_YET,
        "a population runs on one device; several processes can share a search instead",
        "guides/populations.md",
        "distribute: a population runs on one device",
    ),
    (
        "callbacks and `eval_metrics_fn` on a population",
        NOT_YET,
        NOT_YET,
        "a population trains as one compiled program; `on_eval` receives every member's metrics",
        "guides/populations.md",
        "expected None for a population",
    ),
    (
        'a GRU (`recurrent="gru"`)',
        NOT_YET,
        NOT_YET,
        "kppo's recurrent policies are LSTMs (`n_lstm_layers` stacks them)",
        "guides/recurrent-and-masks.md",
        "null or 'lstm'",
    ),
]
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


def _link(target: str, page: str) -> str:
    """`target` (relative to docs/) as a link from `page` (relative to docs/)."""
    return posixpath.relpath(target.split("#")[0], posixpath.dirname(page) or ".") + (
        "#" + target.split("#")[1] if "#" in target else ""
    )


def capability_table(page: str = "index.md") -> str:
    """The Markdown tables, linked from `page`: a row per (env kind, agent kind), a column per run kind, what each
    row trains on; then a row per limit of `LIMITS`: ✓, refused or not yet on each kind of env, and why."""
    m = matrix()
    runs = m["RUN_KINDS"]
    labels = [f"[{RUN_LABELS[r]}]({_link(RUN_GUIDES[r], page)})" for r in runs]
    lines = [
        "| env | agent | " + " | ".join(labels) + " | the tests train on |",
        "|---|---|" + "---|" * len(runs) + "---|",
    ]
    for env in m["ENV_KINDS"]:
        for agent in m["AGENT_KINDS"]:
            cells = " | ".join(DONE for _ in runs)
            lines.append(f"| {ENV_LABELS[env]} | {AGENT_LABELS[agent]} | {cells} | {m['CELLS'][(env, agent)]} |")
    lines += ["", "What the grid does not show: refused (a one-line error before training) or not yet built.", ""]
    lines += [f"| what | {ENV_LABELS['native']} | {ENV_LABELS['gymnasium']} | why |", "|---|---|---|---|"]
    for what, native, gymnasium, why, guide, _ in LIMITS:
        lines.append(f"| {what} | {native} | {gymnasium} | {why} ([more]({_link(guide, page)})) |")
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
            capability_table(PAGE),
            "A population is many seeds and swept values in one program ([populations](../guides/populations.md)).",
            "Several devices means `tf.distribute`'s mirrored strategy; the tests run it on 2 CPU devices",
            "([several devices](../guides/distributed.md)).",
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
        markdown = markdown.replace(TABLE_MARKER, capability_table("index.md"))
    return markdown
