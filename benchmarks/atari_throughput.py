#!/usr/bin/env python
"""Host-path Atari throughput: env steps per second of SB3's preprocessing with 8 envs and 4 stacked frames, random
actions drawn beforehand, median over repeats, for

- dummy:   `VecFrameStack(kppo.make_atari_env(env_id, n_envs), 4)` over a DummyVecEnv (gymnasium SyncVectorEnv);
- subproc: the same over a SubprocVecEnv (gymnasium AsyncVectorEnv, one process per env);
- ale:     ale-py's threaded C++ `AtariVectorEnv` (its own preprocessing and stacking, SAME_STEP, `life_loss_info`)
           through `kppo.vec_envs.ale_vector.AtariVectorEnvAdapter`;

each stepped two ways: through SB3's API (`VecEnv.step`: observations as uint8 stacks, per-env info dicts) and
through kppo's host path (`GymVecEnv.step` on the VecEnv's `vector_env`: what `kppo.PPO` steps, observations
flattened to float32). An env step is one agent step (4 emulator frames). Only environment time: no policy.

Usage (from the repository root):
  .venv/bin/python benchmarks/atari_throughput.py
  .venv/bin/python benchmarks/atari_throughput.py --env BreakoutNoFrameskip-v4 --steps 2000 --kinds dummy,ale
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from machine import cpu_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KINDS = ("dummy", "subproc", "ale")
PATHS = ("sb3", "kppo")


def make_env(kind: str, env_id: str, n_envs: int):
    """The kppo VecEnv of `kind` (see the module docstring)."""
    import gymnasium as gym

    from kppo.vec_envs.ale_vector import AtariVectorEnvAdapter
    from kppo.vec_envs.atari import make_atari_env, register_ale
    from kppo.vec_envs.vec_env import SubprocVecEnv, VecEnv
    from kppo.vec_envs.vec_frame_stack import VecFrameStack

    if kind == "ale":
        from ale_py.vector_env import AtariVectorEnv
        from gymnasium.vector import AutoresetMode

        register_ale()
        game = gym.spec(env_id).kwargs["game"]
        ale = AtariVectorEnv(game, n_envs, autoreset_mode=AutoresetMode.SAME_STEP, life_loss_info=True, stack_num=4)
        return VecEnv(AtariVectorEnvAdapter(ale))
    vec_env_cls = SubprocVecEnv if kind == "subproc" else None
    return VecFrameStack(make_atari_env(env_id, n_envs=n_envs, seed=0, vec_env_cls=vec_env_cls), 4)


def steps_per_second(kind: str, path: str, env_id: str, n_envs: int, steps: int) -> float:
    """Env steps per second (n_envs x vector steps / seconds) of `steps` vector steps after a warm-up."""
    import numpy as np

    from kppo.gym_envs.make import gym_vec_env

    env = make_env(kind, env_id, n_envs)
    step: Callable
    if path == "kppo":
        gym_env = gym_vec_env(env, seed=0)
        gym_env.reset(seed=0)
        step, close = gym_env.step, gym_env.close
    else:
        env.seed(0)
        env.reset()
        step, close = env.step, env.close
    try:
        actions = np.random.default_rng(0).integers(0, env.action_space.n, (steps + 50, n_envs))
        for t in range(50):  # warm-up: processes and threads started, caches filled
            step(actions[t])
        start = time.perf_counter()
        for t in range(50, steps + 50):
            step(actions[t])
        return n_envs * steps / (time.perf_counter() - start)
    finally:
        close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="PongNoFrameskip-v4", help="a NoFrameskip-v4 id")
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=1000, help="vector steps timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--paths", default=",".join(PATHS))
    args = parser.parse_args(argv)
    kinds, paths = args.kinds.split(","), args.paths.split(",")
    unknown = sorted(set(kinds) - set(KINDS)) + sorted(set(paths) - set(PATHS))
    if unknown:
        parser.error(f"unknown kinds/paths {unknown}: expected kinds among {KINDS}, paths among {PATHS}")
    versions = ", ".join(
        f"{name} {version(name)}" for name in ("ale-py", "gymnasium", "numpy", "opencv-python-headless")
    )
    print(
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {cpu_model()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {versions}\n{args.env}, {args.n_envs} envs, 4 stacked frames, "
        f"{args.steps} vector steps, median of {args.repeats}\n"
    )
    print("| vec env | stepped through | env steps/s | frames/s | vs dummy (same path) |")
    print("|---|---|--:|--:|--:|")
    baseline: dict[str, float] = {}
    for kind in kinds:
        for path in paths:
            rate = statistics.median(
                steps_per_second(kind, path, args.env, args.n_envs, args.steps) for _ in range(args.repeats)
            )
            if kind == "dummy":
                baseline[path] = rate
            ratio = f"{rate / baseline[path]:.2f}x" if path in baseline else ""
            label = "SB3 API (VecEnv.step)" if path == "sb3" else "kppo host path (GymVecEnv.step)"
            print(f"| {kind} | {label} | {rate:,.0f} | {4 * rate:,.0f} | {ratio} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
