"""The one harness of the benchmark scripts: the machine header above a table, the side-by-side table, the JSON record.

Every script in this folder imports it (`import harness`: a script runs with this folder as `sys.path[0]`) and
prints `machine_header()` above its Markdown table, so each table on a page of `docs/benchmarks/` carries the same
facts: date, CPU model, load average, the versions of kppo's stack and of the peers installed, and the command that
re-creates it.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

#: kppo's own stack, always named in the header.
STACK = ("tensorflow", "keras", "gymnasium", "kppo")
#: The frameworks kppo is measured against, named where installed (or reported by a peer interpreter's worker).
PEERS = ("stable-baselines3", "sb3-contrib", "torch", "rejax", "jax")


def cpu_model() -> str:
    """The "model name" line of /proc/cpuinfo (else the platform's processor string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> tuple[float, float, float] | None:
    """The 1-, 5- and 15-minute load averages, or None where the platform has none."""
    return os.getloadavg() if hasattr(os, "getloadavg") else None


def package_versions(*names: str) -> dict[str, str]:
    """The installed version of each distribution in `names` that is installed."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def versions(*extra: str) -> dict[str, str]:
    """Versions of kppo's stack, of the peers installed in this interpreter and of `extra` (where installed)."""
    return package_versions(*STACK, *PEERS, *extra)


def command() -> str:
    """The command line that ran this script, from the repository root: `python benchmarks/<script>.py ...`."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path(__file__).resolve().parents[1])
    except ValueError:
        pass
    return shlex.join(["python", str(script), *sys.argv[1:]])


def machine() -> dict:
    """The facts of `machine_header` as a dict (for a JSON record): date, cpu, cores, load_average, versions."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average": load_average(),
        "versions": versions(),
        "command": command(),
    }


def machine_header(peer_versions: Mapping[str, str] | None = None, *extra: str) -> str:
    """Two Markdown lines to print above a table: date, CPU model, cores, load average, versions; then the command.

    Args:
        peer_versions: versions a worker in another interpreter reported (SB3, torch, rejax), merged over this
            interpreter's.
        *extra: more distributions to name where installed (`"optuna"`, `"ale-py"`).

    Returns:
        `"2026-12-06 20:00 UTC, AMD EPYC 7B13 (2 CPUs), load average 1.02 / 0.98 / 0.90; tensorflow 2.21.0, ...\\n"
        "`python benchmarks/cartpole.py --repeats 3`"`.
    """
    load = load_average()
    load_text = "load average " + " / ".join(f"{x:.2f}" for x in load) if load else "load average n/a"
    named = {**versions(*extra), **(peer_versions or {})}
    names = [n for n in (*STACK, *PEERS, *extra) if n in named] + sorted(set(named) - {*STACK, *PEERS, *extra})
    listed = ", ".join(f"{n} {named[n]}" for n in names)
    return (
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {cpu_model()} ({os.cpu_count()} CPUs), {load_text}; {listed}\n"
        f"`{command()}`"
    )


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A Markdown table: `header`, then one line per row (cells through `str`).

    Args:
        header: the column headings.
        rows: the cells of each row.
        align: one character a column, `l` (`---`) or `r` (`--:`); all `---` when None.
    """
    rule = ["--:" if a == "r" else "---" for a in (align or "l" * len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def number(value: object, digits: int = 2) -> str:
    """`value` as a table cell: floats with thousands separators and `digits` decimals, None and NaN as `n/a`."""
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


#: One column of `side_by_side`: heading, the row's key, and how to write its value (digits, or a function).
Column = tuple[str, str] | tuple[str, str, int | Callable[[object], str]]


def side_by_side(
    rows: Sequence[Mapping[str, object]],
    columns: Sequence[Column],
    ratios: Sequence[tuple[str, str]] = (),
    reference: int = 0,
) -> str:
    """The side-by-side table: one row per framework (or variant), and the reference row's value over each row's.

    Args:
        rows: one mapping a row, measured in the same run on the same machine.
        columns: `(heading, key)` or `(heading, key, digits or formatter)` for each column.
        ratios: `(heading, key)`: a column of `rows[reference][key] / row[key]` (so 1.00 in the reference row;
            for a time, below 1 means the reference is faster; for a rate, above 1).
        reference: the index of the row the ratios are taken against (kppo's, usually the first).

    Returns:
        The Markdown table; a ratio with a missing or zero value reads `n/a`.
    """
    base = rows[reference] if rows else {}

    def cell(row: Mapping[str, object], column: Column) -> str:
        value = row.get(column[1])
        how = column[2] if len(column) == 3 else 2
        return how(value) if callable(how) else number(value, how)

    def ratio(row: Mapping[str, object], key: str) -> str:
        mine, theirs = base.get(key), row.get(key)
        if not isinstance(mine, int | float) or not isinstance(theirs, int | float) or not theirs:
            return "n/a"
        return f"{mine / theirs:.2f}"

    header = [c[0] for c in columns] + [heading for heading, _ in ratios]
    body = [[cell(row, c) for c in columns] + [ratio(row, key) for _, key in ratios] for row in rows]
    return markdown_table(header, body)


def run_record(**fields: object) -> dict:
    """The header of a benchmark's JSON record: `machine()` (date, CPU, cores, load average at the start, versions,
    command), then `fields`; `finish_record` adds the load average at the end and writes it."""
    facts = machine()
    return {
        "date": facts["date"],
        "cpu": facts["cpu"],
        "cores": facts["cores"],
        "load_average_start": facts["load_average"],
        "command": facts["command"],
        **fields,
    }


def finish_record(record: dict, path: str | None) -> None:
    """Adds the load average at the end; writes `record` as JSON to `path` (its folder made) when one is given."""
    record["load_average_end"] = load_average()
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
