"""Shared fixtures: `variant` runs a pure function eagerly, under tf.function, and under XLA (rlax's all_variants)."""

import pytest

from kppo._tf import tf


@pytest.fixture(params=["eager", "graph", "xla"])
def variant(request):
    def wrap(fn):
        if request.param == "eager":
            return fn
        return tf.function(fn, jit_compile=request.param == "xla")

    return wrap
