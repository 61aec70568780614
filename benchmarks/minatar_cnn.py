#!/usr/bin/env python
"""CNN PPO on TF-native MinAtar Breakout (gymnax mode: no sticky actions, 1,000-step episodes) as one compiled program
per call: training steps/s, and the final evaluation return of each seed with its bootstrap 95% interval.

    .venv/bin/python benchmarks/minatar_cnn.py                            # throughput: 1 seed, 262k steps
    .venv/bin/python benchmarks/minatar_cnn.py --seeds 0 1 2 --steps 2000000 --population   # a learning run
    .venv/bin/python benchmarks/minatar_cnn.py --steps 10000000 --seeds 0 1 2 --population  # gymnax's budget (GPU)

The setting (`SETTING`): SmallCNN (16 3x3 filters, 128 features; kppo.agent.extractors) shared by a 64-unit ReLU
actor and critic head, 128 envs x 128 steps, 4 epochs of 8 minibatches, Adam 5e-4 annealed linearly, entropy 0.01,
clip 0.2, gamma 0.99, lambda 0.95: purejaxrl's MinAtar PPO settings, with the CNN. gymnax reports 28 for its PPO on
Breakout-MinAtar at 10M steps (an MLP). Steps/s counts training calls after the first (compilation excluded); the
evaluation is the last round's 64 deterministic episodes per seed. Results: docs/benchmarks/images.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETTING = dict(
    features_extractor="cnn",
    normalize_images=False,
    actor_hidden_units=(64,),
    critic_hidden_units=(64,),
    activation="relu",
    num_envs=128,
    num_steps=128,
    num_epochs=4,
    num_minibatches=8,
    learning_rate=5e-4,
    lr_schedule="linear",
    ent_coef=0.01,
    clip_range=0.2,
    gamma=0.99,
    gae_lambda=0.95,
    num_eval_envs=64,
    iterations_per_call=4,
)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="breakout_minatar_gymnax")
    parser.add_argument("--steps", type=int, default=128 * 128 * 16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--population", action="store_true", help="all seeds in one compiled program")
    parser.add_argument("--eval-rounds", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import kppo
    from benchmarks.stats import bootstrap_mean_ci

    config = kppo.Config(**SETTING, total_timesteps=args.steps, eval_freq=args.eval_rounds)
    calls: list[float] = []

    def progress(steps: int) -> None:
        calls.append(time.perf_counter())

    runs = [args.seeds] if args.population else [[s] for s in args.seeds]
    finals, rates = [], []
    for seeds in runs:
        calls.clear()
        start = time.perf_counter()
        result = kppo.train(args.env, config, seed=seeds if len(seeds) > 1 else seeds[0], on_progress=progress)
        wall = time.perf_counter() - start
        members = result.members if hasattr(result, "members") else [result]
        steps_per_call = config.num_envs * config.num_steps * config.iterations_per_call * len(seeds)
        if len(calls) > 2:  # training calls after the first; evaluation rounds fall between some of them
            rates.append(steps_per_call * (len(calls) - 2) / (calls[-1] - calls[1]))
        for seed, member in zip(seeds, members):
            final = float(member.metrics["eval/mean_returns"][-1])
            finals.append(final)
            print(json.dumps({"seed": seed, "final_eval": round(final, 2), "wall_s": round(wall, 1)}), flush=True)
    low, high = bootstrap_mean_ci(finals) if len(finals) > 1 else (finals[0], finals[0])
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": cpu_model(),
        "env": args.env,
        "steps_per_seed": args.steps,
        "seeds": args.seeds,
        "population": args.population,
        "steps_per_s": [round(r) for r in rates],
        "final_eval_mean": round(sum(finals) / len(finals), 2),
        "final_eval_ci95": [round(low, 2), round(high, 2)],
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
