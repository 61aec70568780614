"""Shared fixtures: `variant` runs a pure function eagerly, under tf.function, and under XLA (rlax's all_variants).

tests/replicated needs 2 logical CPU devices, configured before TensorFlow initializes, so it runs only in its own
process: tests/test_distribute.py starts `python -m pytest tests/replicated/...` with KPPO_REPLICATED=1."""

import os

import pytest

from kppo._tf import tf

collect_ignore = [] if os.environ.get("KPPO_REPLICATED") == "1" else ["replicated"]


@pytest.fixture(params=["eager", "graph", "xla"])
def variant(request):
    def wrap(fn):
        if request.param == "eager":
            return fn
        return tf.function(fn, jit_compile=request.param == "xla")

    return wrap
