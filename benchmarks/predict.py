#!/usr/bin/env python
"""`predict` and `evaluate_policy` side by side: kppo vs Stable-Baselines3 (torch), one run, one table.

Setting: PPO("MlpPolicy", "CartPole-v1", seed=0) as each framework builds it by default (actor 2x64 tanh), untrained:
  - `model.predict(obs)` on one observation, deterministic and stochastic, and on a batch of 16 (deterministic):
    microseconds per call, the median of `--repeats` blocks of `--calls` calls after a warm-up;
  - kppo's TensorFlow path (`Policy.get_action_flat`, one compiled call: what `predict` cost before it acted in
    numpy) on one observation, for the "before" column;
  - `evaluate_policy(model, env, n_eval_episodes=100)` on a CartPole-v1 (gymnasium's RecordEpisodeStatistics for
    kppo, SB3's Monitor for SB3, each reset with seed 0 first), deterministic and stochastic: wall seconds and
    microseconds per env step (the policies differ, so do the episode lengths).
Each framework runs in its own fresh interpreter (a worker: this file with `--worker NAME`), kppo under the
interpreter running this script, SB3 under `--python-sb3`; both with their default thread settings.

Usage (from the repository root; SB3 in a separate venv outside the repository, torch's CPU wheel):
  python3 -m venv /tmp/sb3venv && /tmp/sb3venv/bin/pip install torch==2.13.0 stable-baselines3 gymnasium==1.4.0
  .venv/bin/python benchmarks/predict.py --python-sb3 /tmp/sb3venv/bin/python
  .venv/bin/python benchmarks/predict.py --frameworks kppo --calls 200 --repeats 1 --episodes 2   # smoke run

Results: docs/benchmarks/speed.md, "predict and evaluate_policy" (the table this script prints, with its date, CPU
model and load average).

Only the standard library is imported at module level: the driver needs neither framework.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import harness  # benchmarks/ is sys.path[0] for a script

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_ID = "CartPole-v1"
BATCH = 16


def per_call_us(fn, calls: int, repeats: int) -> float:
    """Median over `repeats` blocks of the mean microseconds of `fn()` over `calls` calls (after 20 warm-up calls)."""
    for _ in range(20):
        fn()
    blocks = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        blocks.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(blocks)


def evaluation(evaluate, model, make_env, episodes: int, deterministic: bool) -> dict:
    """Wall seconds and env steps of `evaluate(model, env, n_eval_episodes=episodes)` on a freshly seeded env."""
    env = make_env()
    start = time.perf_counter()
    _, lengths = evaluate(
        model, env, n_eval_episodes=episodes, deterministic=deterministic, return_episode_rewards=True
    )
    wall = time.perf_counter() - start
    steps = int(sum(lengths))
    return dict(wall_s=wall, steps=steps, us_per_step=wall / max(steps, 1) * 1e6)


def measure(model, evaluate, make_env, args) -> dict:
    """What both workers measure, with their framework's model, `evaluate_policy` and env factory."""
    import numpy as np

    obs = np.zeros(4, np.float32)
    batch = np.random.default_rng(0).normal(0, 0.1, (BATCH, 4)).astype(np.float32)
    calls, repeats = args.calls, args.repeats
    return dict(
        predict_deterministic_us=per_call_us(lambda: model.predict(obs, deterministic=True), calls, repeats),
        predict_stochastic_us=per_call_us(lambda: model.predict(obs, deterministic=False), calls, repeats),
        predict_batch_us=per_call_us(lambda: model.predict(batch, deterministic=True), calls, repeats),
        evaluate_deterministic=evaluation(evaluate, model, make_env, args.episodes, True),
        evaluate_stochastic=evaluation(evaluate, model, make_env, args.episodes, False),
    )


def worker_kppo(args) -> dict:
    import gymnasium as gym
    import numpy as np

    import kppo

    def make_env():
        env = gym.wrappers.RecordEpisodeStatistics(gym.make(ENV_ID))
        env.reset(seed=0)
        return env

    model = kppo.PPO("MlpPolicy", ENV_ID, seed=0)
    out = measure(model, kppo.evaluate_policy, make_env, args)
    policy, row = model.kppo_policy, np.zeros((1, 4), np.float32)
    out["tensorflow_path_us"] = per_call_us(lambda: policy.get_action_flat(row), args.calls, args.repeats)
    out["versions"] = {"kppo": kppo.__version__, "tensorflow": _version("tensorflow"), "numpy": np.__version__}
    return out


def worker_sb3(args) -> dict:
    import gymnasium as gym
    import numpy as np
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    def make_env():
        env = Monitor(gym.make(ENV_ID))
        env.reset(seed=0)
        return env

    model = PPO("MlpPolicy", ENV_ID, seed=0, device="cpu")
    out = measure(model, evaluate_policy, make_env, args)
    out["torch_threads"] = torch.get_num_threads()
    out["versions"] = {"stable-baselines3": stable_baselines3.__version__, "torch": torch.__version__}
    out["versions"]["numpy"] = np.__version__
    return out


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


WORKERS = {"kppo": worker_kppo, "sb3": worker_sb3}


def _launch(name: str, python: str, args) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", name, "--calls", str(args.calls)]
    cmd += ["--repeats", str(args.repeats), "--episodes", str(args.episodes)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if name == "kppo":  # `import kppo` from the repository, installed or not
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    print(f"[predict] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=args.timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise SystemExit(f"predict.py: the {name} worker failed (exit {proc.returncode}):\n{tail}")


def _ratio(peer: dict | None, kppo: dict | None, key: str) -> str:
    if not peer or not kppo:
        return ""
    return f"{_get(peer, key) / _get(kppo, key):.1f}x"


def _get(result: dict, key: str) -> float:
    value: object = result
    for part in key.split("."):
        value = value[part]  # type: ignore[index]
    return float(value)  # type: ignore[arg-type]


ROWS = [  # (label, key, unit format)
    ("predict, 1 obs, deterministic (µs/call)", "predict_deterministic_us", "{:.1f}"),
    ("predict, 1 obs, stochastic (µs/call)", "predict_stochastic_us", "{:.1f}"),
    (f"predict, {BATCH} obs, deterministic (µs/call)", "predict_batch_us", "{:.1f}"),
    ("evaluate_policy, deterministic (s)", "evaluate_deterministic.wall_s", "{:.3f}"),
    ("evaluate_policy, deterministic (µs/step)", "evaluate_deterministic.us_per_step", "{:.1f}"),
    ("evaluate_policy, stochastic (s)", "evaluate_stochastic.wall_s", "{:.3f}"),
    ("evaluate_policy, stochastic (µs/step)", "evaluate_stochastic.us_per_step", "{:.1f}"),
]


def table(results: dict[str, dict], args) -> str:
    kppo, sb3 = results.get("kppo"), results.get("sb3")
    rows = []
    for label, key, fmt in ROWS:
        cells = [fmt.format(_get(r, key)) if r else "" for r in (kppo, sb3)]
        rows.append([label, *cells, _ratio(sb3, kppo, key)])
    for name in ("evaluate_deterministic", "evaluate_stochastic"):
        steps = [str(r[name]["steps"]) if r else "" for r in (kppo, sb3)]
        rows.append([f"{name.replace('_', ', ').replace('evaluate', 'evaluate_policy')} (env steps)", *steps, ""])
    if sb3:
        rows.append(["SB3: torch threads", "", sb3["torch_threads"], ""])
    if kppo:
        before = kppo["tensorflow_path_us"]
        slower = f"{before / kppo['predict_deterministic_us']:.1f}x slower than kppo's predict"
        rows.append(["kppo's TensorFlow path, 1 obs (µs/call; predict before)", f"{before:.1f}", "", slower])
    return (
        f"{harness.machine_header(sb3.get('versions') if sb3 else None)}\n"
        f"PPO('MlpPolicy', '{ENV_ID}') untrained, median of {args.repeats} x {args.calls} calls; "
        f"evaluate_policy over {args.episodes} episodes\n\n"
        + harness.markdown_table(["measure", "kppo", "SB3", "SB3 / kppo"], rows, align="lrrr")
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="kppo,sb3")
    parser.add_argument("--python-sb3", default="/tmp/sb3venv/bin/python", help="interpreter with stable_baselines3")
    parser.add_argument("--calls", type=int, default=2000, help="predict calls per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks (the median is reported)")
    parser.add_argument("--episodes", type=int, default=100, help="evaluate_policy episodes")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--json", help="also write the workers' results here")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(dict(framework=args.worker, **WORKERS[args.worker](args))), flush=True)
        return 0
    pythons = {"kppo": sys.executable, "sb3": args.python_sb3}
    results = {name: _launch(name, pythons[name], args) for name in args.frameworks.split(",")}
    print(table(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(**harness.machine(), results=results), f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
