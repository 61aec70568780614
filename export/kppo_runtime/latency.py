"""Single-observation latency of an exported policy (median microseconds per `Controller.act` (`act_flat` for Dict
observations), and per raw invoke).

    python -m kppo_runtime.latency policy.tflite [--calls 10000]   # or: kppo-latency ...
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kppo_runtime.errors import USER_ERRORS, fail
from kppo_runtime.runtime import Controller, example_masks


def measure(controller: Controller, calls: int) -> dict[str, float]:
    """Median microseconds of set input + invoke, and of a whole `act` call (with random masks for a masked
    artifact)."""
    rng = np.random.default_rng(0)
    obs = controller.example_observations(calls, rng)
    masks = (
        [None] * calls
        if controller.mask_size is None
        else example_masks(controller.metadata["action_space"], calls, rng)
    )
    interp, index = controller.interpreter, controller._input["index"]
    invoke, act = [], []
    call = controller.act_flat if controller.metadata["observation_space"]["type"] == "Dict" else controller.act
    for row, mask in zip(obs, masks):
        t0 = time.perf_counter_ns()
        interp.set_tensor(index, row[None])
        if mask is not None:
            interp.set_tensor(controller._mask["index"], mask[None])
        interp.invoke()
        invoke.append(time.perf_counter_ns() - t0)
    for row, mask in zip(obs, masks):
        t0 = time.perf_counter_ns()
        call(row, mask)
        act.append(time.perf_counter_ns() - t0)
    return {"invoke_us": float(np.median(invoke)) / 1e3, "act_us": float(np.median(act)) / 1e3}


def main(argv=None) -> int:
    """`kppo-latency`: the medians; a user's error (a missing or damaged artifact) is one line and exit status 2."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args(argv)
    try:
        result = measure(Controller(args.artifact), args.calls)
    except USER_ERRORS as error:
        return fail("kppo-latency", error)
    print(f"median {result['invoke_us']:.2f} us per invoke (set input + invoke), {result['act_us']:.2f} us per act()")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
