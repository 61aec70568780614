"""Stable-Baselines3's and sb3-contrib's own test files, run against kppo with only their imports changed.

The test files come from the two source distributions (`pip download --no-deps --no-binary :all:
stable-baselines3==2.9.2 sb3-contrib==2.9.2`), in FOLDER, as the `.tar.gz` files pip wrote or unpacked. Each file
in `FILES` is copied to a work folder with its `stable_baselines3` / `sb3_contrib` / `torch` imports rewritten, and
nothing else:

* a name kppo has (`PPO`, `RecurrentPPO`, `MaskablePPO`, `VecNormalize`, `make_vec_env`, `check_env`, ...) is
  imported from kppo: from `kppo` where kppo exports it, else from the kppo module `KPPO_MODULES` names;
* a name kppo lacks (A2C, DQN, SAC, TD3, DDPG, the action noises, `get_device`, `save_util`'s helpers, ...) is
  imported from a generated `_not_in_kppo` module: a class of that name whose instances raise `NotInKppo` when
  used (building one succeeds, so that a module-level `NormalActionNoise(...)` still collects);
* SB3's test environments (`stable_baselines3.common.envs`, `sb3_contrib.common.envs`: plain gymnasium envs) are
  copied from the source distributions, with the same rewrite of their imports;
* `import torch as th` becomes a stand-in that raises `ModuleNotFoundError: No module named 'torch'` when a case
  touches it (kppo's venv has no torch), so that a file's other cases still run.

pytest runs each file in this interpreter (kppo's venv), one file at a time, with SB3's own pytest settings
(`filterwarnings`, markers) and a JUnit XML report. Only the PPO family runs: a case parametrized by A2C, DQN, SAC,
TD3 or DDPG, or a case that names one of them and none of PPO / RecurrentPPO / MaskablePPO, is deselected. Each case
has a time limit (`--case-timeout`, SIGALRM). The table counts per file: passed, failed, torch-only (a case that
failed and needs torch: `No module named 'torch'`, or its body calls `th.` / `torch.`), skipped, deselected. With
`--failures PATH` every failing case that is not torch-only is written there with its one-line cause, grouped by
cause. With `--baseline PYTHON` (an interpreter with torch, stable-baselines3 and sb3-contrib: `.venv-bench`) the
unchanged files also run under SB3 itself, with the same deselection, and a column counts the cases kppo fails that
fail with SB3 too (in this setup: gymnasium 1.4.0, CPU only); `--baseline-reports DIR` reads those outcomes from
the JUnit reports of an earlier `--baseline` run (`<work>/baseline/<file>.xml`) instead of running SB3 again.

Usage, from the repository root:

    .venv/bin/python benchmarks/sb3_own_tests.py /tmp/sb3src --baseline .venv-bench/bin/python \
        --failures /tmp/sb3_failures.md
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[1]

#: (distribution folder prefix, test file) in the order of the table
FILES = (
    ("stable_baselines3", "test_run.py"),
    ("stable_baselines3", "test_predict.py"),
    ("stable_baselines3", "test_save_load.py"),
    ("stable_baselines3", "test_spaces.py"),
    ("stable_baselines3", "test_cnn.py"),
    ("stable_baselines3", "test_vec_normalize.py"),
    ("stable_baselines3", "test_env_checker.py"),
    ("sb3_contrib", "test_lstm.py"),
    ("sb3_contrib", "test_invalid_actions.py"),
)
#: algorithms outside the PPO family: their cases are deselected
OTHER_ALGORITHMS = ("A2C", "DQN", "SAC", "TD3", "DDPG", "QRDQN", "TQC", "TRPO", "ARS", "CrossQ")
PPO_FAMILY = ("PPO", "RecurrentPPO", "MaskablePPO")
#: SB3 name -> the kppo module that holds it, where `kppo` itself does not export it
KPPO_MODULES = {
    "BaseAlgorithm": "kppo.sb3.base_class",
    "EventCallback": "kppo.callbacks",
    "RunningMeanStd": "kppo.sb3.running_mean_std",
    "open_path": "kppo.sb3.save_util",
    "is_image_space": "kppo.gym_envs.spaces",
    "is_image_space_channels_first": "kppo.gym_envs.spaces",
}
#: SB3 modules replaced by their copies from the source distributions (plain gymnasium test envs)
#: the names kppo lacks that the rewritten files import: name -> the SB3 module it came from
MISSING: dict[str, str] = {}
COPIED = {"stable_baselines3.common.envs": "_sb3_envs", "sb3_contrib.common.envs": "_sb3_contrib_envs"}
NOT_IN_KPPO = '''"""Names kppo lacks: a class that builds, then raises NotInKppo when used."""


class NotInKppo(NotImplementedError):
    pass


def _missing(name, where):
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        raise NotInKppo(f"kppo has no {where}.{name}")

    def __call__(self, *args, **kwargs):
        raise NotInKppo(f"kppo has no {where}.{name}")

    methods = {"__init__": __init__, "__getattr__": __getattr__, "__call__": __call__, "__module__": where}
    return type(name, (), methods)


'''
NO_TORCH = '''"""A stand-in for torch: touching it raises ModuleNotFoundError, as `import torch` does in kppo's venv."""


class _NoTorch:
    def __getattr__(self, name):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")


torch = _NoTorch()
'''
CONFTEST = '''"""Deselects the cases outside the PPO family and limits each case to LIMIT seconds."""

import inspect
import re
import signal

import pytest

OTHER = set({other!r})
FAMILY = set({family!r})
LIMIT = {limit}


def _names(item):
    try:
        return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", inspect.getsource(item.function)))
    except (OSError, TypeError):
        return set()


def _other_algorithm(item):
    params = getattr(getattr(item, "callspec", None), "params", {{}})
    named = {{getattr(value, "__name__", None) for value in params.values()}}
    if named & OTHER:
        return True
    if named & FAMILY:
        return False
    source = _names(item)
    return bool(source & OTHER) and not source & FAMILY


def pytest_collection_modifyitems(config, items):
    kept = [item for item in items if not _other_algorithm(item)]
    dropped = [item for item in items if _other_algorithm(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _alarm(signum, frame):
    raise TimeoutError(f"the case ran past {{LIMIT}} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
'''


def _kppo_has(name: str) -> str | None:
    """The kppo module to import `name` from, or None where kppo lacks it."""
    kppo = importlib.import_module("kppo")
    if name in getattr(kppo, "__all__", ()):
        return "kppo"
    module = KPPO_MODULES.get(name)
    if module is not None:
        try:
            if hasattr(importlib.import_module(module), name):
                return module
        except ImportError:
            pass
    return None


def _import_lines(node: ast.stmt, indent: str) -> list[str] | None:
    """The lines that replace an import of stable_baselines3 / sb3_contrib / torch, or None to keep it."""
    if isinstance(node, ast.Import):
        lines = []
        for alias in node.names:
            top = alias.name.split(".")[0]
            if top == "torch":
                lines.append(f"from _no_torch import torch as {alias.asname or 'torch'}")
            elif top in ("stable_baselines3", "sb3_contrib"):
                lines.append(f"import _not_in_kppo as {alias.asname or top}")
            else:
                lines.append(f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else ""))
        return [indent + line for line in lines] if lines != [ast.unparse(node)] else None
    if not isinstance(node, ast.ImportFrom) or not node.module:
        return None
    module = node.module
    top = module.split(".")[0]
    if top == "torch":
        return [indent + f"{a.asname or a.name} = __import__('_no_torch').torch" for a in node.names]
    if top not in ("stable_baselines3", "sb3_contrib"):
        return None
    for prefix, copy in COPIED.items():
        if module == prefix or module.startswith(prefix + "."):
            return [indent + ast.unparse(ast.ImportFrom(copy + module[len(prefix) :], node.names, 0))]
    by_module: dict[str, list[ast.alias]] = defaultdict(list)
    for alias in node.names:
        where = _kppo_has(alias.name)
        if where is None:
            MISSING.setdefault(alias.name, module)
            where = "_not_in_kppo"
        by_module[where].append(alias)
    return [indent + ast.unparse(ast.ImportFrom(m, names, 0)) for m, names in by_module.items()]


def rewrite_imports(source: str) -> str:
    """`source` with its SB3 / sb3-contrib / torch imports rewritten (line ranges replaced; the rest as it was)."""
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            new = _import_lines(node, " " * node.col_offset)
            if new is not None:
                edits.append((node.lineno - 1, node.end_lineno, new))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = [line + "\n" for line in new]
    return "".join(lines)


def _distributions(folder: Path, work: Path) -> dict[str, Path]:
    """{"stable_baselines3": the unpacked source tree, "sb3_contrib": ...}, unpacking `.tar.gz` files into `work`."""
    trees = {}
    for prefix in ("stable_baselines3", "sb3_contrib"):
        found = sorted(p for p in folder.glob(f"{prefix}-*") if p.is_dir() and (p / "tests").is_dir())
        if not found:
            archives = sorted(folder.glob(f"{prefix}-*.tar.gz"))
            if not archives:
                raise SystemExit(f"sb3_own_tests: expected {prefix}-<version>[.tar.gz] in {folder}")
            with tarfile.open(archives[-1]) as archive:
                archive.extractall(work / "sdists", filter="data")
            found = sorted((work / "sdists").glob(f"{prefix}-*"))
        trees[prefix] = found[-1]
    return trees


def _prepare(trees: dict[str, Path], work: Path, limit: int, files: list[tuple[str, str]]) -> None:
    """Writes the rewritten test files and test envs, the stand-ins, the conftest and SB3's pytest settings."""
    for distribution, name in files:
        (work / name).write_text(rewrite_imports((trees[distribution] / "tests" / name).read_text()))
    (work / "conftest.py").write_text(CONFTEST.format(other=OTHER_ALGORITHMS, family=PPO_FAMILY, limit=limit))
    for prefix, copy in COPIED.items():
        distribution = prefix.split(".")[0]
        source = trees[distribution] / prefix.replace(".", "/")
        target = work / copy
        target.mkdir(exist_ok=True)
        for path in source.glob("*.py"):
            (target / path.name).write_text(rewrite_imports(path.read_text()))
    stand_ins = [f"{name} = _missing({name!r}, {where!r})" for name, where in sorted(MISSING.items())]
    (work / "_not_in_kppo.py").write_text(NOT_IN_KPPO + "\n".join(stand_ins) + "\n")
    (work / "_no_torch.py").write_text(NO_TORCH)
    options = tomllib.loads((trees["stable_baselines3"] / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    lines = ["[pytest]", "filterwarnings ="] + [f"    {w}" for w in ini.get("filterwarnings", [])]
    lines += ["markers ="] + [f"    {m}" for m in ini.get("markers", [])] + ["    slow: slow"]
    (work / "pytest.ini").write_text("\n".join(lines) + "\n")


def _prepare_baseline(trees: dict[str, Path], work: Path, files: list[tuple[str, str]]) -> None:
    """The same files unchanged, for SB3 itself (`--baseline`), with the same conftest and pytest settings."""
    work.mkdir()
    for distribution, name in files:
        shutil.copy(trees[distribution] / "tests" / name, work / name)
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(work.parent / name, work / name)


def _uses_torch(tree: Path, test: str) -> bool:
    """Whether the body of test function `test` (name without parameters) in file `tree` calls torch itself."""
    for node in ast.walk(ast.parse(tree.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == test:
            return bool(re.search(r"\b(th|torch)\.", ast.unparse(node)))
    return False


def _cases(report: Path, source: Path) -> list[dict]:
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = found.get("message") or ((found.text or "").strip().splitlines() or [""])[-1]
                break
        if outcome == "failed" and (found.get("message") or "").startswith("collection failure"):
            outcome, message = "collection error", ((found.text or "").strip().splitlines() or [""])[-1]
        elif outcome == "failed":
            torch = "No module named 'torch'" in message or _uses_torch(source, name.split("[")[0])
            outcome = "torch-only" if torch else "failed"
        cases.append(dict(name=name, outcome=outcome, message=" ".join(message.split())[:300]))
    return cases


def _deselected(output: str) -> int:
    found = re.search(r"(\d+) deselected", output)
    return int(found.group(1)) if found else 0


def run_file(work: Path, source: Path, timeout: int, python: str = sys.executable, path: str = "") -> dict:
    """Runs pytest on `work/<source's name>` with `python`; the outcome of each case, as `_cases` reads them."""
    target = work / source.name
    report = work / f"{source.stem}.xml"
    report.unlink(missing_ok=True)
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rN"]
    command += [f"--junitxml={report}", "-o", "junit_family=xunit1", target.name]
    env = {**os.environ, "PYTHONPATH": path or f"{work}:{ROOT}", "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    try:
        out = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        output, timed_out = out.stdout + out.stderr, False
    except subprocess.TimeoutExpired as stopped:
        output, timed_out = str(stopped.stdout or ""), True
    seconds = time.perf_counter() - start
    cases = _cases(report, source) if report.exists() else []
    (work / f"{source.stem}.log").write_text(output)
    return dict(cases=cases, deselected=_deselected(output), seconds=seconds, timed_out=timed_out, tail=output[-2000:])


def _cause(message: str) -> str:
    """The message with numbers, paths and quoted values made generic, so that equal causes group."""
    text = re.sub(r"0x[0-9a-f]+", "0x...", message)
    text = re.sub(r"/tmp/\S+", "<path>", text)
    return text[:200]


def write_failures(path: Path, results: dict[str, dict], header: str) -> None:
    """The failing cases that are not torch-only, grouped by cause; then the torch-only ones that failed on
    something else before they reached torch."""
    groups: dict[str, list[str]] = defaultdict(list)
    early: list[str] = []
    for file, result in results.items():
        for case in result["cases"]:
            also = " (fails with SB3 itself too)" if case.get("sb3") == "failed" else ""
            if case["outcome"] == "failed":
                groups[_cause(case["message"])].append(f"{file}::{case['name']}{also}")
            elif case["outcome"] == "torch-only" and "No module named 'torch'" not in case["message"]:
                early.append(f"`{file}::{case['name']}`{also}: `{_cause(case['message'])}`")
    lines = ["# SB3's own tests on kppo: the failing cases that do not need torch, grouped by cause", "", header, ""]
    for cause, cases in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines += [f"## {len(cases)} x `{cause}`", ""] + [f"- `{c}`" for c in cases] + [""]
    if early:
        lines += ["## Torch-only cases (their body calls torch) that fail before they reach it", ""]
        lines += [f"- {c}" for c in early] + [""]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="holds stable_baselines3-<v> and sb3_contrib-<v> (.tar.gz or trees)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/sb3_own_tests"), help="where the rewritten files go")
    parser.add_argument("--files", nargs="*", help="run only these test files (names from FILES)")
    parser.add_argument("--case-timeout", type=int, default=120, help="seconds a case may run")
    parser.add_argument("--file-timeout", type=int, default=1800, help="seconds a file may run")
    parser.add_argument("--baseline", help="also run the unchanged files with this interpreter (SB3's own venv)")
    parser.add_argument(
        "--baseline-reports", type=Path, help="read SB3's outcomes from the JUnit reports an earlier --baseline wrote"
    )
    parser.add_argument("--failures", type=Path, help="write the failing non-torch cases, grouped by cause, here")
    args = parser.parse_args()
    if args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True)
    trees = _distributions(args.folder, args.work)
    files = [(d, name) for d, name in FILES if not args.files or name in args.files]
    _prepare(trees, args.work, args.case_timeout, files)
    if args.baseline:
        _prepare_baseline(trees, args.work / "baseline", files)
    results = {}
    for distribution, name in files:
        label = f"{distribution}/tests/{name}"
        source = trees[distribution] / "tests" / name
        results[label] = run_file(args.work, source, args.file_timeout)
        if args.baseline or args.baseline_reports:
            baseline = args.work / "baseline"
            if args.baseline_reports:
                sb3 = dict(cases=_cases(args.baseline_reports / f"{source.stem}.xml", source), seconds=0.0)
            else:
                python = str(Path(args.baseline).absolute())
                sb3 = run_file(baseline, source, args.file_timeout, python, str(baseline))
            outcomes = {case["name"]: case["outcome"] for case in sb3["cases"]}
            for case in results[label]["cases"]:
                case["sb3"] = "failed" if outcomes.get(case["name"]) in ("failed", "torch-only") else "passed"
            results[label]["sb3_seconds"] = sb3["seconds"]
        counts = _counts(results[label])
        print(label, counts, flush=True)
    version = {p: trees[p].name.split("-")[-1] for p in trees}
    header = harness.machine_header(
        {"stable-baselines3": f"{version['stable_baselines3']} (test files)", "sb3-contrib": version["sb3_contrib"]}
    )
    keys = (*KEYS[:3], ALSO, *KEYS[3:]) if args.baseline or args.baseline_reports else KEYS
    rows = []
    totals = defaultdict(float)
    for label, result in results.items():
        counts = _counts(result)
        for key, value in counts.items():
            totals[key] += value
        totals["seconds"] += result["seconds"]
        note = " (file ran past its limit)" if result["timed_out"] else ""
        errors = [case["message"] for case in result["cases"] if case["outcome"] == "collection error"]
        note += f" (collection error: {errors[0]})" if errors else ""
        late = sum("the case ran past" in case["message"] for case in result["cases"] if case["outcome"] == "failed")
        note += f" ({late} failed at the case time limit)" if late else ""
        rows.append([f"`{label}`{note}", *(counts[k] for k in keys), f"{result['seconds']:.0f}"])
    rows.append(["all", *(int(totals[k]) for k in keys), f"{totals['seconds']:.0f}"])
    print(header)
    print()
    print(harness.markdown_table(["file", *keys, "kppo seconds"], rows, "l" + "r" * (len(keys) + 1)))
    if args.failures:
        write_failures(args.failures, results, header)
        print(f"failures: {args.failures}")


KEYS = ("PPO-family cases", "passed", "failed", "torch-only", "skipped", "deselected")
#: the column `--baseline` adds after "failed"
ALSO = "of which fail with SB3 too"


def _counts(result: dict) -> dict[str, int]:
    outcomes = [case["outcome"] for case in result["cases"] if case["outcome"] != "collection error"]
    return {
        "PPO-family cases": len(outcomes),
        "passed": outcomes.count("passed"),
        "failed": outcomes.count("failed"),
        ALSO: sum(case["outcome"] == "failed" and case.get("sb3") == "failed" for case in result["cases"]),
        "torch-only": outcomes.count("torch-only"),
        "skipped": outcomes.count("skipped"),
        "deselected": result["deselected"],
    }


if __name__ == "__main__":
    main()
