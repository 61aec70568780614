"""Docstrings and comments under `kppo/` say what the code does and why, never when or on which machine
(STYLE.md section 7, issue 53 item 6): no date, machine name, commit hash or timing figure in a docstring, an
attribute docstring, a comment or an option's help string. A measurement that chose a default lives on its benchmark
page under `docs/benchmarks/`, and the docstring names the page."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kppo"

#: A number as a figure is written: "140", "1,024", "0.15" (not the tail of a longer word or number).
_NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?"

#: What a lab note looks like, by kind. Each pattern is tried on one docstring, comment or help string at a time.
DETECTORS: dict[str, re.Pattern[str]] = {
    "date": re.compile(
        r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b"
        r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? (?:19|20)\d\d\b"
    ),
    "machine": re.compile(
        r"\b(?:EPYC|Xeon|Ryzen|Threadripper|Graviton|Neoverse|Intel|AMD|GeForce|Quadro)\b"
        r"|\bZen ?[1-5]\b|\bApple M[1-9]\b|\bCore i[3579]\b|\bRTX ?\d{3,4}\b|\b[AHVLP]100\b|\bH200\b|\bA10G?\b"
        r"|\b\d+[- ](?:logical )?(?:CPU )?cores?\b|\b\d+ (?:logical )?v?CPUs\b|\bthese CPUs\b"
    ),
    "commit": re.compile(r"(?<![\w.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "timing": re.compile(
        rf"{_NUMBER} ?(?:ns|µs|us|ms|sec|seconds?|minutes?)\b|{_NUMBER} s\b|(?<![\w.])\d+\.\d+s\b"
        rf"|{_NUMBER} ?[x×] (?:faster|slower|quicker|as fast|as slow)\b"
    ),
}

#: Hex words of 7 to 40 characters that are not commit hashes (none yet: add a constant here with the reason).
KNOWN_HEX: frozenset[str] = frozenset()


def lab_notes(text: str) -> list[tuple[str, re.Match[str]]]:
    """Every (kind, match) of `DETECTORS` in `text`, in order of position."""
    found = []
    for kind, pattern in DETECTORS.items():
        for match in pattern.finditer(text):
            if kind == "commit" and match.group().lower() in KNOWN_HEX:
                continue
            found.append((kind, match))
    return sorted(found, key=lambda item: item[1].start())


def _help_strings(tree: ast.AST) -> list[ast.Constant]:
    """Option help strings (kppo/config/options.py): the doc argument of `_f(default, doc)` and of
    `metadata={"doc": doc}`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_f":
            found += [arg for arg in node.args[1:2] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "doc" and isinstance(value, ast.Constant):
                    found += [value] if isinstance(value.value, str) else []
    return found


def prose(source: str) -> list[tuple[int, str]]:
    """(first line, text) of every docstring, attribute docstring (a bare string statement), comment (`#` and `#:`) and
    option help string in a module's `source`. A string's text is its value; a comment's text starts after `#`."""
    tree = ast.parse(source)
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    ]
    found = [(node.lineno, node.value) for node in strings + _help_strings(tree)]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string.lstrip("#:").strip()))
    return sorted(found)


#: Adjacent string literals (`"47 "` then `"ms"` on the next line), joined before a module's quick check.
_ADJACENT = re.compile(r"""["']\s+[rbfu]{0,2}["']""", re.IGNORECASE)


def problems(path: Path, source: str) -> list[str]:
    """`path:line kind 'match': source line` for every lab note in the module's prose. A module whose whole text has
    no lab note (its prose is part of it) is not parsed: most are clean, and tokenizing them all would take seconds."""
    if not lab_notes(_ADJACENT.sub("", source)):
        return []
    lines = source.splitlines()
    out = []
    for first, text in prose(source):
        for kind, match in lab_notes(text):
            line = first + text.count("\n", 0, match.start())
            # adjacent literals are one string whose text has no newline: the hit's line is the next one showing it
            line += next((i for i, shown in enumerate(lines[line - 1 : line + 19]) if match.group() in shown), 0)
            shown = lines[line - 1].strip() if line <= len(lines) else ""
            out.append(f"{path}:{line} {kind} {match.group()!r}: {shown}")
    return out


def test_no_lab_notes_in_docstrings_or_comments():
    """Lists every hit of the whole package, so one run shows each owner what is left."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += problems(path.relative_to(ROOT), path.read_text(encoding="utf-8"))
    assert not found, (
        "a date, machine name, commit hash or timing figure in kppo's docstrings or comments: move the measurement to "
        "its page under docs/benchmarks/ and name the page instead (STYLE.md section 7):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("date", "an iteration took 46 ms (2026-12-06)"),
        ("date", "measured on Dec 6, 2026"),
        ("machine", "on an AMD EPYC 7B13"),
        ("machine", "Intel Xeon Platinum"),
        ("machine", "Zen 3 cores"),
        ("machine", "Zen4"),
        ("machine", "an Apple M1 laptop"),
        ("machine", "one H100"),
        ("machine", "on a 2-core CPU"),
        ("machine", "measured on 2 logical CPU cores"),
        ("machine", "on 2 logical CPUs"),
        ("machine", "KVM, 2 vCPUs"),
        ("commit", "since a1c8b8a the sort is faster"),
        ("commit", "fixed in 385e7eb0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6"),
        ("timing", "a call costs ~140 us"),
        ("timing", "0.3-0.8 ms whatever it computes"),
        ("timing", "10 µs in numpy"),
        ("timing", "+7.5 s for two replicas"),
        ("timing", "in 2.8s instead of 4.9s"),
        ("timing", "about 12 seconds"),
        ("timing", "15x faster than the strided copy"),
        ("timing", "1.4x slower at 8 envs"),
    ],
)
def test_each_detector_catches_a_planted_lab_note(kind, text):
    assert kind in [found for found, _ in lab_notes(text)], text


@pytest.mark.parametrize(
    "text",
    [
        "casts to tf.float32 and tf.int64",
        "a 2x64 MLP's forward pass",
        "max_grad_norm 0.5, clip_range 0.2",
        "an observation of shape [84, 84, 4], 4 frames stacked",
        "the mask 0xff00ff00ff and 0x7fffffff",
        "a sha256 digest is compared, not printed",
        "uint8 pixels, float16 weights, int8 quantization",
        "NatureCNN's 9.4M parameters, 1e-5 epsilon, 3e-4 learning rate",
        "a mask of 1s for done envs, the 1990s",
        "the 1000s of members and 2x2 pooling",
        "let us step 4 envs; 8 members use one core each; 2 CPU replicas",
        "Atari's 108000 frames, v5 ids, MinAtar's 10x10 grid, decades of 1990s papers",
        "amd64 and arm64 wheels; TPU v3-8 devices",
    ],
)
def test_detectors_leave_ordinary_text_alone(text):
    assert lab_notes(text) == [], text


def test_prose_reads_docstrings_comments_and_help_strings():
    source = (
        '"""Module docstring 2026-12-06."""\n'
        "x = 1  # 3 ms a call\n"
        '"""Attribute docstring on an EPYC."""\n'
        "#: attribute comment since a1c8b8a\n"
        "def f():\n"
        '    """Line one.\n\n    Line three: 15x faster."""\n'
        "    return 'a string 4 ms, not prose'\n"
        'y = _f(0.5, "help: "\n        "one second is 1 s")\n'
    )
    found = problems(Path("m.py"), source)
    assert [line.split(" ")[:2] for line in found] == [
        ["m.py:1", "date"],
        ["m.py:2", "timing"],
        ["m.py:3", "machine"],
        ["m.py:4", "commit"],
        ["m.py:8", "timing"],
        ["m.py:11", "timing"],
    ], found
