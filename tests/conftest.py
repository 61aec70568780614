"""Shared fixtures: `variant` runs a pure function eagerly, under tf.function, and under XLA (rlax's all_variants);
`pfor_conversions` lists the function bodies tf.vectorized_map converts; `schedule_spy` makes the PPO loss report
the clip range and entropy coefficient it used.

tests/replicated needs 2 logical CPU devices, configured before TensorFlow initializes, so it runs only in its own
process: tests/test_distribute.py starts `python -m pytest tests/replicated/...` with KPPO_REPLICATED=1."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# XLA's compile cache (kppo._tf) in one folder per test session, shared by its xdist workers and the processes the
# tests start, bounded, and removed when the session ends: the tests never touch the user's ~/.cache/kppo.
_SESSION = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
COMPILE_CACHE = Path(tempfile.gettempdir()) / f"kppo-test-compile-cache-{_SESSION}"
os.environ.setdefault("KPPO_COMPILE_CACHE", str(COMPILE_CACHE))
os.environ.setdefault("KPPO_COMPILE_CACHE_MB", "512")

from kppo._tf import tf  # noqa: E402 - after the cache is set


def pytest_sessionfinish(session):
    # the controller (or a run without xdist), after its workers; a nested session leaves its parent's folder
    if "PYTEST_XDIST_WORKER" not in os.environ and os.environ.get("KPPO_COMPILE_CACHE") == str(COMPILE_CACHE):
        shutil.rmtree(COMPILE_CACHE, ignore_errors=True)


#: The test files that take longest, longest first (per-file test-seconds of the default suite). The suite runs
#: them first, so that its two xdist workers finish together instead of one waiting on a long file left for the end
#: (pytest-xdist's `--dist loadfile` hands out files in collection order with `--no-loadscope-reorder`). A stale
#: list only costs time.
LONGEST_FIRST = (
    "tests/exporter/test_artifact.py",
    "tests/docs/test_readme.py",
    "tests/training/test_recurrent.py",
    "tests/core/test_distribute.py",
    "tests/sb3/test_recurrent_ppo.py",
    "tests/cli/test_main.py",
    "tests/training/test_capabilities.py",
    "tests/sb3/test_sb3_saves.py",
    "tests/docs/test_guides.py",
    "tests/test_deployment_kit.py",
    "tests/tuning/test_workers.py",
    "tests/envs/test_minatar.py",
    "tests/training/runners/test_population.py",
    "tests/training/test_train.py",
    "tests/training/runners/test_host_population.py",
    "tests/docs/test_site.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


collect_ignore = [] if os.environ.get("KPPO_REPLICATED") == "1" else ["replicated"]


@pytest.fixture(params=["eager", "graph", "xla"])
def variant(request):
    def wrap(fn):
        if request.param == "eager":
            return fn
        return tf.function(fn, jit_compile=request.param == "xla")

    return wrap


@pytest.fixture
def pfor_conversions(monkeypatch):
    """The names of the functions (loop bodies and conditions) that tf.vectorized_map (pfor) converts while the test
    traces, one entry per conversion."""
    from tensorflow.python.ops.parallel_for import pfor

    converted = []
    convert = pfor._convert_function_call
    monkeypatch.setattr(
        pfor, "_convert_function_call", lambda func, *args: converted.append(func.name) or convert(func, *args)
    )
    return converted


@pytest.fixture
def schedule_spy(monkeypatch):
    """Every PPO loss reports the clip range it was computed with as its clip_fraction and its entropy coefficient as
    its approx_kl, so an iteration's `Diagnostics.clip_fraction` and `approx_kl` (means over its minibatches) are the
    scheduled values its update used."""
    from kppo.core import losses

    ppo_loss = losses.ppo_loss

    def spy(*args, clip_range, ent_coef, **kwargs):
        loss, info = ppo_loss(*args, clip_range=clip_range, ent_coef=ent_coef, **kwargs)
        clip, ent = (tf.zeros_like(info.clip_fraction) + tf.cast(x, tf.float32) for x in (clip_range, ent_coef))
        return loss, info._replace(clip_fraction=clip, approx_kl=ent)

    monkeypatch.setattr(losses, "ppo_loss", spy)
