"""Import TensorFlow once, without the CUDA/oneDNN start-up noise on CPU-only hosts.

TensorFlow's C++ runtime writes "Could not find cuda drivers", "oneDNN custom operations are on" and
absl pre-init warnings straight to file descriptor 2 while it loads, before `TF_CPP_MIN_LOG_LEVEL` is read
by absl. We capture fd 2 during the import and replay every line that is not one of those known notices,
so real import errors stay visible. Set `KPPO_TF_VERBOSE=1` to see everything.

A population's trace logs, per stateless random op, that `tf.vectorized_map` runs it as a loop over the members: the
design (`kppo.training.runners.population`), not a problem, so TensorFlow's Python logger drops those lines too.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

_NOISE = (
    "All log messages before absl::InitializeLog()",
    "oneDNN custom operations are on",
    "Could not find cuda drivers",
    "failed call to cuInit",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "computation placer already registered",
    "TF-TRT Warning",
    "This TensorFlow binary is optimized to use available CPU instructions",
    "To enable the following instructions",
)


_PFOR_LOOP = "Using a while_loop for converting Stateless"


class _DropPforLoopNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_PFOR_LOOP)


def _is_noise(line: str) -> bool:
    return any(marker in line for marker in _NOISE)


def _import_quietly():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ.get("KPPO_TF_VERBOSE") or "tensorflow" in sys.modules:
        import tensorflow as tf_module

        return tf_module
    sys.stderr.flush()
    saved_fd = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf_module

            # The first device query triggers the CUDA probe; do it while fd 2 is captured.
            tf_module.config.list_physical_devices()
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines():
                if line.strip() and not _is_noise(line):
                    print(line, file=sys.stderr)
    return tf_module


tf = _import_quietly()
if not os.environ.get("KPPO_TF_VERBOSE"):
    tf.get_logger().addFilter(_DropPforLoopNotices())
