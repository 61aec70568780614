#!/usr/bin/env python
"""Image policies, learning side by side: kppo.PPO vs Stable-Baselines3 PPO (torch), same extractor, same settings.

Settings (host path: gymnasium envs stepped in Python, DummyVecEnv on both sides, `make_vec_env` of each framework):
  doorkey       MiniGrid-DoorKey-5x5-v0 and
  empty_random  MiniGrid-Empty-Random-5x5-v0: `minigrid.wrappers.ImgObsWrapper` as make_vec_env's `wrapper_class`
                (the 7x7x3 uint8 partial view, Box(0, 255)), 8 envs, 100k steps, RL-Zoo's PPO hyperparameters for
                MiniGrid (rl-baselines3-zoo hyperparams/ppo.yml, `&minigrid-defaults`: n_steps=128, batch_size=64,
                n_epochs=10, gamma=0.99, gae_lambda=0.95, ent_coef=0.0, learning_rate=2.5e-4, clip_range=0.2,
                normalize: true). RL-Zoo uses `FlatObsWrapper` + MlpPolicy there; this script keeps the image and uses
                PPO("CnnPolicy") with SmallCNN (kppo's `kppo.SmallCNN` as features_extractor_class; SB3 gets the same
                network in torch, `TorchSmallCNN` of benchmarks/cnn_speed.py), features_dim=128, and RL-Zoo's
                (SB3's default) heads net_arch=dict(pi=[64, 64], vf=[64, 64]), tanh. `normalize: true` becomes
                VecNormalize(norm_obs=False, norm_reward=True, gamma=0.99) on both sides: the image is not
                standardized, it is divided by 255 as SB3 decides for a uint8 Box(0, 255) image (normalize_images
                left at its default, True, on both sides).
  doorkey_codes doorkey with normalize_images=False on both sides: MiniGrid's view holds object, colour and state
                codes (0-10), not pixels; divided by 255 they reach the CNN as values below 0.04.
  minatar       MinAtar Breakout ("MinAtar/Breakout-v1" of the minatar package, its bool grid cast to float32
                Box(0, 1) by cnn_speed.py's ObservationWrapper on both sides), 8 envs, cnn_speed.py's MinAtar setting:
                PPO("CnnPolicy", n_steps=128, batch_size=256, n_epochs=4, policy_kwargs=dict(net_arch=[],
                normalize_images=False)) with SmallCNN on both sides (SB3's other defaults: lr 3e-4, ent_coef 0).

Score of a run: after `model.learn(steps)`, the mean return of `--eval-episodes` episodes of a separately seeded
single env (`gym.make` + the same wrapper; episode i of seed s resets with seed 1_000_000 + 1_000 s + i, the same
layouts for both frameworks), actions from `model.predict(obs, deterministic=True)`; the same episodes with
deterministic=False are reported too, and the mean of the last 100 training episodes (`ep_info_buffer`).

Each run is a fresh interpreter (this file with `--worker kppo|sb3 --setting S --seed N`) under `nice -n 5` with one
thread per framework (TensorFlow intra/inter-op 1; torch.set_num_threads(1); OMP/OPENBLAS_NUM_THREADS=1) that prints
one JSON line; the driver runs them one at a time, alternating the frameworks' order across seeds, appends every
record to `--json` as it arrives (a rerun with the same file skips the runs it holds) and prints markdown tables:
per seed, then mean with a 95% bootstrap interval and the two-sided permutation test of benchmarks/stats.py.

Usage (from the repository root; SB3 in a separate venv, torch's CPU wheel):
  /tmp/sb3venv/bin/pip install stable-baselines3==2.9.2 minigrid==3.2.0 minatar==1.0.15 psutil
  .venv/bin/python benchmarks/image_learning.py --json benchmarks/results/image_learning/run.json
  .venv/bin/python benchmarks/image_learning.py --settings doorkey --seeds 0 --steps 4096 --eval-episodes 2  # smoke
  .venv/bin/python benchmarks/image_learning.py --report benchmarks/results/image_learning/run.json

Results: docs/benchmarks/image_learning.md.

Only the standard library is imported at module level: the driver needs neither framework.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import harness  # benchmarks/ is sys.path[0] for a script
from harness import package_versions

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
FRAMEWORKS = ("kppo", "sb3")
EVAL_SEED = 1_000_000
MAX_EVAL_STEPS = 10_000  # per episode; MinAtar/Breakout-v1 registers no time limit
MINIGRID_PPO = dict(
    n_steps=128,
    batch_size=64,
    n_epochs=10,
    gamma=0.99,
    gae_lambda=0.95,
    ent_coef=0.0,
    learning_rate=2.5e-4,
    clip_range=0.2,
)
SETTINGS = {
    "doorkey": dict(
        env_id="MiniGrid-DoorKey-5x5-v0",
        family="minigrid",
        n_envs=8,
        steps=100_000,
        ppo=MINIGRID_PPO,
        zoo=0.96,
        label="MiniGrid DoorKey-5x5, ImgObsWrapper 7x7x3, SmallCNN + pi/vf [64, 64], RL-Zoo MiniGrid PPO",
    ),
    "empty_random": dict(
        env_id="MiniGrid-Empty-Random-5x5-v0",
        family="minigrid",
        n_envs=8,
        steps=100_000,
        ppo=MINIGRID_PPO,
        zoo=None,
        label="MiniGrid Empty-Random-5x5, ImgObsWrapper 7x7x3, SmallCNN + pi/vf [64, 64], RL-Zoo MiniGrid PPO",
    ),
    "minatar": dict(
        env_id="MinAtar/Breakout-v1",
        family="minatar",
        n_envs=8,
        steps=500_000,
        ppo=dict(n_steps=128, batch_size=256, n_epochs=4),
        zoo=None,
        label="MinAtar Breakout, float32 10x10x4, SmallCNN, net_arch=[] (cnn_speed.py's setting)",
    ),
}
SETTINGS["doorkey_codes"] = {
    **SETTINGS["doorkey"],
    "normalize_images": False,
    "label": "MiniGrid DoorKey-5x5 as doorkey, normalize_images=False (the view's object codes 0-10 read as they are)",
}
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _load_module(name: str, path: Path):
    """A sibling module by path (benchmarks/ is no package), as benchmarks/results.py loads stats.py."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cnn_speed = _load_module("_kppo_bench_cnn_settings", HERE / "cnn_settings.py")  # standard library only at import


# --------------------------------------------------------------------------------------------------
# Workers.
# --------------------------------------------------------------------------------------------------


def wrapper_of(setting: dict):
    """The wrapper_class both sides give make_vec_env (and the evaluation env)."""
    if setting["family"] == "minigrid":
        from minigrid.wrappers import ImgObsWrapper

        return ImgObsWrapper
    cnn_speed.register_minatar()
    return cnn_speed.float_obs_wrapper()


def policy_kwargs_of(setting: dict, extractor_class) -> dict:
    if setting["family"] == "minigrid":
        return dict(
            net_arch=dict(pi=[64, 64], vf=[64, 64]),
            features_extractor_class=extractor_class,
            features_extractor_kwargs=dict(features_dim=128),
            normalize_images=setting.get("normalize_images", True),
        )
    return dict(
        net_arch=[],
        normalize_images=False,
        features_extractor_class=extractor_class,
        features_extractor_kwargs=dict(features_dim=128),
    )


def evaluate(model, setting: dict, wrapper, seed: int, episodes: int, deterministic: bool) -> list[float]:
    """Returns of `episodes` episodes of one fresh env, episode i reset with EVAL_SEED + 1_000 seed + i."""
    import gymnasium as gym

    env = wrapper(gym.make(setting["env_id"]))
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + 1_000 * seed + i)
        total, done, steps = 0.0, False, 0
        while not done and steps < MAX_EVAL_STEPS:
            action, _ = model.predict(obs, deterministic=deterministic)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total, done, steps = total + float(reward), terminated or truncated, steps + 1
        returns.append(total)
    env.close()
    return returns


def _scores(model, setting: dict, wrapper, args) -> dict:
    import numpy as np

    det = evaluate(model, setting, wrapper, args.seed, args.eval_episodes, True)
    sto = evaluate(model, setting, wrapper, args.seed, args.eval_episodes, False)
    train = [float(e["r"]) for e in model.ep_info_buffer]
    return dict(
        eval_deterministic=float(np.mean(det)),
        eval_deterministic_returns=det,
        eval_stochastic=float(np.mean(sto)),
        train_last_100=float(np.mean(train)) if train else None,
        train_episodes_in_buffer=len(train),
    )


def worker_kppo(args) -> dict:
    from kppo._tf import tf

    tf.config.threading.set_intra_op_parallelism_threads(1)  # before TensorFlow runs its first op
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import kppo

    setting = SETTINGS[args.setting]
    wrapper = wrapper_of(setting)
    env = kppo.make_vec_env(setting["env_id"], n_envs=setting["n_envs"], seed=args.seed, wrapper_class=wrapper)
    if setting["family"] == "minigrid":
        env = kppo.VecNormalize(env, norm_obs=False, norm_reward=True, gamma=setting["ppo"]["gamma"])
    model = kppo.PPO(
        "CnnPolicy",
        env,
        policy_kwargs=policy_kwargs_of(setting, kppo.SmallCNN),
        seed=args.seed,
        verbose=0,
        **setting["ppo"],
    )
    start = time.perf_counter()
    model.learn(args.steps)
    learn_s = time.perf_counter() - start
    extractor = model.agent.actor.extractor
    return dict(
        _scores(model, setting, wrapper, args),
        learn_s=learn_s,
        steps=int(model.num_timesteps),
        steps_per_s=int(model.num_timesteps) / learn_s,
        observation_space=str(model.observation_space),
        extractor=type(getattr(extractor, "extractor", extractor)).__name__,
        parameters=int(sum(v.numpy().size for v in model.agent.variables)),
        threads=dict(
            intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
        ),
        versions=package_versions("kppo", "tensorflow", "keras", "gymnasium", "numpy", "minigrid", "minatar"),
    )


def worker_sb3(args) -> dict:
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    setting = SETTINGS[args.setting]
    wrapper = wrapper_of(setting)
    env = make_vec_env(
        setting["env_id"], n_envs=setting["n_envs"], seed=args.seed, wrapper_class=wrapper, vec_env_cls=DummyVecEnv
    )
    if setting["family"] == "minigrid":
        env = VecNormalize(env, norm_obs=False, norm_reward=True, gamma=setting["ppo"]["gamma"])
    model = PPO(
        "CnnPolicy",
        env,
        policy_kwargs=policy_kwargs_of(setting, cnn_speed.torch_small_cnn()),
        seed=args.seed,
        device="cpu",
        verbose=0,
        **setting["ppo"],
    )
    start = time.perf_counter()
    model.learn(args.steps)
    learn_s = time.perf_counter() - start
    return dict(
        _scores(model, setting, wrapper, args),
        learn_s=learn_s,
        steps=int(model.num_timesteps),
        steps_per_s=int(model.num_timesteps) / learn_s,
        observation_space=str(model.observation_space),
        extractor=type(model.policy.features_extractor).__name__,
        parameters=sum(p.numel() for p in model.policy.parameters() if p.requires_grad),
        threads=dict(intra_op=torch.get_num_threads(), inter_op=torch.get_num_interop_threads()),
        versions=package_versions("stable-baselines3", "torch", "gymnasium", "numpy", "minigrid", "minatar"),
    )


WORKERS = {"kppo": worker_kppo, "sb3": worker_sb3}


# --------------------------------------------------------------------------------------------------
# Driver.
# --------------------------------------------------------------------------------------------------


def _launch(framework: str, python: str, setting: str, seed: int, args) -> dict:
    cmd = ["nice", "-n", str(args.nice), python, str(Path(__file__).resolve()), "--worker", framework]
    cmd += ["--setting", setting, "--seed", str(seed), "--steps", str(args.steps or SETTINGS[setting]["steps"])]
    cmd += ["--eval-episodes", str(args.eval_episodes)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **THREAD_ENV)
    if framework == "kppo":  # `import kppo` from the repository, installed or not
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    print(f"[image_learning] {' '.join(cmd)}", file=sys.stderr, flush=True)
    load_before, start = cnn_speed.load_average(), time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(framework=framework, setting=setting, seed=seed, error=f"timed out after {args.timeout}s")
    wall = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            out = json.loads(line)
            out.update(process_wall_s=wall, load_before=load_before, load_after=cnn_speed.load_average())
            print(
                f"[image_learning]   -> det {out['eval_deterministic']:.3f}, stoch {out['eval_stochastic']:.3f}, "
                f"train {out['train_last_100']}, {out['steps_per_s']:,.0f} steps/s, {wall:.0f}s, "
                f"load {load_before:.1f}",
                file=sys.stderr,
                flush=True,
            )
            return out
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-25:])
    print(f"[image_learning] {framework}/{setting}/{seed} failed (exit {proc.returncode}):\n{tail}", file=sys.stderr)
    return dict(framework=framework, setting=setting, seed=seed, error=f"exit {proc.returncode}", stderr_tail=tail)


def _read(path: str | None) -> dict:
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return dict(records=[])


def _write(path: str | None, result: dict) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(result, f, indent=2)


def _cell(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def report(result: dict) -> str:
    """Markdown: per setting, a per-seed table and a summary (mean, 95% bootstrap interval, permutation test)."""
    stats = _load_module("_kppo_bench_stats", HERE / "stats.py")
    records = [r for r in result["records"] if "error" not in r]
    blocks = []
    for name, setting in SETTINGS.items():
        mine = [r for r in records if r["setting"] == name]
        if not mine:
            continue
        by = {f: {r["seed"]: r for r in mine if r["framework"] == f} for f in FRAMEWORKS}
        seeds = sorted(set(by["kppo"]) | set(by["sb3"]))
        lines = [
            f"**{setting['label']}** ({setting['env_id']}, {setting['n_envs']} envs, "
            f"{mine[0]['steps']:,} steps a run; PPO CnnPolicy "
            f"{', '.join(f'{k}={v}' for k, v in setting['ppo'].items())})",
            "",
        ]
        keys = ("eval_deterministic", "eval_stochastic", "train_last_100")
        per_seed = []
        for seed in seeds:
            k, s = by["kppo"].get(seed, {}), by["sb3"].get(seed, {})
            cells = [_cell(side.get(key)) for key in keys for side in (k, s)]
            per_seed.append([seed, *cells, _cell(k.get("steps_per_s"), 0), _cell(s.get("steps_per_s"), 0)])
        header = ["seed", "kppo eval (det.)", "SB3 eval (det.)", "kppo eval (stoch.)", "SB3 eval (stoch.)"]
        header += ["kppo train, last 100 ep.", "SB3 train, last 100 ep.", "kppo steps/s", "SB3 steps/s"]
        lines += [harness.markdown_table(header, per_seed, "r" * 9), ""]
        header = ["score", "kppo mean [95% CI]", "SB3 mean [95% CI]", "seeds", "kppo / SB3", "kppo inside SB3's CI"]
        header += ["permutation p (exact; smallest possible)"]
        header += [f"seeds >= RL-Zoo {setting['zoo']} (kppo, SB3)"] if setting["zoo"] else []
        summary = []
        for key, label in (
            ("eval_deterministic", "eval, deterministic"),
            ("eval_stochastic", "eval, stochastic"),
            ("train_last_100", "train, last 100 episodes"),
        ):
            values = {f: [by[f][seed][key] for seed in sorted(by[f]) if by[f][seed].get(key) is not None] for f in by}
            if not values["kppo"] or not values["sb3"]:
                continue
            zoo = setting["zoo"] if setting["zoo"] is not None else float("inf")
            ours, ref = stats.summarize(values["kppo"], zoo), stats.summarize(values["sb3"], zoo)
            versus = stats.compare(ours, ref)
            test = versus["test"]

            def ci(s):
                return f"{s['mean']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}]" if s["ci"] else f"{s['mean']:.3f}"

            inside = {None: "n/a", True: "yes", False: "no"}[versus["inside"]]
            ratio = "" if versus["ratio"] is None else f"{versus['ratio']:.3f}"
            p = f"{test.p_value:.3f} ({'exact' if test.exact else 'sampled'}; {test.p_min:.3f})"
            row = [label, ci(ours), ci(ref), f"{ours['seeds']}, {ref['seeds']}", ratio, inside, p]
            if setting["zoo"]:
                row.append(f"{ours['seeds_reached']}/{ours['seeds']}, {ref['seeds_reached']}/{ref['seeds']}")
            summary.append(row)
        lines.append(harness.markdown_table(header, summary, "l" + "r" * (len(header) - 1)))
        walls = {f: [r["process_wall_s"] for r in by[f].values() if "process_wall_s" in r] for f in FRAMEWORKS}
        loads = [r["load_before"] for r in mine if r.get("load_before") is not None]
        lines += [
            "",
            f"Wall per run, process (mean): kppo {_mean(walls['kppo']):.0f} s, SB3 {_mean(walls['sb3']):.0f} s; "
            f"1-min load average before the runs {min(loads):.1f}-{max(loads):.1f}. "
            f"Observation space the policy sees: kppo {_first(by['kppo'], 'observation_space')}, "
            f"SB3 {_first(by['sb3'], 'observation_space')}. "
            f"Trainable parameters: kppo {_first(by['kppo'], 'parameters')}, SB3 {_first(by['sb3'], 'parameters')}.",
        ]
        blocks.append("\n".join(lines))
    failures = [r for r in result["records"] if "error" in r]
    for f in failures:
        blocks.append(f"Failed: {f['framework']}/{f['setting']}/seed {f['seed']}: {f['error']}\n{f.get('stderr_tail')}")
    return "\n\n".join(blocks)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _first(runs: dict, key: str):
    return next((r[key] for r in runs.values() if key in r), "")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, help="env steps a run (default: the setting's)")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--python-sb3", default="/tmp/sb3venv/bin/python", help="interpreter with stable_baselines3")
    parser.add_argument("--nice", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--json", help="append every record here (runs already there are skipped)")
    parser.add_argument("--report", help="print the tables of this JSON file and exit")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--setting", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        args.steps = args.steps or SETTINGS[args.setting]["steps"]
        out = WORKERS[args.worker](args)
        print(json.dumps(dict(framework=args.worker, setting=args.setting, seed=args.seed, **out)), flush=True)
        return 0
    if args.report:
        print(report(_read(args.report)))
        return 0
    result = _read(args.json)
    result.setdefault("started", time.strftime("%Y-%m-%d %H:%M"))
    result.update(cpu=harness.cpu_model(), cpus=os.cpu_count(), thread_env=THREAD_ENV)
    done = {(r["framework"], r["setting"], r["seed"]) for r in result["records"] if "error" not in r}
    pythons = {"kppo": sys.executable, "sb3": args.python_sb3}
    frameworks = [f for f in args.frameworks.split(",") if f]
    for setting in [s for s in args.settings.split(",") if s]:
        for seed in args.seeds:
            for framework in frameworks if seed % 2 == 0 else frameworks[::-1]:
                if (framework, setting, seed) in done:
                    continue
                result["records"].append(_launch(framework, pythons[framework], setting, seed, args))
                _write(args.json, result)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M")
    _write(args.json, result)
    peers = {k: v for r in result["records"] if r.get("framework") == "sb3" for k, v in r.get("versions", {}).items()}
    print(f"\nstarted {result['started']}\n{harness.machine_header(peers, 'minigrid', 'minatar')}\n")
    print(report(result))
    return 1 if any("error" in r for r in result["records"]) else 0


if __name__ == "__main__":
    sys.exit(main())
