"""The peer side of the tuner benchmark: RL-Zoo's Optuna search for PPO, timed.

Runs `python -m rl_zoo3.train --algo ppo -optimize ...` (rl_zoo3 2.9.2, Stable-Baselines3 2.9.2, torch on CPU) as a
subprocess, exactly as a user would, with a TPE sampler (seeded), a median pruner, `--n-evaluations` intermediate
evaluations per trial for pruning, 10 deterministic evaluation episodes, one job and one torch thread. The search
starts from RL-Zoo's `hyperparams/ppo.yml` entry for the env (CartPole-v1: 8 DummyVecEnv envs, MlpPolicy) and samples
the rest with `rl_zoo3.hyperparams_opt.sample_ppo_params`; a trial's value is the mean episode return of its last
evaluation. Prints one JSON line with the completed and pruned trial counts, the best value and parameters (in
RL-Zoo's sampled form: `batch_size_pow`, `one_minus_gamma`, ...), the wall clock of the whole subprocess and the
package versions. RL-Zoo's own output goes to stderr.

Run it under the peer venv (`.venv-bench`: torch 2.13.0+cpu, stable-baselines3, rl_zoo3, optuna, pandas):

    .venv-bench/bin/python benchmarks/tune_zoo_peer.py --env CartPole-v1 --trials 16 --n-timesteps 50000

RL-Zoo writes its study into `--storage` (default: a SQLite file in its log folder; `.log`: a journal file), and the
study is read back from there (never from the pickle RL-Zoo also writes); the study name must be new there, as RL-Zoo
would otherwise resume it.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

import harness  # benchmarks/ is sys.path[0] for a script

PACKAGES = ("rl_zoo3", "stable_baselines3", "sb3_contrib", "optuna", "torch", "gymnasium", "numpy")


def zoo_command(args: argparse.Namespace, log_folder: Path) -> list[str]:
    """The `rl_zoo3.train` command line of the search."""
    command = [
        sys.executable,
        "-m",
        "rl_zoo3.train",
        "--algo",
        "ppo",
        "--env",
        args.env,
        "-optimize",
        "--n-trials",
        str(args.trials),
        "--n-timesteps",
        str(args.n_timesteps),
        "--n-evaluations",
        str(args.n_evaluations),
        "--eval-episodes",
        str(args.eval_episodes),
        "--sampler",
        "tpe",
        "--pruner",
        "median",
        "--n-startup-trials",
        str(args.n_startup_trials),
        "--seed",
        str(args.seed),
        "--n-jobs",
        "1",
        "--num-threads",
        "1",
        "--device",
        "cpu",
        "--no-optim-plots",
        "--log-folder",
        str(log_folder),
    ]
    storage = args.storage or f"sqlite:///{log_folder / 'study.db'}"
    return [*command, "--storage", storage, "--study-name", args.study_name]


def open_storage(storage: str) -> str | optuna.storages.BaseStorage:
    """The storage as RL-Zoo opens it: a `.log` path is a journal file, anything else an Optuna storage URL."""
    if storage.endswith(".log"):
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))
    return storage


def check_fresh(storage: str, study_name: str) -> None:
    """Refuse a study name that the storage already holds (RL-Zoo would resume it and the counts would mix)."""
    if storage.endswith(".log") and not Path(storage).exists():
        return
    if study_name in optuna.get_all_study_names(open_storage(storage)):
        raise SystemExit(f"study {study_name!r} already exists in {storage}; pass a new --study-name")


def load_study(args: argparse.Namespace, log_folder: Path) -> optuna.Study:
    """The finished study, from the storage RL-Zoo wrote it into."""
    storage = args.storage or f"sqlite:///{log_folder / 'study.db'}"
    return optuna.load_study(study_name=args.study_name, storage=open_storage(storage))


def versions() -> dict[str, str]:
    found = harness.package_versions(*PACKAGES)
    found["python"] = platform.python_version()
    return found


def summary(args: argparse.Namespace, study: optuna.Study, wall_s: float) -> dict[str, Any]:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    pruned = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))
    best = study.best_trial if complete else None
    return {
        "framework": "rl_zoo3",
        "env": args.env,
        "trials": len(complete),
        "pruned": len(pruned),
        "failed": len(study.get_trials(deepcopy=False, states=(TrialState.FAIL,))),
        "best_value": best.value if best else None,
        "best_trial": best.number if best else None,
        "best_params": best.params if best else {},
        "n_timesteps": args.n_timesteps,
        "n_evaluations": args.n_evaluations,
        "eval_episodes": args.eval_episodes,
        "seed": args.seed,
        "wall_s": round(wall_s, 1),
        "versions": versions(),
    }


def run(args: argparse.Namespace, log_folder: Path) -> dict[str, Any]:
    command = zoo_command(args, log_folder)
    print(" ".join(command), file=sys.stderr, flush=True)
    start = time.perf_counter()
    subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, check=True)
    wall_s = time.perf_counter() - start
    return summary(args, load_study(args, log_folder), wall_s)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--n-timesteps", type=int, default=50_000, help="timesteps per trial")
    parser.add_argument("--n-evaluations", type=int, default=5, help="intermediate evaluations per trial")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--n-startup-trials", type=int, default=10, help="random trials before TPE (RL-Zoo's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage", help="Optuna storage URL (sqlite:///study.db) or journal file (*.log)")
    parser.add_argument("--study-name", help="default: rl_zoo3-ppo-ENV-seedSEED")
    parser.add_argument("--log-folder", type=Path, help="keep RL-Zoo's logs here (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.study_name is None:
        args.study_name = f"rl_zoo3-ppo-{args.env}-seed{args.seed}"
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.storage:
        check_fresh(args.storage, args.study_name)
    if args.log_folder is not None:
        args.log_folder.mkdir(parents=True, exist_ok=True)
        result = run(args, args.log_folder)
    else:
        with tempfile.TemporaryDirectory(prefix="rl_zoo3_") as folder:
            result = run(args, Path(folder))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
