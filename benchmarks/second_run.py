"""Measures a second run of one configuration in one process: kppo with its kept programs, kppo tracing anew, SB3.

    python benchmarks/second_run.py [--repeats 3] [--python-peers .venv-bench/bin/python]

One process per framework runs the same small training `repeats` + 1 times with seeds 0, 1, ...: the first run traces
and compiles; kppo's later runs call its programs on their own variables (`kppo.training.runners.programs`), and the
"traced anew" rows empty that cache before each run, which is what every run paid before. SB3 (torch, no compile)
runs the same `PPO("MlpPolicy", "CartPole-v1", ...).learn(...)` in its interpreter. The table gives the first run and
the median of the later ones, end to end (building the model, training, evaluation where the path has one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

import harness  # benchmarks/ is sys.path[0] for a script

STEPS = 1024  # 4 envs x 64 steps x 4 iterations (SB3: 1 env x 256 steps x 4)

KPPO = """
import json, sys, time
import kppo
from kppo.training.runners import programs
path, repeats, keep = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
config = kppo.Config(num_envs=4, num_steps=64, total_timesteps={steps}, num_eval_envs=4, eval_freq=1,
                     env_backend="native" if path == "native" else "gymnasium")
times = []
for seed in range(repeats + 1):
    if not keep:
        programs.RUN_PROGRAMS.clear()
    t0 = time.perf_counter()
    if path == "sb3":
        kppo.PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, seed=seed).learn({steps})
    else:
        kppo.train("CartPole-v1", config.replace(seed=seed))
    times.append(time.perf_counter() - t0)
print(json.dumps(dict(times=times)))
"""

SB3 = """
import json, sys, time
from importlib import metadata
import torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
repeats = int(sys.argv[1])
times = []
for seed in range(repeats + 1):
    t0 = time.perf_counter()
    PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, seed=seed).learn({steps})
    times.append(time.perf_counter() - t0)
print(json.dumps(dict(times=times, versions={{n: metadata.version(n) for n in ("stable-baselines3", "torch")}})))
"""


def _run(python: str, worker: str, *args: str) -> dict:
    out = subprocess.run([python, "-c", worker.format(steps=STEPS), *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"worker failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs after the first")
    parser.add_argument("--python-peers", default=None, help="an interpreter with SB3 and torch for its row")
    args = parser.parse_args()
    rows = []
    paths = (("native", "kppo.train, TF-native"), ("gymnasium", "kppo.train, gymnasium"), ("sb3", "kppo.PPO"))
    for path, label in paths:
        for keep in (True, False):
            times = _run(sys.executable, KPPO, path, str(args.repeats), "1" if keep else "0")["times"]
            kind = "kept programs" if keep else "traced anew"
            rows.append((f"{label}, {kind}", times[0], statistics.median(times[1:])))
    peer_versions = None
    if args.python_peers:
        peer = _run(args.python_peers, SB3, str(args.repeats))
        rows.append(("SB3 PPO (torch, 1 thread)", peer["times"][0], statistics.median(peer["times"][1:])))
        peer_versions = peer["versions"]
    print(harness.machine_header(peer_versions))
    print()
    table = [(name, harness.number(first), harness.number(later)) for name, first, later in rows]
    print(harness.markdown_table(("run", "first run s", "later runs s (median)"), table))


if __name__ == "__main__":
    main()
