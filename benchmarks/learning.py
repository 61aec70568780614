"""Trains a config for several seeds and prints the final deterministic evaluation per seed (markdown table).

python benchmarks/learning.py configs/cartpole.yaml --seeds 0 1 2 3 4 [--threshold 475]
"""

import argparse

import numpy as np

import harness  # benchmarks/ is sys.path[0] for a script
import kppo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threshold", type=float, default=None, help="mark each seed reached / not reached")
    args = parser.parse_args()
    config = kppo.Config.from_yaml(args.config)
    finals = []
    print(
        f"{config.env}: {config.total_timesteps:,} steps, {config.num_eval_envs} deterministic eval episodes\n"
        f"{harness.machine_header()}\n"
    )
    header = ["seed", "final eval mean +- std", "best round", "compile s", "run s", "steps/s"]
    rows = []
    for seed in args.seeds:
        result = kppo.train(config=config, seed=seed)
        m, t = result.metrics, result.timings
        final = float(m["eval/mean_returns"][-1])
        finals.append(final)
        steps_per_s = m["train/total_steps"][-1] / t["total_s"]
        row = [
            seed,
            f"{final:.1f} +- {m['eval/std_returns'][-1]:.1f}",
            f"{m['eval/mean_returns'].max():.1f}",
            f"{t['compile_s']:.1f}",
            f"{t['run_s']:.1f}",
            f"{steps_per_s:,.0f}",
        ]
        rows.append(row + (["yes" if final >= args.threshold else "no"] if args.threshold is not None else []))
    print(harness.markdown_table(header + (["reached"] if args.threshold is not None else []), rows))
    print(f"\nmean over seeds: {np.mean(finals):.1f} +- {np.std(finals):.1f} (min {np.min(finals):.1f})")


if __name__ == "__main__":
    main()
