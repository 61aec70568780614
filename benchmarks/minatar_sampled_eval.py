#!/usr/bin/env python
"""Breakout-MinAtar agents evaluated as gymnax-blines evaluates its PPO (the setting its published 28 comes from):
actions drawn from the policy, 164 episodes, gymnax mode (no sticky actions, 1,000-step limit); beside it the
deterministic (argmax) return kppo's own evaluation reports. Episodes are played in the `minatar` package (frame for
frame the TF-native task: tests/envs/test_minatar.py), on float grids as trained.

    .venv/bin/python benchmarks/minatar_sampled_eval.py benchmarks/results/minatar/agents_gymnax_mlp/seed* \
        --json benchmarks/results/minatar/sampled_eval_gymnax_mlp.json

Per agent: the mean return with its bootstrap 95% interval over the episodes; over the agents: the mean of their
means with its bootstrap interval over the agents (`benchmarks/stats.py`). Results: docs/benchmarks/minatar.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EPISODES = 164  # gymnax-blines' num_test_rollouts


def main() -> None:
    import harness  # benchmarks/ is sys.path[0] for a script
    from minatar_int8_loop import load_trained, play

    from benchmarks.stats import bootstrap_mean_ci

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agents", type=Path, nargs="+", help="agent directories (minatar_cnn.py --save)")
    parser.add_argument("--episodes", type=int, default=EPISODES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for index, path in enumerate(args.agents):
        _, _, policy = load_trained(path)
        rng = np.random.default_rng(index)
        sampled, _ = play(functools.partial(policy.get_action, rng=rng), args.episodes, floats=True, sticky=0.0)
        greedy, _ = play(policy.get_action, args.episodes, floats=True, sticky=0.0)
        row = {
            "agent": str(path),
            "sampled_mean": round(float(sampled.mean()), 2),
            "sampled_ci95": [round(x, 2) for x in bootstrap_mean_ci(sampled)],
            "deterministic_mean": round(float(greedy.mean()), 2),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    means = [row["sampled_mean"] for row in rows]
    low, high = bootstrap_mean_ci(means) if len(means) > 1 else (means[0], means[0])
    summary = {
        **harness.machine(),
        "episodes": args.episodes,
        "sampled_mean_over_agents": round(float(np.mean(means)), 2),
        "sampled_ci95_over_agents": [round(low, 2), round(high, 2)],
        "deterministic_mean_over_agents": round(float(np.mean([r["deterministic_mean"] for r in rows])), 2),
        "per_agent": rows,
    }
    print(harness.machine_header())
    print(json.dumps({k: v for k, v in summary.items() if k != "per_agent"}))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
