#!/usr/bin/env python
"""kppo's search against RL-Zoo's on the same task, space and budget, side by side in one run.

For each env: RL-Zoo's `python -m rl_zoo3.train --algo ppo --env ENV -optimize --n-trials 16 --n-timesteps 50000
--n-evaluations 5 --eval-episodes 10` (benchmarks/tune_zoo_peer.py, run under the peer venv), then
`kppo tune ppo.yml --env ENV --trials 16 --set n_timesteps=50000 --set eval_freq=5 --set num_eval_envs=10` on the same
RL-Zoo file (the peer venv's own rl_zoo3/hyperparams/ppo.yml), with kppo's default space (RL-Zoo's
`sample_ppo_params` ranges), TPE with 10 startup trials and sampler seed 0, the median pruner; both on the gymnasium
env, one process, and each process timed around it. `--batched ENV` adds, for that env, the same search over the
sweepable part of RL-Zoo's space (learning rate, entropy, clip range, gamma, GAE lambda, max grad norm) run `--batch
8` at a time as populations: RL-Zoo's full space changes shapes (n_steps, batch size, epochs, layers) from trial to
trial, so its trials cannot share a program.

    .venv/bin/python benchmarks/tune_zoo.py --peer-python .venv-bench/bin/python --envs CartPole-v1,Acrobot-v1 \\
        --batched Acrobot-v1 --json benchmarks/results/tune/zoo.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

import harness  # benchmarks/ is sys.path[0] for a script
from harness import finish_record, package_versions, run_record

HERE = Path(__file__).resolve().parent
KPPO = [sys.executable, "-m", "kppo.cli"]
SWEEPABLE_ZOO_SPACE = {  # rl_zoo3 2.9.2 sample_ppo_params, its ranges for the fields a population member may vary
    "one_minus_gamma": {"type": "float", "low": 0.0001, "high": 0.03, "log": True},
    "one_minus_gae_lambda": {"type": "float", "low": 0.0001, "high": 0.1, "log": True},
    "learning_rate": {"type": "float", "low": 1e-5, "high": 0.002, "log": True},
    "ent_coef": {"type": "float", "low": 1e-8, "high": 0.1, "log": True},
    "clip_range": {"type": "categorical", "choices": [0.1, 0.2, 0.3, 0.4]},
    "max_grad_norm": {"type": "float", "low": 0.3, "high": 2.0},
}


def zoo_file(peer_python: str) -> Path:
    """RL-Zoo's own hyperparams/ppo.yml, from the peer venv."""
    code = "import pathlib, rl_zoo3; print(pathlib.Path(rl_zoo3.__file__).parent / 'hyperparams' / 'ppo.yml')"
    return Path(subprocess.run([peer_python, "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def run_peer(peer_python: str, env: str, args: argparse.Namespace) -> dict:
    command = [peer_python, str(HERE / "tune_zoo_peer.py"), "--env", env, "--trials", str(args.trials)]
    command += ["--n-timesteps", str(args.n_timesteps)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"RL-Zoo on {env} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def study_summary(out: Path) -> dict:
    import optuna

    storage = f"sqlite:///{out / 'study.db'}"
    (name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    states = [t.state.name for t in study.trials]
    best = study.best_trial
    return {
        "trials": states.count("COMPLETE"),
        "pruned": states.count("PRUNED"),
        "failed": states.count("FAIL"),
        "best_value": best.value,
        "best_trial": best.number,
        "best_params": best.params,
    }


def run_kppo(zoo: Path, env: str, args: argparse.Namespace, batch: int, space: dict | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="kppo_tune_") as folder:
        out = Path(folder)
        command = [*KPPO, "tune", str(zoo), "--env", env, "--trials", str(args.trials), "--batch", str(batch)]
        command += ["--sampler-seed", "0"]
        command += ["--set", f"n_timesteps={args.n_timesteps}", "--set", "eval_freq=5", "--set", "num_eval_envs=10"]
        command += ["--out", str(out / "study"), "--quiet"]
        if space is not None:
            (out / "space.yaml").write_text(yaml.safe_dump(space, sort_keys=False))
            command += ["--space", str(out / "space.yaml")]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"kppo tune on {env} failed:\n{done.stderr[-3000:]}")
        summary = study_summary(out / "study")
    space_name = "RL-Zoo's" if space is None else "RL-Zoo's sweepable part"
    return {"framework": "kppo", "env": env, "batch": batch, "space": space_name, "wall_s": round(wall, 1), **summary}


def line(row: dict) -> str:
    label = f"{row['framework']}" + (f" batch {row['batch']}" if row.get("batch", 1) > 1 else "")
    return (
        f"{row['env']:>12} {label:<16} {row['wall_s']:8.1f} s  best {row['best_value']:8.2f} (trial "
        f"{row['best_trial']})  {row['trials']} complete, {row['pruned']} pruned, {row['failed']} failed"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-python", default=str(HERE.parent / ".venv-bench" / "bin" / "python"))
    parser.add_argument("--envs", default="CartPole-v1,Acrobot-v1")
    parser.add_argument("--batched", default="Acrobot-v1", help="envs that also get the batched row ('' for none)")
    parser.add_argument("--parts", default="peer,kppo", help="peer, kppo (the batched rows come with kppo)")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--n-timesteps", type=int, default=50_000)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    zoo = zoo_file(args.peer_python)
    record = run_record(
        trials=args.trials,
        n_timesteps=args.n_timesteps,
        versions=package_versions("kppo", "tensorflow", "optuna", "gymnasium"),
        rows=[],
    )
    parts = args.parts.split(",")
    for env in args.envs.split(","):
        todo = [("peer", None)] if "peer" in parts else []
        if "kppo" in parts:
            todo += [("kppo", None)] + ([("kppo", 8)] if env in args.batched.split(",") else [])
        for who, batch in todo:
            if who == "peer":
                row = run_peer(args.peer_python, env, args)
            else:
                row = run_kppo(zoo, env, args, batch or 1, SWEEPABLE_ZOO_SPACE if batch else None)
            record["rows"].append(row)
            print(line(row), flush=True)
    peers = next((r.get("versions", {}) for r in record["rows"] if r["framework"] != "kppo"), {})
    print(f"\n{harness.machine_header(peers, 'optuna')}\n")
    cells = []
    for row in record["rows"]:
        peer = next((r for r in record["rows"] if r["env"] == row["env"] and r["framework"] != "kppo"), None)
        label = row["framework"] + (f", batch {row['batch']}" if row.get("batch", 1) > 1 else "")
        ratio = f"{row['wall_s'] / peer['wall_s']:.2f}" if peer else "n/a"
        outcome = f"{row['trials']} / {row['pruned']}"
        cells.append(
            [
                row["env"],
                label,
                f"{row['wall_s']:,.1f}",
                ratio,
                f"{row['best_value']:.1f} ({row['best_trial']})",
                outcome,
            ]
        )
    header = ["env", "search", "wall s", "this / RL-Zoo", "best value (trial)", "complete / pruned"]
    print(harness.markdown_table(header, cells))
    finish_record(record, args.json)


if __name__ == "__main__":
    main()
