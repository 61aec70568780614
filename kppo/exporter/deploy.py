"""Export with a quality report and a verdict (`export_checked`), or the best artifact within a device budget
(`export_within_budget`): what `kppo export` and the export at the end of `kppo train` run.

`export_checked` writes the artifact, then its report (`kppo.exporter.report`) beside it; a degraded artifact (its
closed-loop mean return below the float policy's by more than max(2% of |float mean|, the float mean's 95%
half-width)) is kept under a `.rejected` name (`policy.tflite` -> `policy.tflite.rejected`, with its metadata and
report) and `DegradedError` says why, unless `accept_degraded`.

`export_within_budget` exports every TFLite precision (float32, float16, dynamic and, with calibration data, int8:
for int8 the float precisions are its fallbacks), reports each, and writes the best-return candidate that fits
(`kppo.exporter.budget`), its report holding every candidate as a Pareto table; when none fits nothing is written
and the error names the closest candidate's numbers.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple
from collections.abc import Callable

from kppo.exporter.artifact import Exported, export, resolve_source
from kppo.exporter.budget import Budget, budget_text, candidate_table, choose
from kppo.exporter.report import REPORT_EPISODES, make_report, report_path, write_report

CANDIDATES = (None, "float16", "dynamic", "int8")  # the precisions a budget tries, best-return first on a tie


class DegradedError(ValueError):
    """The artifact's closed-loop return is below the float policy's by more than the margin."""


class Checked(NamedTuple):
    exported: Exported
    report: dict[str, Any]
    report_path: Path


def report_env(source: Any, env: Any) -> Any:
    """The env the report plays in: `env` when given, else the training config's env (None without one)."""
    if env is not None:
        return env
    return (resolve_source(source)[2] or {}).get("env")


def _companions(path: Path) -> list[Path]:
    """The artifact, its metadata and its report."""
    return [path, path.with_name(path.name + ".metadata.json"), report_path(path)]


def _move(source: Path, target: Path) -> None:
    """Renames `source` to `target`, replacing a file or a directory there."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    os.replace(source, target)


def reject(path: Path) -> Path:
    """Moves the artifact, its metadata and its report to `<name>.rejected` names; returns the artifact's."""
    rejected = path.with_name(path.name + ".rejected")
    for old, new in zip(_companions(path), _companions(rejected)):
        if old.exists():
            _move(old, new)
    return rejected


def verdict(report: dict[str, Any], path: Path, accept_degraded: bool) -> None:
    """Raises `DegradedError` (the artifact moved to its `.rejected` name) for a degraded artifact, unless
    `accept_degraded`."""
    loop = report["closed_loop"]
    if loop is None or not loop["degraded"] or accept_degraded:
        return
    rejected = reject(path)
    f = loop["float"]
    where = loop.get("degraded_in") or ["the artifact"]
    a = loop["artifact"] if where[0] != "TFLite Micro" else report["tflite_micro"]["closed_loop"]["artifact"]
    raise DegradedError(
        f"export: expected {path.name}'s closed-loop return within max(2%, the float 95% half-width) of the float "
        f"policy's {f['mean']:.2f} +- {f['half_width']:.2f} (at least {loop['threshold']:.2f}), got "
        f"{a['mean']:.2f} +- {a['half_width']:.2f} in {where[0]} over {loop['episodes']} episodes of "
        f"{loop['env']}; kept as {rejected.name} (--accept-degraded writes it anyway)"
    )


def export_checked(
    source: Any,
    path: Path,
    env: Any = None,
    episodes: int = REPORT_EPISODES,
    accept_degraded: bool = False,
    export_fn: Callable[..., Exported] = export,
    micro_loop: bool = True,
    **export_args: Any,
) -> Checked:
    """`export_fn(source, path, **export_args)`, then its report in `env` (default: the training config's env;
    see the module docstring); `micro_loop`: `make_report`'s."""
    exported = export_fn(source, path, **export_args)
    policy, env = resolve_source(source)[0], report_env(source, env)
    report = make_report(exported.path, policy, exported.metadata, env, episodes, micro_loop=micro_loop)
    report["parity_max_error"] = exported.metadata["parity"]["max_error"]
    written = write_report(report, exported.path)
    verdict(report, exported.path, accept_degraded)
    return Checked(exported, report, written)


def export_within_budget(
    source: Any,
    path: Path,
    budget: Budget,
    env: Any = None,
    episodes: int = REPORT_EPISODES,
    accept_degraded: bool = False,
    export_fn: Callable[..., Exported] = export,
    calibration: dict | None = None,
    **export_args: Any,
) -> Checked:
    """The best-return TFLite artifact within `budget` at `path` (see the module docstring). `calibration`: int8's
    calibration arguments (`representative_obs` or `calibration_env`); int8 is tried with them, or with the
    training config's env, and left out (said in the table) when neither works."""
    policy: Any = None
    staging = Path(tempfile.mkdtemp(prefix=".kppo_budget_", dir=path.parent))
    try:
        candidates: list[tuple[Exported, dict]] = []
        skipped: list[dict] = []
        for quantize in CANDIDATES:
            target = staging / (quantize or "float32") / path.name
            target.parent.mkdir()
            extra = (calibration or {}) if quantize == "int8" else {}
            try:
                exported = export_fn(source, target, format="tflite", quantize=quantize, **extra, **export_args)
            except ValueError as error:  # int8 without calibration data
                if quantize != "int8":
                    raise
                skipped.append({"quantization": "int8", "reason": " ".join(str(error).split())})
                continue
            if not candidates:  # after the first export: a source it refuses is refused first
                policy, env = resolve_source(source)[0], report_env(source, env)
            report = make_report(exported.path, policy, exported.metadata, env, episodes)
            report["parity_max_error"] = exported.metadata["parity"]["max_error"]
            candidates.append((exported, report))
        reports = [report for _, report in candidates]
        chosen = choose(reports, budget)
        exported, report = candidates[chosen]
        report["budget"] = {
            "limits": budget_text(budget),
            "candidates": candidate_table(reports, budget, chosen),
            "not_tried": skipped,
        }
        for old, new in zip(_companions(exported.path)[:2], _companions(path)[:2]):
            _move(old, new)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    moved = Exported(path, path.with_name(path.name + ".metadata.json"), exported.metadata)
    written = write_report(report, path)
    verdict(report, path, accept_degraded)
    return Checked(moved, report, written)
