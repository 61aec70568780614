"""`benchmarks/stats.py` loaded for tests (benchmarks/ is not a package): the permutation test of the results table."""

import importlib.util
from pathlib import Path


def load_stats():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "stats.py"
    spec = importlib.util.spec_from_file_location("_kppo_benchmark_stats", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
