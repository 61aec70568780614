#!/usr/bin/env python
"""Invalid-action masking on Taxi-v4: kppo.MaskablePPO vs kppo.PPO (no masks) vs sb3-contrib's MaskablePPO (vs SB3's
PPO, no masks).

Taxi (gymnasium's Taxi-v4: 500 discrete states, 6 actions, -1 a step, -10 for an illegal pickup/drop-off, +20 for a
delivery, 200 steps at most) has many invalid actions in most states: moves into walls, pickups and drop-offs where
none is possible. gymnasium gives the mask (`info["action_mask"]`, `env.unwrapped.action_mask(state)`); both masked
frameworks read it through sb3-contrib's `ActionMasker` with the same function, so they mask alike.

One setting for every framework: 8 envs x 256 steps, batch_size 256, 4 epochs, lr 3e-4, gamma 0.99, GAE lambda
0.95, clip 0.2, ent_coef 0.01, vf_coef 0.5, max_grad_norm 0.5, separate 2x64 tanh actor and critic (SB3's default
MlpPolicy), the observation one-hot encoded (both frameworks do so for Discrete observations). Training runs in chunks
of --eval-every steps; after each, 20 deterministic episodes (evaluation env seeded once; masked models act with
masks, through each framework's own `evaluate_policy`). Walls count `learn` only. One CPU thread per framework.

Each (framework, seed) runs in its own interpreter (this file with --worker NAME --seed S) that prints one JSON
line; the driver prints a markdown table: the mean return per checkpoint over seeds with a 95% bootstrap interval,
steps/s, and a permutation test of kppo masked against each other framework at the last checkpoint.

    .venv/bin/python benchmarks/action_masks.py --python-peers .venv-bench/bin/python --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/action_masks.py --frameworks kppo_masked,kppo_plain --timesteps 100000  # smoke

The peer virtualenv needs sb3-contrib (`pip install sb3-contrib==2.9.2` next to stable-baselines3 2.9.2).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script

_HERE = os.path.dirname(os.path.abspath(__file__))
ENV_ID = "Taxi-v4"
PPO_ARGS = dict(
    n_steps=256,
    batch_size=256,
    n_epochs=4,
    learning_rate=3e-4,
    gamma=0.99,
    gae_lambda=0.95,
    clip_range=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
)
N_ENVS, EVAL_EPISODES = 8, 20
FRAMEWORKS = ("kppo_masked", "kppo_plain", "sb3_contrib", "sb3_plain")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_kppo_bench_{name}", os.path.join(_HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def taxi_mask(env):
    """The mask of Taxi's current state (what gymnasium also puts in `info["action_mask"]`)."""
    return env.unwrapped.action_mask(env.unwrapped.s)


def _train_in_chunks(model, evaluate, timesteps: int, eval_every: int) -> dict:
    """learn() in chunks of `eval_every` steps, `evaluate()` after each; the wall counts learn() only."""
    curve, learn_s, done = [], 0.0, 0
    while done < timesteps:
        chunk = min(eval_every, timesteps - done)
        start = time.perf_counter()
        model.learn(chunk, reset_num_timesteps=done == 0)
        learn_s += time.perf_counter() - start
        done += chunk
        curve.append([int(model.num_timesteps), evaluate(model)])
    return {"curve": curve, "learn_s": learn_s, "steps_per_s": curve[-1][0] / learn_s}


def worker_kppo(masked: bool, seed: int, timesteps: int, eval_every: int) -> dict:
    import gymnasium as gym

    import kppo
    from kppo._tf import tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    cls = kppo.MaskablePPO if masked else kppo.PPO
    wrap = (lambda: kppo.ActionMasker(gym.make(ENV_ID), taxi_mask)) if masked else (lambda: gym.make(ENV_ID))
    model = cls("MlpPolicy", kppo.make_vec_env(wrap, n_envs=N_ENVS, seed=seed), seed=seed, **PPO_ARGS)
    eval_env = gym.wrappers.RecordEpisodeStatistics(wrap())
    eval_env.reset(seed=10_000 + seed)

    def evaluate(m):
        return float(kppo.evaluate_policy(m, eval_env, n_eval_episodes=EVAL_EPISODES)[0])

    return {
        "framework": "kppo_masked" if masked else "kppo_plain",
        "version": kppo.__version__,
        **_train_in_chunks(model, evaluate, timesteps, eval_every),
    }


def worker_sb3_plain(seed: int, timesteps: int, eval_every: int) -> dict:
    import gymnasium as gym
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    model = PPO("MlpPolicy", make_vec_env(ENV_ID, n_envs=N_ENVS, seed=seed), seed=seed, device="cpu", **PPO_ARGS)
    eval_env = Monitor(gym.make(ENV_ID))
    eval_env.reset(seed=10_000 + seed)

    def evaluate(m):
        return float(evaluate_policy(m, eval_env, n_eval_episodes=EVAL_EPISODES, warn=False)[0])

    return {
        "framework": "sb3_plain",
        "version": stable_baselines3.__version__,
        **_train_in_chunks(model, evaluate, timesteps, eval_every),
    }


def worker_sb3_contrib(seed: int, timesteps: int, eval_every: int) -> dict:
    import gymnasium as gym
    import sb3_contrib
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.evaluation import evaluate_policy
    from sb3_contrib.common.wrappers import ActionMasker
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    env = make_vec_env(
        ENV_ID, n_envs=N_ENVS, seed=seed, wrapper_class=ActionMasker, wrapper_kwargs={"action_mask_fn": taxi_mask}
    )
    model = MaskablePPO("MlpPolicy", env, seed=seed, device="cpu", **PPO_ARGS)
    eval_env = ActionMasker(Monitor(gym.make(ENV_ID)), taxi_mask)
    eval_env.reset(seed=10_000 + seed)

    def evaluate(m):
        return float(evaluate_policy(m, eval_env, n_eval_episodes=EVAL_EPISODES, warn=False)[0])

    return {
        "framework": "sb3_contrib",
        "version": sb3_contrib.__version__,
        **_train_in_chunks(model, evaluate, timesteps, eval_every),
    }


def run_worker(name: str, seed: int, timesteps: int, eval_every: int) -> None:
    if name == "sb3_contrib":
        out = worker_sb3_contrib(seed, timesteps, eval_every)
    elif name == "sb3_plain":
        out = worker_sb3_plain(seed, timesteps, eval_every)
    else:
        out = worker_kppo(name == "kppo_masked", seed, timesteps, eval_every)
    print(json.dumps({**out, "seed": seed}), flush=True)


def _launch(name: str, python: str, seed: int, args) -> dict:
    cmd = [
        python,
        os.path.abspath(__file__),
        "--worker",
        name,
        "--seed",
        str(seed),
        "--timesteps",
        str(args.timesteps),
        "--eval-every",
        str(args.eval_every),
    ]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(_HERE), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.path.dirname(_HERE))
    if out.returncode != 0:
        raise RuntimeError(f"{name} seed {seed} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


PACKAGES = {"sb3_plain": "stable-baselines3", "sb3_contrib": "sb3-contrib"}


def _peer_versions(results: list[dict]) -> dict[str, str]:
    """The peers' versions as their workers reported them, for the machine header."""
    return {PACKAGES[r["framework"]]: r["version"] for r in results if r["framework"] in PACKAGES}


def table(results: list[dict], frameworks: list[str]) -> str:
    stats = _load("stats")
    steps = [point[0] for point in results[0]["curve"]]
    header = ["framework", "seeds", *(f"{s:,} steps" for s in steps), "steps/s", "p vs kppo_masked"]
    body = []
    finals = {f: [r["curve"][-1][1] for r in results if r["framework"] == f] for f in frameworks}
    for name in frameworks:
        rows = [r for r in results if r["framework"] == name]
        cells = []
        for k in range(len(steps)):
            values = [r["curve"][k][1] for r in rows]
            low, high = stats.bootstrap_mean_ci(values)
            cells.append(f"{sum(values) / len(values):.1f} [{low:.1f}, {high:.1f}]")
        speed = sorted(r["steps_per_s"] for r in rows)[len(rows) // 2]
        p = (
            ""
            if name == "kppo_masked" or "kppo_masked" not in finals
            else f"{stats.permutation_test(finals['kppo_masked'], finals[name]).p_value:.3f}"
        )
        body.append([name, len(rows), *cells, f"{speed:,.0f}", p])
    return harness.markdown_table(header, body)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=FRAMEWORKS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--timesteps", type=int, default=500_000)
    parser.add_argument("--eval-every", type=int, default=100_000)
    parser.add_argument("--python-kppo", default=sys.executable)
    parser.add_argument("--python-peers", default=sys.executable)
    parser.add_argument("--json", help="write every worker's record here")
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.worker, args.seed, args.timesteps, args.eval_every)
        return 0
    frameworks = args.frameworks.split(",")
    results = []
    for seed in args.seeds:
        for name in frameworks:
            python = args.python_peers if name.startswith("sb3") else args.python_kppo
            results.append(_launch(name, python, seed, args))
            print(
                f"{name} seed {seed}: {results[-1]['curve']} ({results[-1]['steps_per_s']:,.0f} steps/s)",
                file=sys.stderr,
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(
        f"{ENV_ID}, {args.timesteps:,} steps, {len(args.seeds)} seeds\n"
        f"{harness.machine_header(_peer_versions(results))}\n"
    )
    print(table(results, frameworks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
