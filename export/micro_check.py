"""TensorFlow Lite for Microcontrollers check: runs an artifact in the `tflite-micro` Python interpreter, finds the
smallest tensor arena it needs, and compares its actions with LiteRT's (numpy + tflite-micro + LiteRT; no TF).

    pip install --pre tflite-micro
    python -m export.micro_check policy.tflite [--observations 1000]

TFLite Micro runs float32 and full-int8 models with a fixed [1, obs_dim] input (export with batch_size=1); dynamic-range
("dynamic") models are rejected by it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from export.runtime import Controller


def _run(model: bytes, arena_size: int, obs: np.ndarray) -> np.ndarray:
    from tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(model, arena_size=arena_size)
    outputs = []
    for row in obs:
        interpreter.set_input(row[None].astype(np.float32), 0)
        interpreter.invoke()
        outputs.append(np.array(interpreter.get_output(0))[0])
    return np.asarray(outputs)


def smallest_arena(model: bytes, probe: np.ndarray, low: int = 256, high: int | None = None) -> int:
    """Smallest arena size (bytes, to 16) with which the model allocates and runs `probe`."""
    high = high or max(10 * len(model), 64 * 1024)

    def works(size: int) -> bool:
        try:
            _run(model, size, probe[:1])
            return True
        except Exception:  # the interpreter raises RuntimeError/ValueError when the arena is too small
            return False

    if not works(high):
        raise ValueError(f"artifact: TFLite Micro could not run it even with a {high}-byte arena")
    while high - low > 16:
        mid = (low + high) // 2
        low, high = (low, mid) if works(mid) else (mid, high)
    return high


def check(artifact: str | Path, observations: int = 1000, seed: int = 0) -> dict:
    model = Path(artifact).read_bytes()
    controller = Controller(artifact)
    obs = np.random.default_rng(seed).normal(size=(observations, controller.obs_dim)).astype(np.float32) * 3.0
    arena = smallest_arena(model, obs)
    micro = _run(model, arena, obs)
    litert = np.asarray([controller.act(row) for row in obs]).reshape(micro.shape)
    error = np.abs(micro.astype(np.float64) - litert)
    return {"arena_bytes": arena, "model_bytes": len(model), "max_abs_error_vs_litert": float(error.max()),
            "mean_abs_error_vs_litert": float(error.mean()), "observations": observations}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--observations", type=int, default=1000)
    args = parser.parse_args(argv)
    print(json.dumps(check(args.artifact, args.observations)))


if __name__ == "__main__":
    main()
