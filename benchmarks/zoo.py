"""Trains RL-Zoo's PPO entries from its hyperparams file as it is and evaluates as rl-zoo3's enjoy.py (deterministic
episodes), beside the zoo's benchmark.md value (markdown table; docs/benchmarks/zoo.md).

python benchmarks/zoo.py --envs CartPole-v1 Pendulum-v1 --seeds 0 1 2 3 4 [--file configs/zoo/CartPole-v1.yml]

Each entry is read by `kppo train`'s reader (`kppo.tuning.zoo.read_zoo`: SB3's PPO defaults under the entry) and
trained at its own `n_timesteps`; then `--episodes` deterministic episodes, one per evaluation env, with the
normalization statistics frozen and raw rewards. The interval is the percentile bootstrap of the mean over seeds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import harness  # benchmarks/ is sys.path[0] for a script
import stats
import kppo
from kppo.tuning.zoo import read_zoo

ROOT = Path(__file__).resolve().parents[1]
#: rl-baselines3-zoo's benchmark.md, PPO rows: env -> (mean_reward, std_reward, n_timesteps).
ZOO_BENCHMARK = {
    "CartPole-v1": (500.000, 0.000, "100k"),
    "Pendulum-v1": (-172.225, 104.159, "100k"),
    "Acrobot-v1": (-73.506, 18.201, "1M"),
    "MountainCar-v0": (-110.423, 19.473, "1M"),
    "MountainCarContinuous-v0": (88.343, 2.572, "20k"),
}


def train_entry(path: Path, env: str, seed: int, episodes: int, timesteps: int | None) -> dict:
    """One seed of an entry: its final deterministic evaluation and timings."""
    _, config = read_zoo(path, env)
    config = config.replace(seed=seed, num_eval_envs=episodes, eval_freq=1)
    if timesteps is not None:
        config = config.replace(total_timesteps=timesteps)
    start = time.perf_counter()
    result = kppo.train(config=config)
    wall = time.perf_counter() - start
    final = float(result.metrics["eval/mean_returns"][-1])
    steps = int(result.metrics["train/total_steps"][-1])
    return {"env": env, "seed": seed, "final": final, "steps": steps, "wall_s": wall}


def entry_file(args: argparse.Namespace, env: str) -> Path:
    return Path(args.file) if args.file else ROOT / "configs" / "zoo" / f"{env}.yml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Pendulum-v1"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--file", help="an RL-Zoo hyperparams file (default: configs/zoo/<env>.yml)")
    parser.add_argument("--episodes", type=int, default=20, help="deterministic evaluation episodes per seed")
    parser.add_argument("--timesteps", type=int, help="override n_timesteps (a smoke run; not the zoo's budget)")
    parser.add_argument("--json", help="write the per-seed records here")
    args = parser.parse_args()
    print(harness.machine_header())
    print()
    records, rows = [], []
    for env in args.envs:
        runs = [train_entry(entry_file(args, env), env, seed, args.episodes, args.timesteps) for seed in args.seeds]
        records += runs
        finals = np.asarray([r["final"] for r in runs])
        low, high = stats.bootstrap_mean_ci(finals)
        zoo_mean, zoo_std, budget = ZOO_BENCHMARK.get(env, (float("nan"), float("nan"), "?"))
        within = abs(finals.mean() - zoo_mean) <= zoo_std if zoo_std == zoo_std else False
        rows.append(
            [
                env,
                f"{runs[0]['steps']:,}",
                len(runs),
                f"{finals.mean():.1f}",
                f"[{low:.1f}, {high:.1f}]",
                " / ".join(f"{f:.1f}" for f in finals),
                f"{zoo_mean:.1f} +- {zoo_std:.1f} ({budget})",
                "yes" if within else "no",
                f"{np.mean([r['wall_s'] for r in runs]):.0f}",
            ]
        )
    header = ["env", "steps", "seeds", "kppo mean", "95% CI", "per seed", "zoo", "within zoo's std", "wall s / seed"]
    print(harness.markdown_table(header, rows, align="lrrrrrrlr"))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": harness.machine(), "runs": records}, indent=1))


if __name__ == "__main__":
    main()
