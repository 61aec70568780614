#!/usr/bin/env python
"""kppo against an earlier kppo: the speed a refactor must keep, measured alternately on the same machine.

Rows (each a fresh interpreter per tree and repeat; the order of the trees alternates per repeat):
  cartpole      benchmarks/cartpole.py's kppo worker (TF-native CartPole, 16 x 128, 500k steps): total_s, steps/s
  gym_cartpole  benchmarks/gym_ppo.py's kppo worker, task cartpole (kppo.PPO on gymnasium CartPole, 500k steps)
  gym_pendulum  benchmarks/gym_ppo.py's kppo worker, task pendulum (RL-Zoo's setting with gSDE, 100k steps)
  replicated    the first call (compile_s) of a 2-replica MirroredStrategy run on CartPole (benchmarks/replicas.py's
                worker, 2 logical CPU devices)

    git worktree add /tmp/base <base>
    .venv/bin/python benchmarks/against_base.py --base /tmp/base --repeats 2 --json out.json

Each tree's own benchmark scripts run with that tree first on PYTHONPATH (so `import kppo` is that tree's). Prints a
Markdown table of medians and the ratio current / base (time: below 1 is faster; steps/s: above 1 is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CURRENT = HERE.parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from replicas import WORKER as REPLICA_WORKER  # noqa: E402  (standard library only at import)

ROWS = {
    "cartpole": (["benchmarks/cartpole.py", "--worker", "kppo", "--timesteps", "500000"], "total_s"),
    "gym_cartpole": (
        ["benchmarks/gym_ppo.py", "--worker", "kppo", "--task", "cartpole", "--timesteps", "500000"],
        "total_s",
    ),
    "gym_pendulum": (
        ["benchmarks/gym_ppo.py", "--worker", "kppo", "--task", "pendulum", "--timesteps", "100000"],
        "total_s",
    ),
    "replicated": (["-c", REPLICA_WORKER, "2", "20000"], "compile_s"),
}


def run(tree: Path, row: str, timeout: float) -> dict:
    """One fresh interpreter of `row` on `tree`: the last JSON line it prints."""
    args, _ = ROWS[row]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{row} on {tree} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {**json.loads(lines[-1]), "wall_s": time.perf_counter() - start, "load_1m": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, type=Path, help="a checkout of the base commit (git worktree)")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    trees = {"base": args.base.resolve(), "current": CURRENT}
    rows = args.rows.split(",")
    raw: dict[str, dict[str, list[dict]]] = {r: {"base": [], "current": []} for r in rows}
    started = harness.machine()
    for repeat in range(args.repeats):
        order = ["base", "current"] if repeat % 2 == 0 else ["current", "base"]
        for row in rows:
            for name in order:
                raw[row][name].append(run(trees[name], row, args.timeout))
                print(f"[against_base] {row} {name}: {raw[row][name][-1][ROWS[row][1]]:.2f}", file=sys.stderr)
    summary = {}
    for row in rows:
        key = ROWS[row][1]
        base, current = (statistics.median(r[key] for r in raw[row][n]) for n in ("base", "current"))
        summary[row] = dict(measure=key, base=base, current=current, ratio=current / base)
    print(harness.machine_header())
    print()
    header = ["row", "measure", "base (median)", "current (median)", "current / base"]
    cells = [
        [r, v["measure"], f"{v['base']:.2f}", f"{v['current']:.2f}", f"{v['ratio']:.3f}"] for r, v in summary.items()
    ]
    print(harness.markdown_table(header, cells))
    if args.json:
        ended = dict(load_1m=os.getloadavg()[0])
        args.json.write_text(json.dumps(dict(started=started, ended=ended, summary=summary, raw=raw), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
