"""TensorFlow Lite for Microcontrollers check: runs an artifact in the `tflite-micro` Python interpreter, finds the
smallest tensor arena it needs, and compares its actions with LiteRT's (numpy + tflite-micro + LiteRT; no TF).

    pip install "./export[micro]"      # tflite-micro (a pre-release): only this module needs it
    python -m kppo_runtime.micro_check policy.tflite [--observations 1000]   # or: kppo-micro-check ...

TFLite Micro runs float32 and int8 artifacts (an int8 network body between float32 input encoding and action ops)
with a fixed [1, obs_dim] input (an image policy: uint8 [1, *image shape]; export with batch_size=1); dynamic-range
("dynamic") models are rejected by it. The observations are random valid input rows (`runtime.example_observations`;
random uint8 images for an image policy), with random action masks
(`runtime.example_masks`) for an artifact that takes them. Every TFLite Micro interpreter runs in a
child process: TFLite Micro reports some failures (an arena a few bytes too small) by crashing the process or with
a misleading message ("Node FULLY_CONNECTED (number 3) failed to prepare" when the arena, not the node, is at
fault). A model TFLite Micro rejects is one line on stderr and exit status 1. (Scripts that call `check` need the
usual multiprocessing guard, `if __name__ == "__main__":`.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kppo_runtime.errors import USER_ERRORS, fail
from kppo_runtime.runtime import Controller, example_masks, load_metadata

_NOISE = ("All temp buffers must be freed", "Number of allocated temp buffers", "Created TensorFlow Lite")


class MicroError(ValueError):
    """TFLite Micro rejected the model (or crashed on it); the message is one line."""


def _run(model: bytes, arena_size: int, inputs: list[np.ndarray], output: int = 0) -> tuple[np.ndarray, float]:
    """Runs the rows of `inputs` (one array per model input, in the model's input order) in a TFLite Micro
    interpreter, in this process (it may crash it: see `run_isolated`); returns output `output` per row and the
    median microseconds of one invoke."""
    from tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(model, arena_size=arena_size)
    outputs, times = [], []
    for row in range(len(inputs[0])):
        for position, values in enumerate(inputs):
            interpreter.set_input(values[row][None], position)
        start = time.perf_counter_ns()
        interpreter.invoke()
        times.append(time.perf_counter_ns() - start)
        outputs.append(np.array(interpreter.get_output(output))[0])
    return np.asarray(outputs), float(np.median(times)) / 1e3


def _child(model: bytes, arena_size: int, obs: list[np.ndarray], log_path: str, conn, output: int = 0) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(log, 1)  # TFLite Micro prints from C++: capture it for the one-line report
    os.dup2(log, 2)
    try:
        conn.send(("ok", *_run(model, arena_size, obs, output)))
    except Exception as error:  # the interpreter raises RuntimeError/ValueError when it cannot allocate or prepare
        conn.send(("error", f"{type(error).__name__}: {error}"))


def _context():
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["numpy", "tflite_micro.runtime"])  # imported once, in the fork server
    return context


def _log_lines(path: str) -> list[str]:
    text = Path(path).read_text(errors="replace") if os.path.exists(path) else ""
    lines = [" ".join(line.split()).rstrip(".") for line in text.splitlines()]
    noise = (*_NOISE, "Traceback", "File ")
    return [line for line in lines if line and not line.startswith(noise)]


def run_isolated(
    model: bytes, arena_size: int, obs: np.ndarray | list[np.ndarray], timeout: float = 300.0, output: int = 0
) -> tuple[np.ndarray | None, str]:
    """`_run` in a child process: (outputs, "") or (None, one-line reason), also when TFLite Micro crashes. `obs`:
    the input rows, or a list of arrays, one per model input in its order."""
    outputs, _, reason = _isolated(model, arena_size, obs, timeout, output)
    return outputs, reason


def _isolated(
    model: bytes, arena_size: int, obs: np.ndarray | list[np.ndarray], timeout: float = 300.0, output: int = 0
) -> tuple[np.ndarray | None, float, str]:
    """`run_isolated`, with the median microseconds of one invoke (nan when it failed)."""
    obs = [np.asarray(x) for x in obs] if isinstance(obs, list) else [np.asarray(obs)]
    fd, log_path = tempfile.mkstemp(prefix="kppo_micro_", suffix=".log")
    os.close(fd)
    context = _context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(model, arena_size, obs, log_path, send, output), daemon=True)
    try:
        process.start()
        send.close()
        result = receive.recv() if receive.poll(timeout) else None
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join()
    except EOFError:  # the child died before sending anything
        result = None
        process.join(timeout=10)
    finally:
        receive.close()
        lines = _log_lines(log_path)
        os.unlink(log_path)
    if result is not None and result[0] == "ok":
        return result[1], result[2], ""
    code = process.exitcode
    reason = (
        result[1]
        if result is not None
        else (
            f"no answer from the TFLite Micro process within {timeout:.0f} s"
            if not code
            else f"the TFLite Micro process crashed ({f'signal {-code}' if code < 0 else f'exit status {code}'})"
        )
    )
    return None, float("nan"), "; ".join([*lines, reason])


def smallest_arena(
    model: bytes,
    probe: np.ndarray | list[np.ndarray],
    low: int = 256,
    high: int | None = None,
    expected: np.ndarray | None = None,
    output: int = 0,
) -> int:
    """Smallest arena size (bytes, to 16) with which the model allocates and runs `probe` (and reproduces `expected`,
    the outputs with the large arena, when given)."""
    high = high or max(10 * len(model), 64 * 1024)

    def works(size: int) -> bool:
        out, _ = run_isolated(model, size, probe, output=output)
        return out is not None and (expected is None or np.array_equal(out, expected))

    if not works(high):
        raise MicroError(f"artifact: TFLite Micro could not run it even with a {high}-byte arena")
    while high - low > 16:
        mid = (low + high) // 2
        low, high = (low, mid) if works(mid) else (mid, high)
    return high


def check(artifact: str | Path, observations: int = 1000, seed: int = 0) -> dict:
    """Arena bytes, model bytes, the TFLite Micro vs LiteRT difference on `observations` random observations
    (max/mean absolute error; for integer actions also the fraction of differing actions) and the median
    microseconds of one TFLite Micro invoke on this machine (`micro_invoke_us`: its portable reference kernels on
    the host CPU, not a microcontroller's figure).

    Raises:
        MicroError: TFLite Micro rejects the model (one line with its reasons), or crashes on it, or tflite-micro is
            not installed.
    """
    if importlib.util.find_spec("tflite_micro") is None:  # else each child process fails with ModuleNotFoundError
        raise MicroError(
            'tflite-micro is not installed: pip install "kppo-runtime[micro]" (or "./export[micro]" '
            "from a kppo checkout)"
        )
    artifact = Path(artifact)
    model = artifact.read_bytes()
    metadata = load_metadata(artifact)
    rng = np.random.default_rng(seed)
    controller = Controller(artifact, delegates=False)  # LiteRT's builtin kernels: the reference, and no log line
    obs = controller.example_inputs(observations, rng)  # one array per observation input
    masks = None if controller.mask_size is None else example_masks(metadata["action_space"], observations, rng)
    inputs = [None] * (len(obs) + (masks is not None) + 2 * controller.recurrent)
    for position, values in zip(controller.obs_positions, obs):
        inputs[position] = values
    if masks is not None:
        inputs[controller.mask_position] = masks
    states = [
        np.tanh(rng.normal(size=(observations, controller.units))).astype(np.float32)
        for _ in controller.state_positions
    ]  # a recurrent artifact: random states in (-1, 1)
    for position, state in zip(controller.state_positions, states):
        inputs[position] = state
    high = max(10 * len(model), 64 * 1024)
    micro, invoke_us, reason = _isolated(model, high, inputs, output=controller.action_position)
    if micro is None:
        hint = (
            " (TFLite Micro runs float32 and int8 artifacts, not dynamic-range ones)"
            if (metadata.get("quantization") == "dynamic")
            else ""
        )
        raise MicroError(f"TFLite Micro rejects {artifact.name} (with a {high}-byte arena): {reason}{hint}")
    arena = smallest_arena(
        model, [x[:4] for x in inputs], high=high, expected=micro[:4], output=controller.action_position
    )
    litert = []
    for i in range(observations):
        controller.state = tuple(state[i : i + 1] for state in states)
        litert.append(controller.act_inputs([x[i] for x in obs], None if masks is None else masks[i]))
    litert = np.asarray(litert).reshape(micro.shape)
    error = np.abs(micro.astype(np.float64) - litert)
    report = {
        "arena_bytes": arena,
        "model_bytes": len(model),
        "max_abs_error_vs_litert": float(error.max()),
        "mean_abs_error_vs_litert": float(error.mean()),
        "observations": observations,
        "micro_invoke_us": invoke_us,
    }
    if np.issubdtype(micro.dtype, np.integer):
        report["action_mismatch_vs_litert"] = float(np.mean((micro != litert).reshape(observations, -1).any(axis=1)))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--observations", type=int, default=1000)
    args = parser.parse_args(argv)
    try:
        report = check(args.artifact, args.observations)
    except USER_ERRORS as error:  # MicroError, and LiteRT / file errors
        return fail("kppo-micro-check", error)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
