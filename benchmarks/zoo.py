"""Trains RL-Zoo's PPO entries from its hyperparams file as it is and evaluates as rl-zoo3's enjoy.py (deterministic
episodes), beside the zoo's benchmark.md value (markdown table and one learning-curve plot per env;
docs/benchmarks/zoo.md).

python benchmarks/zoo.py run --file tests/fixtures/zoo/ppo.yml --envs Acrobot-v1 --seeds 0 1 2 3 4
python benchmarks/zoo.py report --envs CartPole-v1 Acrobot-v1 --plots docs/benchmarks/zoo
python benchmarks/zoo.py start --envs Pendulum-v1 Hopper-v4 CarRacing-v2

`run` trains each (env, seed) not yet on disk and writes one JSON per run as it completes
(`benchmarks/results/zoo/<env>/seed<k>.json`: the final evaluation, the learning curve, timings, the machine).
Each entry is read by `kppo train`'s reader (`kppo.config.zoo.read_entry`, `kppo.tuning.zoo.zoo_config`: SB3's PPO
defaults under the entry) and trained at its own `n_timesteps`, evaluated in `--rounds` rounds of `--episodes`
deterministic episodes (one per evaluation env), the normalization statistics frozen and raw rewards; the last
round, after the last update, is the run's result. `report` reads the JSONs back: kppo's mean over seeds with the
percentile bootstrap 95% interval, beside the zoo's row, and a PNG per env of the curve (mean, the seeds' range) with
the zoo's final value as a line. `start` runs `kppo train FILE --env KEY --set n_timesteps=1 --no-export` for each
entry in a fresh process (one whole rollout, as SB3 counts `n_timesteps`) and tabulates what each trained or why it
was refused. `--env-id` trains an entry on another registered id (an id gymnasium retired).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness  # benchmarks/ is sys.path[0] for a script
import stats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "zoo"
#: rl-baselines3-zoo's benchmark.md, PPO rows: env -> (mean_reward, std_reward, n_timesteps, the row's env id).
ZOO_BENCHMARK = {
    "CartPole-v1": (500.000, 0.000, "100k", "CartPole-v1"),
    "Pendulum-v1": (-172.225, 104.159, "100k", "Pendulum-v1"),
    "Acrobot-v1": (-73.506, 18.201, "1M", "Acrobot-v1"),
    "MountainCar-v0": (-110.423, 19.473, "1M", "MountainCar-v0"),
    "MountainCarContinuous-v0": (88.343, 2.572, "20k", "MountainCarContinuous-v0"),
    "LunarLander-v3": (242.119, 31.823, "1M", "LunarLander-v2"),
    "LunarLanderContinuous-v3": (270.863, 32.072, "1M", "LunarLanderContinuous-v2"),
    "BipedalWalker-v3": (213.299, 129.490, "5M", "BipedalWalker-v3"),
    "BipedalWalkerHardcore-v3": (122.374, 117.605, "100M", "BipedalWalkerHardcore-v3"),
    "HalfCheetah-v4": (5819.099, 663.530, "1M", "HalfCheetah-v3"),
    "Hopper-v4": (2410.435, 10.026, "1M", "Hopper-v3"),
    "Ant-v4": (1327.158, 451.577, "1M", "Ant-v3"),
    "Swimmer-v4": (281.561, 9.671, "1M", "Swimmer-v3"),
    "Walker2d-v4": (3478.798, 821.708, "1M", "Walker2d-v3"),
}


def train_entry(path: Path, key: str, env_id: str, seed: int, episodes: int, rounds: int) -> dict:
    """One seed of an entry: the learning curve (deterministic evaluation rounds), the final round and timings."""
    import kppo
    from kppo.config.zoo import read_entry
    from kppo.tuning.zoo import is_atari, zoo_config

    entry = read_entry(path, key, is_atari)
    config = zoo_config(entry).replace(env=env_id, seed=seed, num_eval_envs=episodes, eval_freq=rounds)
    start = time.perf_counter()
    result = kppo.train(config=config)
    wall = time.perf_counter() - start
    metrics = result.metrics
    curve_steps = [int(s) for s in metrics["train/total_steps"]]
    curve = [float(r) for r in metrics["eval/mean_returns"]]
    return {
        "entry": key,
        "env": env_id,
        "seed": seed,
        "file": str(path),
        "settings": entry.settings,
        "episodes": episodes,
        "final": curve[-1],
        "final_std": float(metrics["eval/std_returns"][-1]),
        "steps": curve_steps[-1],
        "curve_steps": curve_steps,
        "curve": curve,
        "wall_s": wall,
    }


def result_path(env: str, seed: int) -> Path:
    return RESULTS / env / f"seed{seed}.json"


def run(args: argparse.Namespace) -> None:
    path = Path(args.file)
    for key in args.envs:
        env_id = args.env_id or key
        for seed in args.seeds:
            out = result_path(env_id, seed)
            if out.exists():
                print(f"{env_id} seed {seed}: on disk ({out.relative_to(ROOT)})", flush=True)
                continue
            record = harness.run_record(**train_entry(path, key, env_id, seed, args.episodes, args.rounds))
            harness.finish_record(record, str(out))
            print(f"{env_id} seed {seed}: {record['final']:.1f} in {record['wall_s']:.0f} s", flush=True)


def load_runs(env: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RESULTS / env).glob("seed*.json"))]


def plot(env: str, runs: list[dict], out: Path) -> None:
    """The learning curve: mean over seeds and their range, the zoo's final value as a horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.asarray(runs[0]["curve_steps"])
    curves = np.asarray([r["curve"] for r in runs])
    fig, ax = plt.subplots(figsize=(4.8, 3.0), dpi=80)
    ax.fill_between(steps, curves.min(0), curves.max(0), alpha=0.25, label=f"kppo, range of {len(runs)} seeds")
    ax.plot(steps, curves.mean(0), label="kppo, mean")
    if env in ZOO_BENCHMARK:
        zoo_mean, zoo_std = ZOO_BENCHMARK[env][:2]
        ax.axhline(zoo_mean, color="k", linestyle="--", linewidth=1, label="RL-Zoo's final (benchmark.md)")
        ax.axhspan(zoo_mean - zoo_std, zoo_mean + zoo_std, color="k", alpha=0.06)
    ax.set_title(env, fontsize=10)
    ax.set_xlabel("timesteps", fontsize=8)
    ax.set_ylabel(f"deterministic return ({runs[0]['episodes']} episodes)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def report(args: argparse.Namespace) -> None:
    rows, loads, dates = [], [], set()
    for env in args.envs:
        runs = load_runs(env)
        if not runs:
            continue
        loads += [r["load_average_start"][0] for r in runs if r.get("load_average_start")]
        dates |= {r["date"][:10] for r in runs}
        finals = np.asarray([r["final"] for r in runs])
        low, high = stats.bootstrap_mean_ci(finals)
        zoo_mean, zoo_std, budget, zoo_id = ZOO_BENCHMARK.get(env, (float("nan"), float("nan"), "?", "?"))
        within = bool(abs(finals.mean() - zoo_mean) <= zoo_std) if zoo_std == zoo_std else None
        label = env if zoo_id in (env, "?") else f"{env} (zoo: {zoo_id})"
        rows.append(
            [
                label,
                f"{runs[0]['steps']:,}",
                len(runs),
                f"{finals.mean():.1f}",
                f"[{low:.1f}, {high:.1f}]" if len(runs) > 1 else "— (1 seed)",
                " / ".join(f"{f:.1f}" for f in finals),
                f"{zoo_mean:.1f} ± {zoo_std:.1f} ({budget})",
                {True: "yes", False: "no", None: "n/a"}[within],
                f"{np.mean([r['wall_s'] for r in runs]):.0f}",
            ]
        )
        if args.plots:
            plot(env, runs, Path(args.plots) / f"{env}.png")
    header = [
        "env",
        "steps",
        "seeds",
        "kppo mean",
        "95% CI",
        "per seed",
        "zoo (benchmark.md)",
        "within zoo's std",
        "wall s / seed",
    ]
    print(harness.markdown_table(header, rows, align="lrrrrrrlr"))
    if loads:
        print(
            f"\nruns of {', '.join(sorted(dates))}; 1-minute load average at their starts "
            f"{min(loads):.1f} to {max(loads):.1f}"
        )


def start_row(path: str, key: str, workdir: str) -> list:
    """One entry's row: the env trained, one rollout's steps and evaluation, the wall with start-up; or the refusal."""
    kppo_cli = Path(sys.executable).with_name("kppo")
    command = [str(kppo_cli), "train", path, "--env", key, "--set", "n_timesteps=1", "--no-export"]
    begin = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=900)
    wall = f"{time.perf_counter() - begin:.0f}"
    found = re.search(r"(\S+): final eval (\S+) \+- \S+ after ([\d,]+) steps", done.stdout + done.stderr)
    if done.returncode == 0 and found:
        return [key, found.group(1), found.group(3), found.group(2), wall]
    error = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    error = error.split(f"{key}.", 1)[-1]  # from the entry's key on: `env_wrapper: expected ...`
    return [key, "—", f"refused (rc {done.returncode})", f"`{error[:90]}`", wall]


def start(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        rows = [start_row(args.file, key, workdir) for key in args.envs]
    header = ["entry", "env trained", "steps (one rollout)", "eval after it", "wall s (with start-up)"]
    print(harness.markdown_table(header, rows, align="llrrr"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    train = sub.add_parser("run", help="train the (env, seed) runs not on disk yet, one JSON each")
    train.add_argument("--file", default=str(ROOT / "tests" / "fixtures" / "zoo" / "ppo.yml"))
    train.add_argument("--envs", nargs="+", required=True, help="the file's entries (keys)")
    train.add_argument("--env-id", help="train the entry on this registered id (one entry; its results' name)")
    train.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    train.add_argument("--episodes", type=int, default=20, help="deterministic evaluation episodes per round")
    train.add_argument("--rounds", type=int, default=20, help="evaluation rounds over the run (the curve)")
    summary = sub.add_parser("report", help="the table (and --plots) from the JSONs on disk")
    summary.add_argument("--envs", nargs="+", required=True)
    summary.add_argument("--plots", help="write <env>.png here")
    first = sub.add_parser("start", help="one rollout of each entry, through the CLI in a fresh process")
    first.add_argument("--file", default=str(ROOT / "tests" / "fixtures" / "zoo" / "ppo.yml"))
    first.add_argument("--envs", nargs="+", required=True, help="the file's entries (keys)")
    args = parser.parse_args()
    print(harness.machine_header())
    print()
    {"run": run, "report": report, "start": start}[args.mode](args)


if __name__ == "__main__":
    main()
