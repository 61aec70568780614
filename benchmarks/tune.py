#!/usr/bin/env python
"""A search batched as populations against the same search one trial at a time.

16 trials of the fixed CartPole setting (`kppo.Config()`: TF-native CartPole, 16 envs x 128 steps, 499,712 steps, 10
evaluation rounds of 16 episodes) over a learning-rate / entropy / clip space, TPE (sampler seed 0) and the median
pruner, as `kppo.tune` runs by default: `--batch 8` (two populations of 8 trials) against `--batch 1` (16 single
runs). Each search is one fresh interpreter started by this driver and timed around its process, so imports, tracing
and XLA compilation count as a user pays them.

    .venv/bin/python benchmarks/tune.py --json benchmarks/results/tune/batched_vs_sequential.json
    .venv/bin/python benchmarks/tune.py --order batched,sequential --pruner none

Prints, for each search: its wall and CPU seconds, the best value and its trial, the completed and pruned counts,
and every trial's value and parameters.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

import harness  # benchmarks/ is sys.path[0] for a script
from harness import finish_record, package_versions, run_record

SPACE = {
    "learning_rate": {"type": "float", "low": 1e-4, "high": 3e-3, "log": True},
    "ent_coef": {"type": "float", "low": 1e-8, "high": 0.1, "log": True},
    "clip_range": {"type": "categorical", "choices": [0.1, 0.2, 0.3, 0.4]},
}
BATCHES = {"batched": 8, "sequential": 1}


def worker(batch: int, trials: int, pruner: str) -> dict:
    """One search in this process: its trials, as the study holds them."""
    import kppo

    with tempfile.TemporaryDirectory() as out:
        result = kppo.tune(
            "cartpole",
            kppo.Config(verbose=0),
            SPACE,
            trials=trials,
            batch=batch,
            pruner=pruner,
            out=out,
            verbose=0,
            sampler_seed=0,  # both searches ask the same trials
        )
        rows = [
            {"number": t.number, "state": t.state.name, "value": t.value, "params": t.params}
            for t in result.study.trials
        ]
    best = min((r for r in rows if r["value"] == result.best_value), key=lambda r: r["number"])
    return {
        "best_value": result.best_value,
        "best_trial": best["number"],
        "best_params": result.best_params,
        "complete": sum(r["state"] == "COMPLETE" for r in rows),
        "pruned": sum(r["state"] == "PRUNED" for r in rows),
        "trials": rows,
    }


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(kind: str, trials: int, pruner: str) -> dict:
    """One search in a fresh process: its wall and its CPU seconds (user + system, every thread: on a machine shared
    with other work the CPU seconds move less than the wall)."""
    start, cpu = time.perf_counter(), _children_cpu_s()
    command = [sys.executable, __file__, "--worker", kind, "--trials", str(trials), "--pruner", pruner]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{kind}: the search failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"kind": kind, "batch": BATCHES[kind], "wall_s": wall, "cpu_s": cpu, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--pruner", default="median")
    parser.add_argument("--order", default="sequential,batched", help="the searches, in this order")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--worker", choices=sorted(BATCHES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(BATCHES[args.worker], args.trials, args.pruner)))
        return
    record = run_record(
        space=SPACE,
        trials=args.trials,
        pruner=args.pruner,
        versions=package_versions("kppo", "tensorflow", "optuna"),
        runs=[],
    )
    for kind in args.order.split(","):
        result = run(kind, args.trials, args.pruner)
        record["runs"].append(result)
        print(
            f"{kind:>10} (batch {result['batch']}): {result['wall_s']:7.1f} s ({result['cpu_s']:.0f} CPU s), best "
            f"{result['best_value']:.1f} "
            f"(trial {result['best_trial']}), {result['complete']} complete, {result['pruned']} pruned",
            flush=True,
        )
    walls = {r["kind"]: r["wall_s"] for r in record["runs"]}
    if {"batched", "sequential"} <= walls.keys():
        cpus = {r["kind"]: r["cpu_s"] for r in record["runs"]}
        record["ratio"] = walls["batched"] / walls["sequential"]
        record["cpu_ratio"] = cpus["batched"] / cpus["sequential"]
        print(f"batched / sequential wall: {record['ratio']:.2f} (CPU seconds: {record['cpu_ratio']:.2f})")
    runs = [dict(r, outcome=f"{r['complete']} / {r['pruned']}") for r in record["runs"]]
    columns = [
        ("search", "kind", str),
        ("batch", "batch", str),
        ("wall s", "wall_s", 1),
        ("CPU s", "cpu_s", 0),
        ("best value", "best_value", 1),
        ("best trial", "best_trial", str),
        ("complete / pruned", "outcome", str),
    ]
    batched = next((i for i, r in enumerate(runs) if r["kind"] == "batched"), None)
    ratios = [("batched wall / this", "wall_s"), ("batched CPU / this", "cpu_s")] if batched is not None else []
    print(f"\n{harness.machine_header(None, 'optuna')}\n")
    print(harness.side_by_side(runs, columns, ratios, reference=batched or 0))
    finish_record(record, args.json)


if __name__ == "__main__":
    main()
