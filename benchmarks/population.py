#!/usr/bin/env python
"""Populations: N seeds of the fixed CartPole setting in one program against N single-seed runs, one process each.

The fixed setting is `kppo.Config()` (TF-native CartPole, 16 envs x 128 steps, 244 iterations = 499,712 steps,
evaluation rounds included). Every run is a fresh interpreter started by this driver, and its wall is measured by the
driver around the process, so interpreter start, imports, tracing and XLA compilation are all counted as a user pays
them.

    .venv/bin/python benchmarks/population.py                          # 8 sequential runs vs one 8-member population
    .venv/bin/python benchmarks/population.py --members 8 --curve 1,2,4,8,16,64 --json out.json

Parts:
  sequential   seeds 0..N-1, one `kppo.train("cartpole", seed=s)` process each, one after the other
  population   one `kppo.train("cartpole", seed=[0, ..., N-1])` process
  curve        populations of each size in --curve for --curve-iterations iterations: compile time and the steps/s of
               the training calls after the first (all members' steps)
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def worker(kind: str, members: int, seed: int, iterations: int | None) -> dict:
    import numpy as np

    import kppo

    config = kppo.Config(verbose=0)
    if iterations is not None:
        config = config.replace(total_timesteps=iterations * config.rollout_size, eval_freq=1)
    seeds = seed if kind == "single" else list(range(members))
    result = kppo.train("cartpole", config, seed=seeds)
    returns = result.metrics["eval/mean_returns"][-1]
    return {"final_returns": np.atleast_1d(returns).astype(float).tolist(), "timings": result.timings,
            "steps": int(result.metrics["train/total_steps"][-1]) * (1 if kind == "single" else members)}


def run_worker(python: str, *args: str) -> dict:
    start = time.perf_counter()
    done = subprocess.run([python, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return {**json.loads(lines[-1]), "process_wall_s": wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--curve", default="", help="population sizes for the speed curve, e.g. 1,2,4,8,16,64")
    parser.add_argument("--curve-iterations", type=int, default=40)
    parser.add_argument("--iterations", help="iterations of the sequential and population runs (default: the whole "
                                             "fixed setting, 244)", default="-")
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json")
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "MEMBERS", "SEED", "ITERATIONS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, members, seed, iterations = args.worker
        print(json.dumps(worker(kind, int(members), int(seed), None if iterations == "-" else int(iterations))))
        return 0

    report: dict = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "members": args.members}
    print(f"{report['date']}, {report['cpu']}, {args.members} members of the fixed CartPole setting")
    if not args.skip_sequential:
        runs = [run_worker(args.python, "single", "1", str(seed), args.iterations) for seed in range(args.members)]
        report["sequential"] = runs
        sequential_wall = sum(r["process_wall_s"] for r in runs)
        finals = [r["final_returns"][0] for r in runs]
        walls = ", ".join(f"{r['process_wall_s']:.1f}" for r in runs)
        print(f"sequential: {sequential_wall:.1f} s in all ({walls}), "
              f"final returns mean {sum(finals) / len(finals):.1f}")
    population = run_worker(args.python, "population", str(args.members), "0", args.iterations)
    report["population"] = population
    finals = population["final_returns"]
    timings = population["timings"]
    print(f"population: {population['process_wall_s']:.1f} s (compile {timings['compile_s']:.1f}, run "
          f"{timings['run_s']:.1f}), final returns {', '.join(f'{x:.1f}' for x in finals)}, mean "
          f"{sum(finals) / len(finals):.1f}")
    if not args.skip_sequential:
        report["ratio"] = population["process_wall_s"] / sequential_wall
        print(f"population / sequential wall: {report['ratio']:.2f}")
    report["curve"] = []
    for size in [int(x) for x in args.curve.split(",") if x]:
        point = run_worker(args.python, "population", str(size), "0", str(args.curve_iterations))
        timings = point["timings"]
        steps_per_s = point["steps"] / max(timings["run_s"], 1e-9)
        report["curve"].append({"members": size, **point, "steps_per_s": steps_per_s})
        print(f"  {size:>3} members: compile {timings['compile_s']:5.1f} s, {steps_per_s:>9,.0f} steps/s "
              f"({steps_per_s / size:>7,.0f} per member), process {point['process_wall_s']:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
