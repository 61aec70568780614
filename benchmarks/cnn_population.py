#!/usr/bin/env python
"""CNN populations on TF-native MinAtar Breakout: steps/s of M members in one program against one member alone
(benchmarks/minatar_cnn.py's SETTING: SmallCNN, 128 envs x 128 steps, 4 epochs x 8 minibatches), with and without
XLA. Build time, the first call (tracing, compilation, one iteration) and the second call's steps/s (all members').

    .venv/bin/python benchmarks/cnn_population.py 1 xla      # one member, XLA (the default flags)
    .venv/bin/python benchmarks/cnn_population.py 3 graph    # three members, jit_rollout=False

A CNN population's program is not XLA-compiled (`kppo.training.runners.settings.population_jit`, from what this
measured: 3 members at 1,688 steps/s under XLA, docs/benchmarks/populations.md); "xla" with 3 members runs the
default flags.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import kppo
from kppo.training.runners import make_population_runner, make_runner
from kppo.training.runners.settings import population_jit
from minatar_cnn import SETTING


def main() -> int:
    members, mode = int(sys.argv[1]), sys.argv[2]
    base = kppo.Config(**{**SETTING, "iterations_per_call": 1}, jit_rollout=mode == "xla", total_timesteps=10_000_000)
    t0 = time.perf_counter()
    if members == 1:
        runner = make_runner("breakout_minatar_gymnax", base)
        jit = base.jit_rollout
    else:
        jit = population_jit(base)
        runner, _ = make_population_runner("breakout_minatar_gymnax", [base.replace(seed=s) for s in range(members)])
    t1 = time.perf_counter()
    state = runner.run_iterations(runner.state, 1).state
    t2 = time.perf_counter()
    state = runner.run_iterations(state, 1).state
    int(runner.view(state).iteration)  # waits for the call
    t3 = time.perf_counter()
    steps = base.rollout_size * members
    print(harness.machine_header())
    print()
    header = ["members", "program", "build s", "first call s", "second call s", "steps/s (second call, all members)"]
    row = [members, "XLA" if jit else "graph", f"{t1 - t0:.1f}", f"{t2 - t1:.1f}", f"{t3 - t2:.1f}"]
    print(harness.markdown_table(header, [[*row, f"{steps / (t3 - t2):,.0f}"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
