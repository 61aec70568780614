"""Splits the CPU into 2 logical devices at import time, before anything initializes TensorFlow: this directory
runs in its own pytest process (tests/test_distribute.py starts it with KPPO_REPLICATED=1; the main run skips it)."""

import gc

import pytest

from kppo._tf import tf

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


@pytest.fixture(autouse=True)
def collect_garbage():
    """The test's runners, strategies and traced functions sit in reference cycles; left for later, they slow every
    later test's tracing (measured: test_mirrored.py 63 s without this, 48 s with it)."""
    yield
    gc.collect()
