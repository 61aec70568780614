#!/usr/bin/env python
"""Populations on gymnasium envs: N seeds as one population (one vector env of every member's envs, one batched
numpy actor, one compiled update) against N single runs, one fresh process each, and the env-alone floor.

Tasks:
  cartpole  gymnasium CartPole-v1 at the fixed setting (configs/cartpole.yaml: 16 envs x 128 steps, 500,000 steps,
            4 epochs x 4 minibatches), env_backend="gymnasium"
  pendulum  gymnasium Pendulum-v1 at RL-Zoo's PPO setting (benchmarks/gym_ppo.py's: 4 envs x 1024 steps, 100,000
            steps, batch 64 -> 64 minibatches, 10 epochs, lr 1e-3, gamma 0.9, GAE 0.95, gSDE every 4 steps)

Parts (each a fresh interpreter timed by this driver around the process, so imports, tracing and compilation count):
  sequential  seeds 0..N-1, one `kppo.train(env, config, seed=s)` process each
  population  one `kppo.train(env, config, seed=[0..N-1])` process
  floor       the population's vector env (N x num_envs sub-envs, sync) stepped alone with random actions for the
              population's steps: what stepping the envs on the host costs, the bound of any host population

    .venv/bin/python benchmarks/gym_population.py                              # both tasks, 8 members
    .venv/bin/python benchmarks/gym_population.py --tasks cartpole --scale 0.2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import harness  # benchmarks/ is sys.path[0] for a script

ROOT = Path(__file__).resolve().parents[1]


def task_config(task: str, scale: float):
    import kppo

    if task == "cartpole":
        config = kppo.Config.from_yaml(ROOT / "configs" / "cartpole.yaml").replace(env_backend="gymnasium")
    else:
        config = kppo.Config(
            env="Pendulum-v1",
            env_backend="gymnasium",
            num_envs=4,
            num_steps=1024,
            total_timesteps=100_000,
            num_minibatches=64,
            num_epochs=10,
            learning_rate=1e-3,
            gamma=0.9,
            gae_lambda=0.95,
            clip_range=0.2,
            ent_coef=0.0,
            use_sde=True,
            sde_sample_freq=4,
            eval_freq=5,
            num_eval_envs=8,
        )
    steps = max(config.rollout_size, int(config.total_timesteps * scale))
    return config.replace(total_timesteps=steps, verbose=0)


def worker(task: str, kind: str, members: int, seed: int, scale: float) -> dict:
    import numpy as np

    config = task_config(task, scale)
    if kind == "floor":
        return {"steps_s": floor(config, members)}
    import kppo

    seeds = seed if kind == "single" else list(range(members))
    result = kppo.train(config.env, config, seed=seeds)
    returns = np.atleast_1d(result.metrics["eval/mean_returns"][-1]).astype(float).tolist()
    return {"final_returns": returns, "timings": result.timings}


def floor(config, members: int) -> float:
    """Seconds to step the population's vector env alone, random actions, the population's steps."""
    import numpy as np

    from kppo.gym_envs.make import gym_vec_env

    env = gym_vec_env(config.env, config.num_envs * members, vectorization=config.vectorization)
    env.reset(seed=0)
    rng, space = np.random.default_rng(0), env.action_space
    iterations = config.num_iterations * config.num_steps
    start = time.perf_counter()
    for _ in range(iterations):
        if hasattr(space, "n"):
            actions = rng.integers(space.n, size=env.num_envs)
        else:
            actions = rng.uniform(space.low, space.high, (env.num_envs, *space.shape)).astype(np.float32)
        env.step(actions)
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed


def run_worker(python: str, *args: str) -> dict:
    start = time.perf_counter()
    done = subprocess.run([python, __file__, "--worker", *args], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({done.returncode}): {done.stderr.strip().splitlines()[-3:]}")
    return {**json.loads(lines[-1]), "process_wall_s": wall}


def measure(task: str, members: int, scale: float, python: str) -> dict:
    single = [run_worker(python, task, "single", "1", str(seed), str(scale)) for seed in range(members)]
    population = run_worker(python, task, "population", str(members), "0", str(scale))
    env_floor = run_worker(python, task, "floor", str(members), "0", str(scale))
    sequential = sum(r["process_wall_s"] for r in single)
    return {
        "task": task,
        "members": members,
        "scale": scale,
        "sequential_wall_s": sequential,
        "population_wall_s": population["process_wall_s"],
        "population_compile_s": population["timings"]["compile_s"],
        "floor_steps_s": env_floor["steps_s"],
        "ratio": population["process_wall_s"] / sequential,
        "floor_ratio": env_floor["steps_s"] / sequential,
        "single_final": [r["final_returns"][0] for r in single],
        "population_final": population["final_returns"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="cartpole,pendulum")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies each task's timesteps")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        task, kind, members, seed, scale = args.worker
        print(json.dumps(worker(task, kind, int(members), int(seed), float(scale))))
        return 0
    report = {**harness.machine(), "rows": []}
    print(harness.machine_header())
    print()
    cells = []
    for task in args.tasks.split(","):
        row = measure(task, args.members, args.scale, args.python)
        report["rows"].append(row)
        single, members = row["single_final"], row["population_final"]
        cells.append(
            [
                task,
                row["members"],
                f"{row['sequential_wall_s']:.1f} s",
                f"{row['population_wall_s']:.1f} s ({row['population_compile_s']:.1f})",
                f"{row['ratio']:.2f}",
                f"{row['floor_steps_s']:.1f} s",
                f"{row['floor_ratio']:.2f}",
                f"{sum(single) / len(single):.1f} / {sum(members) / len(members):.1f}",
            ]
        )
    header = ["task", "members", "sequential wall", "population wall (compile)", "ratio", "env-alone floor"]
    print(harness.markdown_table([*header, "floor ratio", "final return: single / population"], cells))
    report["load_average_after"] = harness.load_average()
    print(f"\nload average after: {report['load_average_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
