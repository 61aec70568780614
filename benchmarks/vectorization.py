#!/usr/bin/env python
"""gymnasium's SyncVectorEnv against AsyncVectorEnv (one process per sub-env) under kppo's `gym_vec_env`, per task:
microseconds per vector step with random actions drawn beforehand (what the host rollout pays per step besides
acting), median over repeats. The faster one is what `benchmarks/gym_ppo.py`'s settings and the configs use.

Usage (from the repository root):
  .venv/bin/python benchmarks/vectorization.py
  .venv/bin/python benchmarks/vectorization.py --tasks cartpole --steps 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script

TASKS = {"cartpole": ("CartPole-v1", 16), "pendulum": ("Pendulum-v1", 4), "halfcheetah": ("HalfCheetah-v5", 1)}


def step_us(env_id: str, num_envs: int, vectorization: str, steps: int) -> float:
    import numpy as np

    from kppo.gym_envs.make import gym_vec_env

    vec_env = gym_vec_env(env_id, num_envs, vectorization=vectorization, seed=0)
    try:
        vec_env.reset(seed=0)
        space = vec_env.action_space
        space.seed(0)
        actions = np.stack([np.stack([space.sample() for _ in range(num_envs)]) for _ in range(steps)])
        for t in range(min(50, steps)):  # warm-up: processes started, caches filled
            vec_env.step(actions[t])
        start = time.perf_counter()
        for t in range(steps):
            vec_env.step(actions[t])
        return (time.perf_counter() - start) / steps * 1e6
    finally:
        vec_env.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{args.steps} vector steps, median of {args.repeats}\n{harness.machine_header()}\n")
    rows = []
    for task in args.tasks.split(","):
        env_id, num_envs = TASKS[task]
        times = {
            kind: statistics.median(step_us(env_id, num_envs, kind, args.steps) for _ in range(args.repeats))
            for kind in ("sync", "async")
        }
        ratio = times["async"] / times["sync"]
        faster = "async" if ratio < 1 else "sync"
        rows.append([env_id, num_envs, f"{times['sync']:.0f}", f"{times['async']:.0f}", f"{ratio:.2f}", faster])
    header = ["task", "envs", "sync µs/step", "async µs/step", "async / sync", "faster"]
    print(harness.markdown_table(header, rows, align="lrrrrl"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
