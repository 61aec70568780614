"""A .tflite artifact run by TensorFlow Lite for Microcontrollers for closed-loop episodes (`MicroRunner`): the
interpreter lives in a child process (`python -m kppo.exporter.micro --serve`, numpy and tflite-micro only: TFLite
Micro reports some failures by crashing its process) that answers one invoke per request over its standard input
and output, as raw bytes of the model's input and output tensors (no pickle: the shapes and dtypes are the
model's own, which both sides read from it). `MicroRunner` takes and returns what `TFLiteRunner` does, so the same
closed loop (`kppo.exporter.closed_loop`) plays it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kppo.exporter.micro import ARENA, read_exactly
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS, TFLiteRunner


class MicroRunner:
    """TFLite Micro on the artifact `runner` holds: `runner(rows[, masks])` -> actions, a recurrent artifact's
    `step(rows, h, c[, masks])` -> (actions, h, c), row by row; `close()` ends the child and returns its arena
    (`arena_used_bytes`), or None when it did not run."""

    def __init__(self, runner: TFLiteRunner):
        self.litert = runner
        interpreter = runner.interpreter
        self.input_specs = [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in interpreter.get_input_details()]
        self.output_specs = [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in interpreter.get_output_details()]
        order = {d["index"]: i for i, d in enumerate(interpreter.get_input_details())}
        self.position = {name: order[d["index"]] for name, d in runner.runner.get_input_details().items()}
        out_order = {d["index"]: i for i, d in enumerate(interpreter.get_output_details())}
        outputs = runner.runner.get_output_details()
        self.out_position = {name: out_order[d["index"]] for name, d in outputs.items()}
        self.action = self.out_position["action"] if "action" in outputs else next(iter(self.out_position.values()))
        self.units = runner.units
        self._work = tempfile.TemporaryDirectory(prefix="kppo_micro_loop_")
        model = Path(self._work.name) / "model.tflite"
        model.write_bytes(runner.content)
        self._log = open(Path(self._work.name) / "log.txt", "w+b")  # read back in `close`
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kppo.exporter.micro",
                "--serve",
                str(model),
                str(len(self.input_specs)),
                str(len(self.output_specs)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            bufsize=0,
        )

    def _invoke(self, requests: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """Invokes, one per request (a row [1, ...] per model input, in position order), sent together: every
        output of each."""
        assert self.process.stdin is not None and self.process.stdout is not None
        body = b"".join(
            np.ascontiguousarray(a, dtype).tobytes()
            for arrays in requests
            for a, (_, dtype) in zip(arrays, self.input_specs)
        )
        self.process.stdin.write(np.int32(len(requests)).tobytes() + body)
        self.process.stdin.flush()
        sizes = [int(np.prod(shape)) * dtype.itemsize for shape, dtype in self.output_specs]
        data = read_exactly(self.process.stdout.fileno(), sum(sizes) * len(requests))
        if len(data) != sum(sizes) * len(requests):
            raise ValueError(f"{self.litert.name}: TFLite Micro stopped answering: {self._reason()}")
        out, start = [], 0
        for _ in requests:
            row = []
            for size, (shape, dtype) in zip(sizes, self.output_specs):
                row.append(np.frombuffer(data[start : start + size], dtype).reshape(shape))
                start += size
            out.append(row)
        return out

    def _row(self, rows, i: int, masks, h=None, c=None) -> list[np.ndarray]:
        arrays: list = [None] * len(self.input_specs)
        names = self.litert.input_names
        parts = _split_one(self.litert, rows[i : i + 1])
        for name, part in zip(names, parts):
            arrays[self.position[name]] = part
        if masks is not None:
            arrays[self.position[MASK_INPUT]] = np.asarray(masks[i : i + 1], np.float32)
        if h is not None:
            arrays[self.position[STATE_INPUTS[0]]] = h[i : i + 1]
            arrays[self.position[STATE_INPUTS[1]]] = c[i : i + 1]
        return arrays

    def __call__(self, rows, masks=None) -> np.ndarray:
        answers = self._invoke([self._row(rows, i, masks) for i in range(len(rows))])
        return np.concatenate([out[self.action] for out in answers])

    def step(self, rows, h, c, masks=None):
        answers = self._invoke([self._row(rows, i, masks, h, c) for i in range(len(rows))])
        h_at, c_at = (self.out_position[name] for name in STATE_INPUTS)
        return tuple(np.concatenate([out[at] for out in answers]) for at in (self.action, h_at, c_at))

    def _reason(self) -> str:
        self.process.kill()
        self.process.wait()
        self._log.seek(0)
        lines = [" ".join(line.split()) for line in self._log.read().decode(errors="replace").splitlines()]
        lines = [line for line in lines if line and not line.startswith(("[", "Traceback", "File "))]
        return "; ".join([*lines[-2:], f"exit status {self.process.returncode}"])

    def close(self) -> int | None:
        """Ends the child (its allocations printed as it ends); its arena_used_bytes, or None."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=30)
            self._log.seek(0)
            found = ARENA.search(self._log.read().decode(errors="replace"))
            return int(found.group(1)) if found else None
        finally:
            self._log.close()
            self._work.cleanup()


def _split_one(runner: TFLiteRunner, row: np.ndarray) -> list[np.ndarray]:
    from kppo.exporter.inputs import split_rows

    if runner.inputs is None:
        return [np.asarray(row).astype(runner.input_dtype)]
    return split_rows(runner.inputs, row)
