"""The two wheels work on their own: `kppo` (the trainer, with TensorFlow) and `kppo-runtime` (the deployment kit in
export/, numpy + LiteRT only), each built with `python -m build --wheel` and installed with pip into a fresh virtualenv.

Every command runs in a temporary directory outside the checkout with PYTHONPATH unset, so only the installed files
can be imported. Slow (TensorFlow's install and one short training run): run it with

    python -m pytest -m install tests/test_install.py -n 0
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
# What a fresh clone would not hold (.gitignore): not copied into the build trees.
NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "runs",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    "bench_out",
    "MUJOCO_LOG.TXT",
)
PENDULUM_ROLLOUT = 16 * 256  # configs/pendulum.yaml: num_envs x num_steps, one training iteration
NUMBER = r"-?\d+(?:\.\d+)?"


def _env() -> dict:
    """The subprocesses' environment: this one without PYTHONPATH, PYTHONHOME or the outer virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", TF_CPP_MIN_LOG_LEVEL="2")
    return env


def _run(cmd: list, cwd: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `cmd` in `cwd` (never the checkout); with `check`, fails with the end of its stderr unless it exits 0."""
    assert not Path(cwd).resolve().is_relative_to(ROOT), f"{cwd} lies inside the checkout"
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    if check:
        assert out.returncode == 0, f"{' '.join(map(str, cmd))} exited {out.returncode}:\n{out.stderr[-2000:]}"
    return out


def _venv(path: Path) -> Path:
    """A fresh virtualenv at `path`, made by the base interpreter (not nested in the one running pytest); its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", path], cwd=path.parent, timeout=300)
    return path / "bin" / "python"


def _pip_install(python: Path, requirement: str) -> None:
    _run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", requirement],
        cwd=python.parents[2],
        timeout=1800,
    )


def _build_wheel(source: Path, out: Path) -> Path:
    """`python -m build --wheel` of a copy of `source` (no stale build/ or egg-info of the checkout); the wheel."""
    tree = out / "src"
    shutil.copytree(source, tree, ignore=NOT_SOURCE)
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", out, tree], cwd=out, timeout=900)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict:
    """Both wheels, built from the repository root (kppo) and from export/ (kppo-runtime)."""
    kppo = _build_wheel(ROOT, tmp_path_factory.mktemp("kppo_wheel"))
    runtime = _build_wheel(ROOT / "export", tmp_path_factory.mktemp("runtime_wheel"))
    assert kppo.name.startswith("kppo-"), kppo.name
    assert runtime.name.startswith("kppo_runtime-"), runtime.name
    return {"kppo": kppo, "runtime": runtime}


@pytest.fixture(scope="module")
def kppo_venv(wheels, tmp_path_factory) -> Path:
    """A fresh virtualenv with the kppo wheel (and so TensorFlow) installed; its python."""
    python = _venv(tmp_path_factory.mktemp("kppo_venv") / "venv")
    _pip_install(python, str(wheels["kppo"]))
    return python


@pytest.fixture(scope="module")
def run_dir(kppo_venv, tmp_path_factory) -> Path:
    """`kppo train pendulum` for one iteration in the kppo virtualenv; its run directory (exported by default)."""
    work = tmp_path_factory.mktemp("kppo_work")
    out = _run(
        [
            kppo_venv.parent / "kppo",
            "train",
            "pendulum",
            "--set",
            f"total_timesteps={PENDULUM_ROLLOUT}",
            "--out",
            work / "run",
            "--quiet",
        ],
        cwd=work,
        timeout=900,
    )
    assert "Pendulum-v1: final eval" in out.stdout, out.stdout[-2000:]
    return work / "run"


@pytest.fixture(scope="module")
def runtime_venv(wheels, tmp_path_factory) -> Path:
    """A fresh virtualenv with only the kppo-runtime wheel and its `eval` extra (gymnasium); its python."""
    python = _venv(tmp_path_factory.mktemp("runtime_venv") / "venv")
    _pip_install(python, f"{wheels['runtime']}[eval]")
    return python


def _module_file(python: Path, module: str, cwd: Path) -> Path:
    out = _run([python, "-c", f"import {module}; print({module}.__file__)"], cwd=cwd)
    return Path(out.stdout.strip().splitlines()[-1]).resolve()


def test_kppo_wheel_imports_from_its_venv(kppo_venv, tmp_path):
    """The installed `kppo` command starts, and `import kppo` finds the venv's copy, not the checkout."""
    venv = kppo_venv.parents[1].resolve()
    assert _module_file(kppo_venv, "kppo", tmp_path).is_relative_to(venv)
    out = _run([kppo_venv.parent / "kppo", "--help"], cwd=tmp_path)
    assert "train" in out.stdout and "export" in out.stdout, out.stdout
    out = _run([kppo_venv.parent / "kppo", "train", "--help"], cwd=tmp_path)
    assert "total_timesteps" in out.stdout, out.stdout[-2000:]


def test_kppo_wheel_trains_and_exports(run_dir):
    """`kppo train pendulum` from the wheel (its config shipped as kppo/configs/pendulum.yaml) writes a run directory
    with the trained agent and the exported policy.tflite + metadata."""
    for name in ("config.yaml", "agent", "metrics.csv", "summary.json", "policy.tflite", "policy.tflite.metadata.json"):
        assert (run_dir / name).exists(), f"{name} missing from {sorted(p.name for p in run_dir.iterdir())}"
    assert (run_dir / "policy.tflite").stat().st_size > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total_steps"] == PENDULUM_ROLLOUT, summary
    metadata = json.loads((run_dir / "policy.tflite.metadata.json").read_text())
    assert metadata["training_config"]["env"] == "Pendulum-v1"


def test_kppo_export_command(kppo_venv, run_dir, tmp_path):
    """`kppo export RUN_DIR` of the installed package writes another artifact and reports its parity."""
    out = _run(
        [
            kppo_venv.parent / "kppo",
            "export",
            run_dir,
            "--quantize",
            "dynamic",
            "--out",
            tmp_path / "policy_dynamic.tflite",
        ],
        cwd=tmp_path,
        timeout=600,
    )
    assert (tmp_path / "policy_dynamic.tflite").stat().st_size > 0
    assert "parity max error" in out.stdout, out.stdout[-2000:]


def test_runtime_wheel_needs_no_tensorflow(runtime_venv, tmp_path):
    """The kppo-runtime venv holds neither TensorFlow nor kppo, and imports kppo_runtime from itself."""
    venv = runtime_venv.parents[1].resolve()
    assert _module_file(runtime_venv, "kppo_runtime", tmp_path).is_relative_to(venv)
    for module in ("tensorflow", "kppo"):
        out = _run([runtime_venv, "-c", f"import {module}"], cwd=tmp_path, check=False)
        assert out.returncode != 0 and "ModuleNotFoundError" in out.stderr, f"import {module}: {out.stderr[-2000:]}"


def test_runtime_evaluates_the_artifact(runtime_venv, run_dir, tmp_path):
    """`kppo-evaluate` plays episodes of the kppo-trained artifact on Pendulum-v1 without TensorFlow."""
    episodes = 2
    out = _run(
        [
            runtime_venv.parent / "kppo-evaluate",
            run_dir / "policy.tflite",
            "--env",
            "Pendulum-v1",
            "--episodes",
            episodes,
            "--seed",
            0,
        ],
        cwd=tmp_path,
    )
    match = re.search(rf"Pendulum-v1: ({NUMBER}) \+- ({NUMBER}) over (\d+) episodes", out.stdout)
    assert match, out.stdout[-2000:]
    mean, std, count = float(match[1]), float(match[2]), int(match[3])
    assert count == episodes
    assert -3300 < mean <= 0 and std >= 0, out.stdout  # a Pendulum-v1 episode: 200 steps of reward in [-16.3, 0]


def test_runtime_measures_latency(runtime_venv, run_dir, tmp_path):
    """`kppo-latency` times single-observation calls of the artifact: positive and well under a millisecond-scale
    bound for a 2x64 MLP."""
    out = _run([runtime_venv.parent / "kppo-latency", run_dir / "policy.tflite", "--calls", 1000], cwd=tmp_path)
    match = re.search(rf"median ({NUMBER}) us per invoke .* ({NUMBER}) us per act\(\)", out.stdout)
    assert match, out.stdout[-2000:]
    invoke_us, act_us = float(match[1]), float(match[2])
    assert 0 < invoke_us < 10_000 and 0 < act_us < 10_000, out.stdout
