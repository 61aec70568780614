#!/usr/bin/env python
"""Populations: N seeds of the fixed CartPole setting in one program against N single-seed runs, one process each.

The fixed setting is `kppo.Config()` (TF-native CartPole, 16 envs x 128 steps, 244 iterations = 499,712 steps,
evaluation rounds included). Every run is a fresh interpreter started by this driver, and its wall is measured by the
driver around the process, so interpreter start, imports, tracing and XLA compilation are all counted as a user pays
them.

    .venv/bin/python benchmarks/population.py                          # 8 sequential runs vs one 8-member population
    .venv/bin/python benchmarks/population.py --members 8 --curve 1,2,4,8,16,64 --json out.json
    .venv/bin/python benchmarks/population.py --parts rejax --rejax-python .venv-rejax/bin/python --curve 1,8,64

Parts:
  sequential   seeds 0..N-1, one `kppo.train("cartpole", seed=s)` process each, one after the other
  population   one `kppo.train("cartpole", seed=[0, ..., N-1])` process
  rejax        (--parts rejax, --rejax-python): rejax's PPO at the same setting, `jax.jit(jax.vmap(train))` over 1, N
               and the curve's sizes of keys, full budget (no evaluation inside its run), one process each
  curve        populations of each size in --curve for --curve-iterations iterations: compile time and the steps/s of
               the training calls after the first (all members' steps; the one evaluation round comes after)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
import harness  # benchmarks/ is sys.path[0] for a script


def worker(kind: str, members: int, seed: int, iterations: int | None) -> dict:
    import numpy as np

    import kppo

    config = kppo.Config(verbose=0)
    if iterations is not None:
        config = config.replace(total_timesteps=iterations * config.rollout_size, eval_freq=1)
    seeds = seed if kind == "single" else list(range(members))
    calls: list[tuple[float, int]] = []  # (time, one member's steps so far) after every compiled training call
    result = kppo.train("cartpole", config, seed=seeds, on_progress=lambda s: calls.append((time.perf_counter(), s)))
    returns = result.metrics["eval/mean_returns"][-1]
    (t0, s0), (t1, s1) = calls[0], calls[-1]  # after the first call (which compiles) to the last
    steady = (s1 - s0) * (1 if kind == "single" else members) / max(t1 - t0, 1e-9)
    return {
        "final_returns": np.atleast_1d(returns).astype(float).tolist(),
        "timings": result.timings,
        "steps_per_s": steady,
    }


def worker_rejax(members: int, iterations: int | None) -> dict:
    """rejax's PPO at the same setting (benchmarks/cartpole.py), `jax.vmap`-ed over `members` keys in one jit."""
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    from cartpole import ROLLOUT, make_rejax_algo

    algo = make_rejax_algo((iterations or 244) * ROLLOUT)
    keys = jax.random.split(jax.random.PRNGKey(0), members)
    start = time.perf_counter()
    train = jax.jit(jax.vmap(algo.train)).lower(keys).compile()
    compiled = time.perf_counter()
    states, _ = train(keys)
    jax.block_until_ready(states)
    done = time.perf_counter()
    return {
        "timings": {"compile_s": compiled - start, "run_s": done - compiled, "total_s": done - start},
        "steps_per_s": members * (iterations or 244) * ROLLOUT / (done - compiled),
        "versions": {"jax": jax.__version__},
    }


def run_worker(python: str, *args: str) -> dict:
    start = time.perf_counter()
    done = subprocess.run([python, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return {**json.loads(lines[-1]), "process_wall_s": wall}


def number(point: dict | None, key: str, digits: int = 0) -> str:
    """A curve point's steps/s (or its timings' compile_s) as a cell; empty where the size was not run."""
    if point is None:
        return ""
    value = point["steps_per_s"] if key == "steps_per_s" else point["timings"][key]
    return f"{value:,.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--curve", default="", help="population sizes for the speed curve, e.g. 1,2,4,8,16,64")
    parser.add_argument("--curve-iterations", type=int, default=48)
    parser.add_argument(
        "--iterations",
        help="iterations of the sequential and population runs (default: the whole fixed setting, 244)",
        default="-",
    )
    parser.add_argument(
        "--parts",
        default="sequential,population,curve",
        help="comma list of sequential, population, curve, rejax (rejax needs --rejax-python)",
    )
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--rejax-python", help="also time rejax populations (jax.vmap over keys) with this interpreter")
    parser.add_argument("--json")
    parser.add_argument("--worker", nargs=4, metavar=("KIND", "MEMBERS", "SEED", "ITERATIONS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, members, seed, iterations = args.worker
        iterations = None if iterations == "-" else int(iterations)
        if kind == "rejax":
            print(json.dumps(worker_rejax(int(members), iterations)))
        else:
            print(json.dumps(worker(kind, int(members), int(seed), iterations)))
        return 0

    report: dict = {**harness.machine(), "members": args.members}
    print(f"{harness.machine_header()}\n{args.members} members of the fixed CartPole setting")
    parts = set(args.parts.split(","))
    sequential_wall = None
    if "sequential" in parts:
        runs = [run_worker(args.python, "single", "1", str(seed), args.iterations) for seed in range(args.members)]
        report["sequential"] = runs
        sequential_wall = sum(r["process_wall_s"] for r in runs)
        finals = [r["final_returns"][0] for r in runs]
        walls = ", ".join(f"{r['process_wall_s']:.1f}" for r in runs)
        print(
            f"sequential: {sequential_wall:.1f} s in all ({walls}), final returns mean {sum(finals) / len(finals):.1f}"
        )
    if "population" in parts:
        population = run_worker(args.python, "population", str(args.members), "0", args.iterations)
        report["population"] = population
        finals = population["final_returns"]
        timings = population["timings"]
        print(
            f"population: {population['process_wall_s']:.1f} s (compile {timings['compile_s']:.1f}, run "
            f"{timings['run_s']:.1f}), final returns {', '.join(f'{x:.1f}' for x in finals)}, mean "
            f"{sum(finals) / len(finals):.1f}"
        )
        if sequential_wall is not None:
            report["ratio"] = population["process_wall_s"] / sequential_wall
            print(f"population / sequential wall: {report['ratio']:.2f}")
    report["curve"] = []
    for size in [int(x) for x in args.curve.split(",") if x] if "curve" in parts else []:
        point = run_worker(args.python, "population", str(size), "0", str(args.curve_iterations))
        timings, steps_per_s = point["timings"], point["steps_per_s"]
        report["curve"].append({"members": size, **point})
        print(
            f"  {size:>3} members: compile {timings['compile_s']:5.1f} s, {steps_per_s:>9,.0f} steps/s "
            f"({steps_per_s / size:>7,.0f} per member), process {point['process_wall_s']:.1f} s"
        )
    if "rejax" in parts:
        if not args.rejax_python:
            parser.error("--parts rejax needs --rejax-python")
        report["rejax"] = []
        for size in sorted({1, args.members} | {int(x) for x in args.curve.split(",") if x}):
            point = run_worker(args.rejax_python, "rejax", str(size), "0", args.iterations)
            timings = point["timings"]
            report["rejax"].append({"members": size, **point})
            print(
                f"  rejax {size:>3} members: process {point['process_wall_s']:.1f} s, compile "
                f"{timings['compile_s']:.1f} s, {point['steps_per_s']:>9,.0f} steps/s (jax {point['versions']['jax']})"
            )
    curve = {point["members"]: point for point in report["curve"]}
    rejax = {point["members"]: point for point in report.get("rejax", [])}
    sizes = sorted(set(curve) | set(rejax))
    if sizes:
        rows = [["kppo population: steps/s", *(number(curve.get(n), "steps_per_s") for n in sizes)]]
        rows.append(["kppo population: compile s", *(number(curve.get(n), "compile_s", 1) for n in sizes)])
        rows.append(["rejax: steps/s", *(number(rejax.get(n), "steps_per_s") for n in sizes)])
        rows.append(["rejax: compile s", *(number(rejax.get(n), "compile_s", 1) for n in sizes)])
        print("\n" + harness.markdown_table(["members", *map(str, sizes)], rows))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
