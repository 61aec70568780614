"""The results table: kppo against the published RL-Zoo PPO numbers, with SB3 (zoo hyperparameters) side by side.

Each task trains at the zoo's budget for several seeds; every run ends with a deterministic evaluation and writes one
JSON record (final return, learning curve, wall time, steps/s). `report` turns the records into the table in
docs/results.md (between its RESULTS-TABLE markers) and one learning-curve figure per task in docs/figures/.

    .venv/bin/python benchmarks/results.py run cartpole acrobot --seeds 0 1 2
    .venv-bench/bin/python benchmarks/results.py run cartpole --framework sb3 --seeds 0 1 2
    .venv/bin/python benchmarks/results.py report

`run` with the kppo framework needs kppo's environment; with sb3 it imports only stable-baselines3, torch and
gymnasium (benchmarks/README.md: the peers' virtualenv). Records go to benchmarks/results/<task>/<framework>-seed<N>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "figures"
FRAMEWORKS = ("kppo", "sb3")


@dataclass(frozen=True)
class Task:
    """One row of the table: kppo's config, the zoo's number at its budget, and the zoo's SB3 hyperparameters."""

    env_id: str
    config: str
    zoo: float
    budget: int
    eval_rounds: int
    eval_episodes: int
    sb3: dict | None = field(default=None)  # rl-zoo3 hyperparams/ppo.yml (MuJoCo: the -v3 entries)


TASKS = {
    "cartpole": Task(
        "CartPole-v1", "configs/cartpole_100k.yaml", 500.0, 100_000, 10, 64,
        dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
             learning_rate="lin_0.001", clip_range="lin_0.2"),
    ),
    "acrobot": Task(
        "Acrobot-v1", "configs/acrobot.yaml", -73.5, 1_000_000, 10, 64,
        dict(normalize=True, n_envs=16, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0),
    ),
    "mountaincar_continuous": Task(
        "MountainCarContinuous-v0", "configs/mountaincar_continuous.yaml", 88.3, 20_000, 10, 32,
        dict(normalize=True, n_envs=1, batch_size=256, n_steps=8, gamma=0.9999, learning_rate=7.77e-05,
             ent_coef=0.00429, clip_range=0.1, n_epochs=10, gae_lambda=0.9, max_grad_norm=5, vf_coef=0.19,
             use_sde=True, policy_kwargs=dict(log_std_init=-3.29, ortho_init=False)),
    ),
    "pendulum": Task(
        "Pendulum-v1", "configs/pendulum_100k.yaml", -172.0, 100_000, 10, 32,
        dict(normalize=True, n_envs=4, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
             learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4),
    ),
    "lunarlander_continuous": Task(
        "LunarLanderContinuous-v3", "configs/lunarlander_continuous.yaml", 270.9, 1_000_000, 10, 10,
        dict(normalize=True, n_envs=16, n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4,
             ent_coef=0.01),
    ),
    "halfcheetah": Task(
        "HalfCheetah-v5", "configs/halfcheetah.yaml", 5819.0, 1_000_000, 20, 10,
        dict(normalize=True, n_envs=1, batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05,
             ent_coef=0.000401762, clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
             policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="relu",
                                net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    ),
    "hopper": Task(
        "Hopper-v5", "configs/hopper.yaml", 2410.0, 1_000_000, 20, 10,
        dict(normalize=True, n_envs=1, batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
             ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
             policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="relu",
                                net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    ),
}


def _machine() -> str:
    return f"{platform.machine()} x {os.cpu_count()} CPUs"


def run_kppo(task: Task, seed: int) -> dict:
    import kppo

    config = kppo.Config.from_yaml(ROOT / task.config)
    if config.total_timesteps != task.budget:
        raise SystemExit(f"{task.config}: total_timesteps {config.total_timesteps} is not the zoo budget {task.budget}")
    result = kppo.train(config=config, seed=seed)
    m, t = result.metrics, result.timings
    steps = int(m["train/total_steps"][-1])
    return {
        "final_mean": float(m["eval/mean_returns"][-1]),
        "final_std": float(m["eval/std_returns"][-1]),
        "episodes": config.num_eval_envs,
        "curve": {
            "steps": [int(s) for s in m["train/total_steps"]],
            "eval_mean": [float(x) for x in m["eval/mean_returns"]],
            "eval_std": [float(x) for x in m["eval/std_returns"]],
        },
        "total_steps": steps,
        "wall_s": t["total_s"],
        "compile_s": t["compile_s"],
        "steps_per_s": steps / t["total_s"],
        "versions": {"kppo": kppo.__version__, "tensorflow": __import__("tensorflow").__version__},
    }


def _sb3_hyperparams(hp: dict) -> dict:
    """The zoo's spellings to SB3 arguments: 'lin_X' schedules, net sizes; the rest passes through."""
    import torch

    out = {}
    for key, value in hp.items():
        if isinstance(value, str) and value.startswith("lin_"):
            start = float(value[4:])
            value = lambda progress, start=start: progress * start
        out[key] = value
    kwargs = dict(out.pop("policy_kwargs", {}))
    if kwargs.get("activation_fn") == "relu":
        kwargs["activation_fn"] = torch.nn.ReLU
    if kwargs:
        out["policy_kwargs"] = kwargs
    return out


def run_sb3(task: Task, seed: int) -> dict:
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    if task.sb3 is None:
        raise SystemExit(f"{task.env_id}: no SB3 run in this table (too slow on this machine)")
    torch.set_num_threads(1)
    hp = dict(task.sb3)
    n_envs, normalize = hp.pop("n_envs", 1), hp.pop("normalize", False)
    env = make_vec_env(task.env_id, n_envs=n_envs, seed=seed)
    eval_env = make_vec_env(task.env_id, n_envs=1, seed=seed + 10_000)
    if normalize:  # the zoo normalizes with the agent's discount
        env = VecNormalize(env, gamma=hp.get("gamma", 0.99))
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    model = PPO("MlpPolicy", env, seed=seed, verbose=0, **_sb3_hyperparams(hp))
    curve = {"steps": [], "eval_mean": [], "eval_std": []}

    def evaluate(episodes: int) -> tuple[float, float]:
        if normalize:
            eval_env.obs_rms = env.obs_rms.copy()
        mean, std = evaluate_policy(model, eval_env, n_eval_episodes=episodes, deterministic=True)
        curve["steps"].append(int(model.num_timesteps))
        curve["eval_mean"].append(float(mean))
        curve["eval_std"].append(float(std))
        return float(mean), float(std)

    every = task.budget // task.eval_rounds

    class Rounds(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps >= (len(curve["steps"]) + 1) * every and self.num_timesteps < task.budget:
                evaluate(task.eval_episodes)
            return True

    start = time.perf_counter()
    model.learn(task.budget, callback=Rounds())
    final_mean, final_std = evaluate(task.eval_episodes)
    wall = time.perf_counter() - start
    return {
        "final_mean": final_mean,
        "final_std": final_std,
        "episodes": task.eval_episodes,
        "curve": curve,
        "total_steps": int(model.num_timesteps),
        "wall_s": wall,
        "steps_per_s": model.num_timesteps / wall,
        "versions": {"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__},
    }


def run(task_names: list[str], framework: str, seeds: list[int], records: Path) -> None:
    for name in task_names:
        task = TASKS[name]
        for seed in seeds:
            record = (run_kppo if framework == "kppo" else run_sb3)(task, seed)
            record.update(task=name, env_id=task.env_id, framework=framework, seed=seed, budget=task.budget,
                          date=time.strftime("%Y-%m-%d"), machine=_machine())
            path = records / name / f"{framework}-seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record, indent=1) + "\n")
            print(f"{name} {framework} seed {seed}: {record['final_mean']:.1f} +- {record['final_std']:.1f} "
                  f"in {record['wall_s']:.0f} s -> {path}", flush=True)


def load(records: Path) -> dict[tuple[str, str], list[dict]]:
    """(task, framework) -> records sorted by seed."""
    out: dict[tuple[str, str], list[dict]] = {}
    for path in sorted(records.glob("*/*.json")):
        record = json.loads(path.read_text())
        out.setdefault((record["task"], record["framework"]), []).append(record)
    return {key: sorted(rs, key=lambda r: r["seed"]) for key, rs in out.items()}


def summarize(rows: list[dict], zoo: float) -> dict:
    """Mean and (population) std of the final returns over seeds, seeds at or above the zoo number, mean time."""
    import numpy as np

    finals = np.array([r["final_mean"] for r in rows])
    return {
        "seeds": len(rows),
        "mean": float(finals.mean()),
        "std": float(finals.std()),
        "per_seed": [float(f) for f in finals],
        "seeds_reached": int((finals >= zoo).sum()),
        "reached": bool(finals.mean() >= zoo),
        "wall_s": float(np.mean([r["wall_s"] for r in rows])),
        "steps_per_s": float(np.mean([r["steps_per_s"] for r in rows])),
    }


def table(results: dict[tuple[str, str], list[dict]]) -> str:
    lines = [
        "| task | budget | RL-Zoo PPO | kppo (mean ± std over seeds) | seeds | per seed | vs zoo | kppo wall s | "
        "kppo steps/s | SB3, zoo hyperparameters | SB3 wall s | SB3 steps/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, task in TASKS.items():
        k = results.get((name, "kppo"))
        if not k:
            lines.append(f"| {task.env_id} | {task.budget:,} | {task.zoo:g} | not run | | | | | | | | |")
            continue
        s = summarize(k, task.zoo)
        mark = "**reached**" if s["reached"] else "not reached"
        row = (f"| {task.env_id} | {task.budget:,} | {task.zoo:g} | {s['mean']:.1f} ± {s['std']:.1f} | {s['seeds']} | "
               f"{' / '.join(f'{x:.1f}' for x in s['per_seed'])} | {mark} ({s['seeds_reached']}/{s['seeds']} seeds) | "
               f"{s['wall_s']:.0f} | {s['steps_per_s']:,.0f} |")
        b = results.get((name, "sb3"))
        if b:
            t = summarize(b, task.zoo)
            seeds = f"{t['seeds']} seed" + ("s" if t["seeds"] > 1 else "")
            row += f" {t['mean']:.1f} ± {t['std']:.1f} ({seeds}) | {t['wall_s']:.0f} | {t['steps_per_s']:,.0f} |"
        else:
            row += " not run | | |"
        lines.append(row)
    return "\n".join(lines)


def figure(name: str, results: dict[tuple[str, str], list[dict]], path: Path) -> None:
    """All seeds (thin), their mean (thick) and min-max spread per framework, the zoo number dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    task = TASKS[name]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for framework, color in zip(FRAMEWORKS, ("tab:blue", "tab:orange")):
        rows = results.get((name, framework))
        if not rows:
            continue
        n = min(len(r["curve"]["steps"]) for r in rows)
        steps = np.array(rows[0]["curve"]["steps"][:n])
        curves = np.array([r["curve"]["eval_mean"][:n] for r in rows])
        for c in curves:
            ax.plot(steps, c, color=color, lw=0.6, alpha=0.5)
        ax.fill_between(steps, curves.min(0), curves.max(0), color=color, alpha=0.15)
        ax.plot(steps, curves.mean(0), color=color, lw=2, label=f"{framework} ({len(rows)} seeds)")
    ax.axhline(task.zoo, color="k", ls="--", lw=1, label=f"RL-Zoo PPO {task.zoo:g}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("deterministic eval return")
    ax.set_title(task.env_id)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(records: Path, doc: Path, figures: Path) -> None:
    results = load(records)
    for name in TASKS:
        if (name, "kppo") in results:
            figure(name, results, figures / f"results_{name}.png")
    text = doc.read_text()
    start, end = "<!-- RESULTS-TABLE -->", "<!-- /RESULTS-TABLE -->"
    if start not in text or end not in text:
        raise SystemExit(f"{doc}: expected the markers {start} and {end}")
    head, rest = text.split(start, 1)
    doc.write_text(head + start + "\n" + table(results) + "\n" + end + rest.split(end, 1)[1])
    print(table(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train tasks for several seeds and write one record per run")
    r.add_argument("tasks", nargs="+", choices=sorted(TASKS))
    r.add_argument("--framework", choices=FRAMEWORKS, default="kppo")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--records", type=Path, default=RECORDS)
    p = sub.add_parser("report", help="write the table into docs/results.md and the figures")
    p.add_argument("--records", type=Path, default=RECORDS)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--figures", type=Path, default=FIGURES)
    args = parser.parse_args()
    if args.command == "run":
        run(args.tasks, args.framework, args.seeds, args.records)
    else:
        report(args.records, args.doc, args.figures)


if __name__ == "__main__":
    main()
