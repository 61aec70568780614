#!/usr/bin/env python
"""Population-based training against the same members with their values fixed, where the fixed values are poor.

The task: TF-native Pendulum at configs/pendulum_100k.yaml (100k steps a member) with a constant learning rate 5-20x
the tuned 1e-3 (`--start range`: members start at 5e-3 ... 2e-2, log-spaced; `--start 10x`: all at 1e-2, an
initial learning rate 10x too high), and 16 evaluation rounds of 32 episodes. For each seed
of the whole procedure, two 8-member populations from the same initial values and member seeds:
  fixed  `kppo.train(env, configs)`: each member keeps its values;
  pbt    `kppo.tuning.pbt.pbt`: every round (--interval) the bottom quarter copies a top-quarter member and perturbs
         its learning rate and clip range (x0.8 / x1.2, or redrawn from the space with probability 0.25).
The figure of merit is the final evaluation return: the best member's and the members' mean.

    .venv/bin/python benchmarks/pbt.py --json benchmarks/results/tune/pbt_pendulum.json
    .venv/bin/python benchmarks/pbt.py --start 10x --seeds 5 --json benchmarks/results/tune/pbt_pendulum_10x.json
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import harness  # benchmarks/ is sys.path[0] for a script
from harness import finish_record, package_versions, run_record

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "pendulum_100k.yaml"
SPACE = {
    "learning_rate": {"type": "float", "low": 1e-5, "high": 2e-2, "log": True},
    "clip_range": {"type": "float", "low": 0.1, "high": 0.3},
}
MEMBERS = 8


def initial_values(members: int, start: str = "range") -> list[dict[str, float]]:
    """The members' starting values: learning rates 5e-3 ... 2e-2 (log-spaced; `start` "range") or all 1e-2 (10x the
    tuned rate; "10x"), clip range 0.2."""
    rates = np.geomspace(5e-3, 2e-2, members) if start == "range" else np.full(members, 1e-2)
    return [{"learning_rate": float(lr), "clip_range": 0.2} for lr in rates]


def one_procedure(seed: int, interval: int, total_timesteps: int | None = None, start: str = "range") -> dict:
    import kppo
    from kppo.tuning.pbt import pbt
    from kppo.tuning.space import parse_space

    base = kppo.Config.from_yaml(CONFIG).replace(lr_schedule="constant", eval_freq=16, seed=100 * seed, verbose=0)
    if total_timesteps is not None:  # a shorter smoke run of the script
        base = base.replace(total_timesteps=total_timesteps)
    space = parse_space(SPACE, base)
    start = time.perf_counter()
    initial = initial_values(MEMBERS, start)
    configs = [space.apply(base, p).replace(seed=base.seed + i) for i, p in enumerate(initial)]
    fixed = np.asarray(kppo.train(None, configs).metrics["eval/mean_returns"][-1], np.float64)
    fixed_s = time.perf_counter() - start
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        result = pbt(None, base, space, members=MEMBERS, interval=interval, seed=seed,
                     initial=initial, out=out)  # fmt: skip
    pbt_s = time.perf_counter() - start
    final = result.returns[-1]
    return {
        "seed": seed,
        "fixed_final": fixed.tolist(),
        "pbt_final": final.tolist(),
        "fixed_best": float(fixed.max()),
        "pbt_best": float(final.max()),
        "fixed_mean": float(fixed.mean()),
        "pbt_mean": float(final.mean()),
        "pbt_best_params": result.best_params,
        "pbt_best_schedule": result.schedule,
        "copies": len(result.lineage),
        "fixed_s": fixed_s,
        "pbt_s": pbt_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the whole procedure")
    parser.add_argument("--interval", type=int, default=1, help="evaluation rounds between two exploit steps")
    parser.add_argument("--total-timesteps", type=int, help="a member's budget (default: the config's, 100k)")
    parser.add_argument("--start", choices=("range", "10x"), default="range", help="the members' initial rates")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    record = run_record(
        config=str(CONFIG.name),
        space=SPACE,
        initial=initial_values(MEMBERS, args.start),
        interval=args.interval,
        versions=package_versions("kppo", "tensorflow"),
        procedures=[],
    )
    for seed in range(args.seeds):
        row = one_procedure(seed, args.interval, args.total_timesteps, args.start)
        record["procedures"].append(row)
        print(
            f"seed {seed}: best member fixed {row['fixed_best']:8.1f}, pbt {row['pbt_best']:8.1f}; "
            f"mean fixed {row['fixed_mean']:8.1f}, pbt {row['pbt_mean']:8.1f}; {row['copies']} copies; "
            f"{row['fixed_s']:.0f} s / {row['pbt_s']:.0f} s",
            flush=True,
        )
    wins = sum(r["pbt_best"] > r["fixed_best"] for r in record["procedures"])
    record["pbt_best_wins"] = wins
    print(f"\n{harness.machine_header(None, 'optuna')}\n")
    header = [
        "procedure seed",
        "fixed: best member",
        "PBT: best member",
        "fixed: mean of 8",
        "PBT: mean of 8",
        "copies",
    ]
    keys = ("fixed_best", "pbt_best", "fixed_mean", "pbt_mean")
    rows = [[seed, *(f"{r[k]:.1f}" for k in keys), r["copies"]] for seed, r in enumerate(record["procedures"])]
    print(harness.markdown_table(header, rows))
    print(f"\nPBT's best member beats the best fixed member in {wins} of {args.seeds} procedures")
    finish_record(record, args.json)


if __name__ == "__main__":
    main()
