#!/usr/bin/env python
"""CNN PPO on TF-native MinAtar Breakout (gymnax mode: no sticky actions, 1,000-step episodes) as one compiled program
per call: training steps/s, and the final evaluation return of each seed with its bootstrap 95% interval.

    .venv/bin/python benchmarks/minatar_cnn.py                            # throughput: 1 seed, 262k steps
    .venv/bin/python benchmarks/minatar_cnn.py --seeds 0 1 2 --steps 2000000 --population   # a learning run
    .venv/bin/python benchmarks/minatar_cnn.py --steps 10000000 --seeds 0 1 2 --population  # gymnax's budget (GPU)
    .venv/bin/python benchmarks/minatar_cnn.py --steps 10000000 --seeds 0 1 2 --eval-rounds 20 \
        --save benchmarks/results/minatar/agents --json benchmarks/results/minatar/learning_10m.json  # one by one

The setting (`SETTING`): SmallCNN (16 3x3 filters, 128 features; kppo.agent.extractors) shared by a 64-unit ReLU
actor and critic head, 128 envs x 128 steps, 4 epochs of 8 minibatches, Adam 5e-4 annealed linearly, entropy 0.01,
clip 0.2, gamma 0.99, lambda 0.95: purejaxrl's MinAtar PPO settings, with the CNN. gymnax reports 28 for its PPO on
Breakout-MinAtar at 10M steps (an MLP). Steps/s counts training calls after the first (compilation excluded); the
evaluation is the last round's 64 deterministic episodes per seed. `--save DIR` writes each seed's agent to
DIR/seed<N> (`kppo.training.agents.load_agent` reads it back); `--json` is rewritten after every seed (the per-round
evaluation, training-return and entropy curves, wall time, steps/s and load average of each); each evaluation round
prints one line. `--set KEY=VALUE ...` changes scalar fields of SETTING (e.g. gymnax-blines' `gamma=0.999`), recorded
in the JSON as `changes`. Results: docs/benchmarks/minatar.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETTING: dict[str, Any] = dict(
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
#: gymnax-blines' own PPO for Breakout-MinAtar (agents/Breakout-MinAtar/ppo.yaml, utils/ppo.py, utils/models.py), the
#: setting its published 28 comes from: separate 2 x 256 ReLU MLPs on the flattened grid (flax's lecun-normal
#: kernels), 64 envs x 128 steps, 4 epochs of 8 minibatches, optax Adam (eps 1e-5 after the bias correction: torch's
#: order) at a constant 5e-4 (its warm-up runs from 5e-4 to 5e-4), gamma 0.999, values clipped by 0.2 (max form).
#: Not reproduced: its biases start U(0, 0.05) (here 0) and it drops every 129th transition.
GYMNAX_MLP: dict[str, Any] = dict(
    features_extractor="flatten",
    actor_hidden_units=(256, 256),
    critic_hidden_units=(256, 256),
    activation="relu",
    kernel_init="lecun_normal",
    adam_style="torch",
    num_envs=64,
    num_steps=128,
    num_epochs=4,
    num_minibatches=8,
    learning_rate=5e-4,
    lr_schedule="constant",
    ent_coef=0.01,
    clip_range=0.2,
    clip_range_vf=0.2,
    gamma=0.999,
    gae_lambda=0.95,
    num_eval_envs=64,
    iterations_per_call=4,
)
#: gymnax-blines' hyperparameters with SETTING's SmallCNN, one for the actor and one for the critic (as its MLPs are
#: separate).
GYMNAX_CNN: dict[str, Any] = {
    **GYMNAX_MLP,
    **{
        key: SETTING[key]
        for key in ("features_extractor", "normalize_images", "actor_hidden_units", "critic_hidden_units")
    },
    "kernel_init": "orthogonal",
    "share_features_extractor": False,
}
SETTINGS = {"purejaxrl_cnn": SETTING, "gymnax_mlp": GYMNAX_MLP, "gymnax_cnn": GYMNAX_CNN}


def main() -> None:
    import harness  # benchmarks/ is sys.path[0] for a script

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="breakout_minatar_gymnax")
    parser.add_argument("--steps", type=int, default=128 * 128 * 16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--population", action="store_true", help="all seeds in one compiled program")
    parser.add_argument("--eval-rounds", type=int, default=4)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--save", type=Path, help="write each seed's agent to DIR/seed<N> (not with --population)")
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="purejaxrl_cnn", help="the base setting")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="change SETTING (e.g. gamma=0.999)")
    args = parser.parse_args()

    import numpy as np

    import kppo
    from benchmarks.stats import bootstrap_mean_ci

    from kppo.agent import checkpoint

    base = SETTINGS[args.setting]
    changes = {key: type(base[key])(value) for key, value in (item.split("=", 1) for item in args.set)}
    config = kppo.Config(**{**base, **changes}, total_timesteps=args.steps, eval_freq=args.eval_rounds)
    calls: list[float] = []

    def progress(steps: int) -> None:
        calls.append(time.perf_counter())

    def show_round(metrics: dict) -> None:  # one line per evaluation round, to follow a long run
        names = ("train/total_steps", "eval/mean_returns", "rollout/ep_rew_mean", "train/entropy")
        print(json.dumps({name: np.asarray(metrics[name]).round(3).tolist() for name in names}), flush=True)

    runs = [args.seeds] if args.population else [[s] for s in args.seeds]
    finals: list[float] = []
    rates: list[float] = []
    per_seed: list[dict] = []
    for seeds in runs:
        calls.clear()
        load_before = os.getloadavg()
        start = time.perf_counter()
        result = kppo.train(
            args.env, config, seed=seeds if len(seeds) > 1 else seeds[0], on_progress=progress, on_eval=show_round
        )
        wall = time.perf_counter() - start
        members = result.members if isinstance(result, kppo.PopulationResult) else [result]
        steps_per_call = config.num_envs * config.num_steps * config.iterations_per_call * len(seeds)
        rate = None
        if len(calls) > 2:  # training calls after the first; evaluation rounds fall between some of them
            rate = steps_per_call * (len(calls) - 2) / (calls[-1] - calls[1])
            rates.append(rate)
        for seed, member in zip(seeds, members):
            final = float(member.metrics["eval/mean_returns"][-1])
            finals.append(final)
            row = {
                "seed": seed,
                "final_eval": round(final, 2),
                "final_eval_std": round(float(member.metrics["eval/std_returns"][-1]), 2),
                "eval_steps": [int(x) for x in member.metrics["train/total_steps"]],
                "eval_curve": [round(float(x), 2) for x in member.metrics["eval/mean_returns"]],
                "train_return_curve": [round(float(x), 2) for x in member.metrics["rollout/ep_rew_mean"]],
                "entropy_curve": [round(float(x), 4) for x in member.metrics["train/entropy"]],
                "wall_s": round(wall, 1),
                "steps_per_s": None if rate is None else round(rate),
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            }
            if args.save is not None and not args.population:
                stats = member.runner_state.rollout
                folder = checkpoint.save(
                    args.save / f"seed{seed}",
                    member.config.to_yaml(),
                    member.agent,
                    stats.obs_stats,
                    stats.return_stats,
                    member.observation_space,
                    member.action_space,
                )
                row["agent"] = str(folder)
            per_seed.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith(("_steps", "_curve"))}), flush=True)
        low, high = bootstrap_mean_ci(finals) if len(finals) > 1 else (finals[0], finals[0])
        summary = {
            **harness.machine(),
            "env": args.env,
            "steps_per_seed": args.steps,
            "seeds": args.seeds,
            "population": args.population,
            "setting": args.setting,
            "changes": changes,
            "steps_per_s": [round(r) for r in rates],
            "final_eval_mean": round(sum(finals) / len(finals), 2),
            "final_eval_ci95": [round(low, 2), round(high, 2)],
            "per_seed": per_seed,
        }
        if args.json:  # rewritten after every run, so a cut-short job keeps the seeds that finished
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(summary, indent=1))
    print(harness.machine_header())
    print(json.dumps({k: v for k, v in summary.items() if k != "per_seed"}))


if __name__ == "__main__":
    main()
