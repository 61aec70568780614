"""TensorFlow Lite for Microcontrollers' figures of a .tflite artifact for its report: the arena it uses
(`arena_used_bytes`, what TFLite Micro's recording allocator counts: its head and tail), the median microseconds of
one invoke and its actions on given input rows (`micro_figures`).

TFLite Micro runs in a child process (`python -m kppo.exporter.micro`, numpy and tflite-micro only): it reports some
failures by crashing its process, and prints its allocations from C++. The rows travel in a .npz file read with
`allow_pickle=False`. Without the `tflite-micro` package (the extra `kppo[micro]`) the figures are None and the
report says why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ARENA = re.compile(r"Arena allocation total (\d+) bytes")
LARGE_ARENA = 16 * 1024 * 1024  # bytes offered to TFLite Micro; what it uses is read back
TIMEOUT_S = 120.0


def micro_figures(model: bytes, inputs: list[np.ndarray], action_position: int) -> dict[str, Any]:
    """TFLite Micro on `inputs` (one array per model input, in the model's input order, one row per invoke):
    {"arena_used_bytes", "invoke_us", "actions"} or, when it cannot run the model, {"error": one line}."""
    if importlib.util.find_spec("tflite_micro") is None:
        return {"error": "tflite-micro is not installed (pip install kppo[micro])"}
    with tempfile.TemporaryDirectory(prefix="kppo_micro_") as work:
        folder = Path(work)
        (folder / "model.tflite").write_bytes(model)
        arrays: dict[str, Any] = {f"in{i}": np.asarray(x) for i, x in enumerate(inputs)}
        np.savez(folder / "inputs.npz", **arrays)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "kppo.exporter.micro", work, str(action_position)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"no answer from TFLite Micro within {TIMEOUT_S:.0f} s"}
        arena = ARENA.search(done.stdout + done.stderr)
        if done.returncode != 0 or arena is None or not (folder / "out.npz").is_file():
            return {"error": _reason(done)}
        with np.load(folder / "out.npz", allow_pickle=False) as out:
            actions, invoke_us = out["actions"], float(out["invoke_us"])
    return {"arena_used_bytes": int(arena.group(1)), "invoke_us": invoke_us, "actions": actions}


def _reason(done: subprocess.CompletedProcess) -> str:
    """TFLite Micro's refusal of a model on one line: what it printed before the Python exception (its own reasons),
    the exception's last line, and how its process ended."""
    text = done.stdout + "\n" + done.stderr
    before, _, after = text.partition("Traceback (most recent call last):")
    own = [" ".join(line.split()) for line in before.splitlines()]
    own = [line for line in own if line and not line.startswith("[")]  # the allocator's lines are no reason
    last = [" ".join(line.split()) for line in after.splitlines() if line.strip()][-1:]
    ended = f"exit status {done.returncode}" if done.returncode >= 0 else f"signal {-done.returncode}"
    return "; ".join([*own[-3:], *last, f"TFLite Micro's process ended with {ended}"])


def _child(folder: Path, action_position: int) -> None:
    """Runs in the child process: every row through TFLite Micro, then its allocations printed."""
    from tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes((folder / "model.tflite").read_bytes(), arena_size=LARGE_ARENA)
    with np.load(folder / "inputs.npz", allow_pickle=False) as data:
        inputs = [data[f"in{i}"] for i in range(len(data.files))]
    actions, times = [], []
    for row in range(len(inputs[0])):
        for position, values in enumerate(inputs):
            interpreter.set_input(values[row][None], position)
        start = time.perf_counter_ns()
        interpreter.invoke()
        times.append(time.perf_counter_ns() - start)
        actions.append(np.array(interpreter.get_output(action_position))[0])
    np.savez(folder / "out.npz", actions=np.asarray(actions), invoke_us=np.median(times) / 1e3)
    sys.stdout.flush()
    interpreter.print_allocations()  # from C++, on this process's stderr: the parent reads the arena total


def read_exactly(fd: int, size: int) -> bytes:
    """`size` bytes from the pipe `fd` (fewer only at its end)."""
    parts, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _serve(model: Path, inputs: int, outputs: int) -> None:
    """The child: one invoke per request on standard input, its outputs on standard output, until end of input."""
    from tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(model.read_bytes(), arena_size=LARGE_ARENA)
    specs = [interpreter.get_input_details(i) for i in range(inputs)]
    sizes = [int(np.prod(d["shape"])) * np.dtype(d["dtype"]).itemsize for d in specs]
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    while True:
        header = read_exactly(stdin, 4)
        if len(header) < 4:
            break
        count = int(np.frombuffer(header, np.int32)[0])
        request = read_exactly(stdin, count * sum(sizes))
        answers = []
        for row in range(count):
            start = row * sum(sizes)
            for position, (detail, size) in enumerate(zip(specs, sizes)):
                values = np.frombuffer(request[start : start + size], np.dtype(detail["dtype"]))
                interpreter.set_input(values.reshape(detail["shape"]), position)
                start += size
            interpreter.invoke()
            answers += [np.asarray(interpreter.get_output(j)).tobytes() for j in range(outputs)]
        answer = b"".join(answers)
        while answer:
            answer = answer[os.write(stdout, answer) :]
    sys.stderr.flush()
    interpreter.print_allocations()  # on stderr: the parent reads the arena's total from it


if __name__ == "__main__":
    if sys.argv[1] == "--serve":  # `kppo.exporter.micro_loop.MicroRunner`'s child
        _serve(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        _child(Path(sys.argv[1]), int(sys.argv[2]))
