"""Single-observation latency of an exported policy (median microseconds per `Controller.act` (`act_flat` for Dict
observations), and per raw invoke).

    python -m export.latency policy.tflite [--calls 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from export.runtime import Controller


def measure(controller: Controller, calls: int) -> dict[str, float]:
    obs = controller.example_observations(calls, np.random.default_rng(0))
    interp, index = controller.interpreter, controller._input["index"]
    invoke, act = [], []
    call = controller.act_flat if controller.metadata["observation_space"]["type"] == "Dict" else controller.act
    for row in obs:
        t0 = time.perf_counter_ns()
        interp.set_tensor(index, row[None])
        interp.invoke()
        invoke.append(time.perf_counter_ns() - t0)
    for row in obs:
        t0 = time.perf_counter_ns()
        call(row)
        act.append(time.perf_counter_ns() - t0)
    return {"invoke_us": float(np.median(invoke)) / 1e3, "act_us": float(np.median(act)) / 1e3}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args(argv)
    result = measure(Controller(args.artifact), args.calls)
    print(f"median {result['invoke_us']:.2f} us per invoke (set input + invoke), {result['act_us']:.2f} us per act()")


if __name__ == "__main__":
    main()
