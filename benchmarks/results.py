"""The results table: kppo against the published RL-Zoo PPO numbers, with SB3 (zoo hyperparameters) side by side.

Each task trains at the zoo's budget for several seeds; every run ends with a deterministic evaluation and writes one
JSON record (final return, learning curve, wall time, steps/s) to benchmarks/results/<task>/<framework>-seed<N>.json.
Frameworks: `kppo` (`kppo.train` on the task's config), `kppo_ppo` (`kppo.PPO("MlpPolicy", ...)` with exactly SB3's
zoo hyperparameters), `sb3`. `report` writes the table into docs/results.md (between its RESULTS-TABLE markers; the
statistics are in benchmarks/stats.py) and one learning-curve figure per task into docs/figures/.

    .venv/bin/python benchmarks/results.py run cartpole acrobot --seeds 0 1 2
    .venv/bin/python benchmarks/results.py run halfcheetah --framework kppo_ppo --seeds 0 1 2
    .venv-bench/bin/python benchmarks/results.py run cartpole --framework sb3 --seeds 0 1 2
    .venv/bin/python benchmarks/results.py report [--doc PATH] [--figures DIR]
    .venv-bench/bin/python benchmarks/results.py sb3-init halfcheetah --seeds 0 1 2   # then:
    .venv/bin/python benchmarks/results.py run halfcheetah --framework kppo_ppo_sb3init --seeds 0 1 2

The kppo frameworks need kppo's environment; sb3 imports only stable-baselines3, torch and gymnasium (the peers'
virtualenv, benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "results.md"
FIGURES = ROOT / "docs" / "figures"
FRAMEWORKS = ("kppo", "kppo_ppo", "sb3", "kppo_ppo_sb3init")
OPTIONAL = ("kppo_ppo_sb3init",)  # in the table only where records exist
LABELS = {
    "kppo": "kppo (configs/)",
    "kppo_ppo": "kppo.PPO (zoo args)",
    "sb3": "SB3 (zoo args)",
    "kppo_ppo_sb3init": "kppo.PPO from SB3's initial weights",
}
COLORS = {"kppo": "tab:blue", "kppo_ppo": "tab:green", "sb3": "tab:orange", "kppo_ppo_sb3init": "tab:red"}
SB3_INIT = ROOT / "bench_out" / "sb3_init"  # SB3's initial weights per task and seed (`sb3-init`; deterministic)
SB3_ACTIVATIONS = {"relu": "ReLU", "tanh": "Tanh"}  # the zoo's activation_fn names -> torch.nn classes


def _load_module(name: str, path: Path):
    """A module by path (benchmarks/stats.py, the SB3 weight layout and transplant), so this file also works when
    imported from elsewhere (tests)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


stats = _load_module("_kppo_bench_stats", Path(__file__).with_name("stats.py"))
harness = _load_module("_kppo_bench_harness", Path(__file__).with_name("harness.py"))


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
        "CartPole-v1",
        "configs/cartpole_100k.yaml",
        500.0,
        100_000,
        10,
        64,
        dict(
            n_envs=8,
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate="lin_0.001",
            clip_range="lin_0.2",
        ),
    ),
    "acrobot": Task(
        "Acrobot-v1",
        "configs/acrobot.yaml",
        -73.5,
        1_000_000,
        10,
        64,
        dict(normalize=True, n_envs=16, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0),
    ),
    "mountaincar_continuous": Task(
        "MountainCarContinuous-v0",
        "configs/mountaincar_continuous.yaml",
        88.3,
        20_000,
        10,
        32,
        dict(
            normalize=True,
            n_envs=1,
            batch_size=256,
            n_steps=8,
            gamma=0.9999,
            learning_rate=7.77e-05,
            ent_coef=0.00429,
            clip_range=0.1,
            n_epochs=10,
            gae_lambda=0.9,
            max_grad_norm=5,
            vf_coef=0.19,
            use_sde=True,
            policy_kwargs=dict(log_std_init=-3.29, ortho_init=False),
        ),
    ),
    "pendulum": Task(
        "Pendulum-v1",
        "configs/pendulum_100k.yaml",
        -172.0,
        100_000,
        10,
        32,
        dict(
            normalize=True,
            n_envs=4,
            n_steps=1024,
            gae_lambda=0.95,
            gamma=0.9,
            n_epochs=10,
            ent_coef=0.0,
            learning_rate=1e-3,
            clip_range=0.2,
            use_sde=True,
            sde_sample_freq=4,
        ),
    ),
    "lunarlander_continuous": Task(
        "LunarLanderContinuous-v3",
        "configs/lunarlander_continuous.yaml",
        270.9,
        1_000_000,
        10,
        10,
        dict(
            normalize=True,
            n_envs=16,
            n_steps=1024,
            batch_size=64,
            gae_lambda=0.98,
            gamma=0.999,
            n_epochs=4,
            ent_coef=0.01,
        ),
    ),
    "halfcheetah": Task(
        "HalfCheetah-v5",
        "configs/halfcheetah.yaml",
        5819.0,
        1_000_000,
        20,
        10,
        dict(
            normalize=True,
            n_envs=1,
            batch_size=64,
            n_steps=512,
            gamma=0.98,
            learning_rate=2.0633e-05,
            ent_coef=0.000401762,
            clip_range=0.1,
            n_epochs=20,
            gae_lambda=0.92,
            max_grad_norm=0.8,
            vf_coef=0.58096,
            policy_kwargs=dict(
                log_std_init=-2, ortho_init=False, activation_fn="relu", net_arch=dict(pi=[256, 256], vf=[256, 256])
            ),
        ),
    ),
    "hopper": Task(
        "Hopper-v5",
        "configs/hopper.yaml",
        2410.0,
        1_000_000,
        20,
        10,
        dict(
            normalize=True,
            n_envs=1,
            batch_size=32,
            n_steps=512,
            gamma=0.999,
            learning_rate=9.80828e-05,
            ent_coef=0.00229519,
            clip_range=0.2,
            n_epochs=5,
            gae_lambda=0.99,
            max_grad_norm=0.7,
            vf_coef=0.835671,
            policy_kwargs=dict(
                log_std_init=-2, ortho_init=False, activation_fn="relu", net_arch=dict(pi=[256, 256], vf=[256, 256])
            ),
        ),
    ),
}


def _machine() -> str:
    return f"{harness.cpu_model()} x {os.cpu_count()} CPUs"


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


def _zoo_schedules(hp: dict) -> dict:
    """The zoo's 'lin_X' strings as SB3 schedules (progress_remaining -> X * progress_remaining); the rest as is."""
    out = {}
    for key, value in hp.items():
        if isinstance(value, str) and value.startswith("lin_"):
            start = float(value[4:])

            def value(progress, start=start):
                return progress * start

        out[key] = value
    return out


def _sb3_hyperparams(hp: dict) -> dict:
    """The zoo's spellings to SB3 arguments: 'lin_X' schedules, activation names as torch.nn classes."""
    import torch

    out = _zoo_schedules(hp)
    kwargs = dict(out.pop("policy_kwargs", {}))
    if isinstance(kwargs.get("activation_fn"), str):
        kwargs["activation_fn"] = getattr(torch.nn, SB3_ACTIVATIONS[kwargs["activation_fn"]])
    if kwargs:
        out["policy_kwargs"] = kwargs
    return out


def _learn_and_evaluate(model, task: Task, base: type, play) -> dict:
    """Trains `model` for the budget, evaluating at the first env step at or past every budget / eval_rounds steps
    before the budget (an SB3-style callback of class `base`: SB3's or kppo's BaseCallback) and once after `learn`.

    Args:
        play: `play()` -> the returns of task.eval_episodes deterministic episodes of the current policy.

    Returns:
        The record's common fields: final mean and (population) std, per-episode returns, curve, steps, wall time.
    """
    import numpy as np

    curve = {"steps": [], "eval_mean": [], "eval_std": []}
    every = task.budget // task.eval_rounds

    def evaluate() -> list[float]:
        returns = [float(r) for r in play()]
        curve["steps"].append(int(model.num_timesteps))
        curve["eval_mean"].append(float(np.mean(returns)))
        curve["eval_std"].append(float(np.std(returns)))
        return returns

    class Rounds(base):
        def _on_step(self) -> bool:
            if self.num_timesteps >= (len(curve["steps"]) + 1) * every and self.num_timesteps < task.budget:
                evaluate()
            return True

    start = time.perf_counter()
    model.learn(task.budget, callback=Rounds())
    returns = evaluate()
    wall = time.perf_counter() - start
    return {
        "final_mean": curve["eval_mean"][-1],
        "final_std": curve["eval_std"][-1],
        "episodes": task.eval_episodes,
        "returns": returns,
        "curve": curve,
        "total_steps": int(model.num_timesteps),
        "wall_s": wall,
        "steps_per_s": model.num_timesteps / wall,
    }


def _sb3_model(task: Task, seed: int):
    """(SB3 PPO with the zoo's arguments, training env, evaluation env, normalize): its initial weights follow from
    the seed alone."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if task.sb3 is None:
        raise SystemExit(f"{task.env_id}: no SB3 run in this table (too slow on this machine)")
    hp = dict(task.sb3)
    n_envs, normalize = hp.pop("n_envs", 1), hp.pop("normalize", False)
    env = make_vec_env(task.env_id, n_envs=n_envs, seed=seed)
    eval_env = make_vec_env(task.env_id, n_envs=1, seed=seed + 10_000)
    if normalize:  # the zoo normalizes with the agent's discount
        env = VecNormalize(env, gamma=hp.get("gamma", 0.99))
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    return PPO("MlpPolicy", env, seed=seed, verbose=0, **_sb3_hyperparams(hp)), env, eval_env, normalize


def dump_sb3_init(task_name: str, seed: int) -> Path:
    """SB3's initial weights for (task, seed) in Keras layout (tests/fixtures/sb3/sb3_layout.py), as an npz."""
    import numpy as np
    import torch

    layout = _load_module("_kppo_sb3_layout", ROOT / "tests" / "fixtures" / "sb3" / "sb3_layout.py")
    task = TASKS[task_name]
    model = _sb3_model(task, seed)[0]
    kwargs = task.sb3.get("policy_kwargs", {})
    activation = getattr(torch.nn, SB3_ACTIVATIONS[kwargs.get("activation_fn", "tanh")])
    layers = len(kwargs.get("net_arch", {}).get("pi", [64, 64]))
    path = SB3_INIT / f"{task_name}-seed{seed}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **layout.keras_weights(model, activation, layers))
    return path


def run_sb3(task: Task, seed: int) -> dict:
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    model, env, eval_env, normalize = _sb3_model(task, seed)

    def play() -> list[float]:
        if normalize:
            eval_env.obs_rms = env.obs_rms.copy()
        return evaluate_policy(
            model, eval_env, n_eval_episodes=task.eval_episodes, deterministic=True, return_episode_rewards=True
        )[0]

    record = _learn_and_evaluate(model, task, BaseCallback, play)
    record["versions"] = {"stable_baselines3": stable_baselines3.__version__, "torch": torch.__version__}
    return record


def run_kppo_ppo(task: Task, seed: int, sb3_init: bool = False) -> dict:
    """kppo's SB3-style class with exactly run_sb3's hyperparameters, curve and final evaluation; with `sb3_init`,
    starting from SB3's initial weights for this seed (`dump_sb3_init`), which separates initialization from the
    rest."""
    import gymnasium as gym
    import kppo
    from kppo._tf import tf

    if task.sb3 is None:
        raise SystemExit(f"{task.env_id}: no zoo hyperparameters in the task table")
    # One thread, like SB3's torch.set_num_threads(1); a no-op when already set (the next seed in this process).
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hp = dict(task.sb3)
    n_envs, normalize = hp.pop("n_envs", 1), hp.pop("normalize", False)
    env = kppo.make_vec_env(task.env_id, n_envs, seed=seed)
    if normalize:  # the zoo normalizes with the agent's discount
        env = kppo.VecNormalize(env, gamma=hp.get("gamma", 0.99))
    model = kppo.PPO("MlpPolicy", env, seed=seed, verbose=0, **_zoo_schedules(hp))  # activation_fn: kppo's names
    if sb3_init:
        path = SB3_INIT / f"{next(n for n, t in TASKS.items() if t is task)}-seed{seed}.npz"
        if not path.is_file():
            raise SystemExit(
                f"{path}: run `.venv-bench/bin/python benchmarks/results.py sb3-init TASK --seeds ...` first"
            )
        reference = _load_module("_kppo_sb3_reference", ROOT / "tests" / "sb3_reference.py")
        reference.set_weights(model.agent, dict(__import__("numpy").load(path)))
    # A plain env: the policy normalizes observations itself, with the training statistics frozen outside learn's
    # rollouts (no reward normalization in the returns).
    eval_env = gym.wrappers.RecordEpisodeStatistics(gym.make(task.env_id))
    eval_env.reset(seed=seed + 10_000)

    def play() -> list[float]:
        return kppo.evaluate_policy(
            model, eval_env, n_eval_episodes=task.eval_episodes, deterministic=True, return_episode_rewards=True
        )[0]

    record = _learn_and_evaluate(model, task, kppo.BaseCallback, play)
    eval_env.close()
    record["threads"] = 1
    record["versions"] = {"kppo": kppo.__version__, "tensorflow": tf.__version__, "gymnasium": gym.__version__}
    return record


RUNNERS = {
    "kppo": run_kppo,
    "kppo_ppo": run_kppo_ppo,
    "sb3": run_sb3,
    "kppo_ppo_sb3init": lambda task, seed: run_kppo_ppo(task, seed, sb3_init=True),
}


def run(task_names: list[str], framework: str, seeds: list[int], records: Path) -> None:
    for name in task_names:
        task = TASKS[name]
        for seed in seeds:
            record = RUNNERS[framework](task, seed)
            record.update(
                task=name,
                env_id=task.env_id,
                framework=framework,
                seed=seed,
                budget=task.budget,
                date=time.strftime("%Y-%m-%d"),
                machine=_machine(),
            )
            path = records / name / f"{framework}-seed{seed}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record, indent=1) + "\n")
            print(
                f"{name} {framework} seed {seed}: {record['final_mean']:.1f} +- {record['final_std']:.1f} "
                f"in {record['wall_s']:.0f} s -> {path}",
                flush=True,
            )


def load(records: Path) -> dict[tuple[str, str], list[dict]]:
    """(task, framework) -> records sorted by seed."""
    out: dict[tuple[str, str], list[dict]] = {}
    for path in sorted(records.glob("*/*.json")):
        record = json.loads(path.read_text())
        out.setdefault((record["task"], record["framework"]), []).append(record)
    return {key: sorted(rs, key=lambda r: r["seed"]) for key, rs in out.items()}


def summarize(rows: list[dict], zoo: float) -> dict:
    """`stats.summarize` of a (task, framework)'s records: final returns over seeds, 95% interval, timings."""
    return stats.summarize(
        [r["final_mean"] for r in rows], zoo, [r["wall_s"] for r in rows], [r["steps_per_s"] for r in rows]
    )


def _cells(s: dict, versus: dict | None) -> list[str]:
    ci = "—" if s["ci"] is None else "[{:.1f}, {:.1f}]".format(*s["ci"])
    mark = "**reached**" if s["reached"] else "not reached"
    cells = [
        str(s["seeds"]),
        f"{s['mean']:.1f}",
        ci,
        f"{s['std']:.1f}",
        " / ".join(f"{x:.1f}" for x in s["per_seed"]),
        f"{mark} ({s['seeds_reached']}/{s['seeds']} seeds)",
        "—",
        "—",
        "—",
    ]
    if versus is not None:
        test, inside, ratio = versus["test"], {None: "n/a", True: "yes", False: "no"}[versus["inside"]], versus["ratio"]
        cells[-3:] = [f"{test.p_value:.2g} (min {test.p_min:.2g})", inside, "n/a" if ratio is None else f"{ratio:.2f}"]
    return [*cells, f"{s['wall_s']:.0f}", f"{s['steps_per_s']:,.0f}"]


def table(results: dict[tuple[str, str], list[dict]]) -> str:
    """One row per task and framework; the comparison columns test each kppo framework against SB3."""
    header = ["task", "budget", "RL-Zoo PPO", "framework", "seeds", "mean", "95% CI of the mean", "std", "per seed"]
    header += ["vs zoo", "p vs SB3", "in SB3's CI", "mean / SB3's", "wall s", "steps/s"]
    lines = []
    for name, task in TASKS.items():
        sb3 = results.get((name, "sb3"))
        reference = summarize(sb3, task.zoo) if sb3 else None
        for i, framework in enumerate(FRAMEWORKS):
            head = [task.env_id] + ([f"{task.budget:,}", f"{task.zoo:g}"] if i == 0 else ["", ""]) + [LABELS[framework]]
            rows = results.get((name, framework))
            if not rows and framework in OPTIONAL:
                continue
            if not rows:
                lines.append(head + ["0", "not run"] + [""] * 9)
                continue
            s = summarize(rows, task.zoo)
            versus = stats.compare(s, reference) if framework != "sb3" and reference is not None else None
            lines.append(head + _cells(s, versus))
    return harness.markdown_table(header, lines)


def figure(name: str, results: dict[tuple[str, str], list[dict]], path: Path) -> None:
    """Per framework: every seed (thin), the mean over seeds (thick) and its 95% bootstrap band (shaded, 2+ seeds);
    the zoo number dashed. Seeds are cut to the shortest curve and share the first seed's step grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    task = TASKS[name]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for framework in FRAMEWORKS:
        rows = [r for r in results.get((name, framework), []) if r.get("curve", {}).get("steps")]
        if not rows:
            continue
        color = COLORS[framework]
        n = min(len(r["curve"]["steps"]) for r in rows)
        steps = np.array(rows[0]["curve"]["steps"][:n])
        curves = np.array([r["curve"]["eval_mean"][:n] for r in rows])  # [seeds, n]
        for c in curves:
            ax.plot(steps, c, color=color, lw=0.5, alpha=0.45)
        if len(rows) > 1:
            low, high = stats.bootstrap_mean_ci(curves)
            ax.fill_between(steps, low, high, color=color, alpha=0.2, lw=0)
        seeds = f"{len(rows)} seed" + ("s" if len(rows) > 1 else "")
        ax.plot(steps, curves.mean(0), color=color, lw=2, label=f"{LABELS[framework]} ({seeds})")
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
        if any((name, framework) in results for framework in FRAMEWORKS):
            figure(name, results, figures / f"results_{name}.png")
    text, body = doc.read_text(), table(results)
    start, end = "<!-- RESULTS-TABLE -->", "<!-- /RESULTS-TABLE -->"
    if start not in text or end not in text:
        raise SystemExit(f"{doc}: expected the markers {start} and {end}")
    head, rest = text.split(start, 1)
    doc.write_text(head + start + "\n" + body + "\n" + end + rest.split(end, 1)[1])
    print(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train tasks for several seeds and write one record per run")
    r.add_argument("tasks", nargs="+", choices=sorted(TASKS))
    r.add_argument("--framework", choices=FRAMEWORKS, default="kppo")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--records", type=Path, default=RECORDS)
    i = sub.add_parser(
        "sb3-init", help="(peers' virtualenv) SB3's initial weights per task and seed, for --framework kppo_ppo_sb3init"
    )
    i.add_argument("tasks", nargs="+", choices=sorted(TASKS))
    i.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p = sub.add_parser("report", help="write the table into docs/results.md and the figures")
    p.add_argument("--records", type=Path, default=RECORDS)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--figures", type=Path, default=FIGURES)
    args = parser.parse_args()
    if args.command == "run":
        run(args.tasks, args.framework, args.seeds, args.records)
    elif args.command == "sb3-init":
        for name in args.tasks:
            for seed in args.seeds:
                print(dump_sb3_init(name, seed))
    else:
        report(args.records, args.doc, args.figures)


if __name__ == "__main__":
    main()
