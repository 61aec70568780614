#!/usr/bin/env python
"""Side-by-side PPO benchmark on gymnasium environments stepped on the host: kppo.PPO vs Stable-Baselines3.

Both frameworks go through their SB3-style API (`PPO("MlpPolicy", env, ...)`, `learn`, `evaluate_policy`) on the
same gymnasium environments, on one CPU thread each (TensorFlow intra/inter-op pools of 1 thread;
`torch.set_num_threads(1)`).

Tasks (budgets are multiplied by --timesteps-scale; both frameworks collect whole rollouts, so the step count is
rounded up to the next whole rollout by both alike):
  cartpole  CartPole-v1, 16 envs x 128 steps, 500,000 steps, 4 epochs, batch_size 512, lr 2.5e-4 annealed
            linearly (lambda p: 2.5e-4 * p), gamma 0.99, GAE lambda 0.95, clip 0.2, ent_coef 0.01, vf_coef 0.5,
            max_grad_norm 0.5, net_arch pi=[64, 64], vf=[64, 64], tanh.
  pendulum  Pendulum-v1 with RL-Zoo's PPO setting: 4 envs x 1024 steps, 100,000 steps, batch_size 64, 10 epochs,
            lr 1e-3, gamma 0.9, GAE lambda 0.95, clip 0.2, ent_coef 0.0, use_sde=True, sde_sample_freq=4 (SB3
            defaults for the rest: vf_coef 0.5, max_grad_norm 0.5, 2x64 tanh). When kppo raises
            NotImplementedError for use_sde (or with --kppo-sde off), kppo runs with use_sde=False and
            policy_kwargs=dict(squash_output=True) and its row is marked "(no gSDE)".
  halfcheetah  HalfCheetah-v5 with RL-Zoo's PPO setting (its HalfCheetah-v3 entry): 1 env x 512 steps, 1,000,000
            steps, batch_size 64, 20 epochs, lr 2.0633e-5, gamma 0.98, GAE lambda 0.92, clip 0.1, ent_coef 4.0e-4,
            vf_coef 0.58, max_grad_norm 0.8, VecNormalize (obs and reward), pi/vf 2x256 ReLU, log_std_init -2,
            ortho_init=False. Needs MuJoCo (`pip install -e ".[mujoco]"`; gymnasium[mujoco] in the peer venv).

Each (task, framework) runs in its own fresh interpreter (this file with --worker NAME --task TASK) that prints one
JSON line; the driver alternates the order of the frameworks across repeats and prints one markdown table per task
(median over repeats) with kppo's steps/s and wall-time ratios against SB3.

Usage (from the repository root; kppo runs under the interpreter running this script unless --python-kppo says
otherwise, SB3 under --python-peers):
  .venv/bin/python benchmarks/gym_ppo.py --python-peers .venv-bench/bin/python
  .venv/bin/python benchmarks/gym_ppo.py --python-peers .venv-bench/bin/python --timesteps-scale 0.1  # smoke run
  .venv/bin/python benchmarks/gym_ppo.py --tasks pendulum --repeats 3 --python-peers .venv-bench/bin/python \\
      --json bench_out/gymnasium.json

Only the standard library is imported here at module level; each worker imports only its own framework.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script
from harness import package_versions

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_cartpole_helpers():
    # benchmarks/ is not a package: load the sibling harness by its path.
    # It imports only the standard library at module level.
    spec = importlib.util.spec_from_file_location("_kppo_bench_cartpole", os.path.join(_HERE, "cartpole.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cp = _load_cartpole_helpers()
_rss_mb, _worker_env, REPO_ROOT = _cp._rss_mb, _cp._worker_env, _cp.REPO_ROOT

# --------------------------------------------------------------------------------------------------
# The tasks. "lr" is ("constant", value) or ("linear", start) for lambda p: start * p (p = progress remaining).
# --------------------------------------------------------------------------------------------------
TASKS = {
    "cartpole": dict(
        env_id="CartPole-v1",
        n_envs=16,
        timesteps=500_000,
        lr=("linear", 2.5e-4),
        ppo=dict(
            n_steps=128,
            batch_size=512,
            n_epochs=4,
            gamma=0.99,
            gae_lambda=0.95,
            clip_range=0.2,
            ent_coef=0.01,
            vf_coef=0.5,
            max_grad_norm=0.5,
        ),
        net_arch=dict(pi=[64, 64], vf=[64, 64]),
        sde=None,
    ),
    "pendulum": dict(  # rl-baselines3-zoo hyperparams/ppo.yml, Pendulum-v1
        env_id="Pendulum-v1",
        n_envs=4,
        timesteps=100_000,
        lr=("constant", 1e-3),
        ppo=dict(
            n_steps=1024,
            batch_size=64,
            n_epochs=10,
            gamma=0.9,
            gae_lambda=0.95,
            clip_range=0.2,
            ent_coef=0.0,
            vf_coef=0.5,
            max_grad_norm=0.5,
        ),
        net_arch=dict(pi=[64, 64], vf=[64, 64]),
        sde=dict(use_sde=True, sde_sample_freq=4),
    ),
    "halfcheetah": dict(  # rl-baselines3-zoo hyperparams/ppo.yml, HalfCheetah-v3 entry, on HalfCheetah-v5
        env_id="HalfCheetah-v5",
        n_envs=1,
        timesteps=1_000_000,
        lr=("constant", 2.0633e-05),
        ppo=dict(
            n_steps=512,
            batch_size=64,
            n_epochs=20,
            gamma=0.98,
            gae_lambda=0.92,
            clip_range=0.1,
            ent_coef=0.000401762,
            vf_coef=0.58096,
            max_grad_norm=0.8,
        ),
        net_arch=dict(pi=[256, 256], vf=[256, 256]),
        activation="relu",
        policy=dict(log_std_init=-2.0, ortho_init=False),
        normalize=True,  # VecNormalize(norm_obs=True, norm_reward=True, gamma=ppo gamma), as the zoo's normalize: true
        sde=None,
    ),
}
FRAMEWORKS = ("kppo", "sb3")
REQUIRED_MODULES = {
    "kppo": ("kppo", "tensorflow", "keras", "gymnasium"),
    "sb3": ("torch", "stable_baselines3", "gymnasium"),
}
EVAL_SEED_OFFSET = 10_000


def _learning_rate(spec):
    kind, value = spec
    if kind == "linear":
        return lambda p: value * p
    return value


def _rollout(task: dict) -> int:
    return task["n_envs"] * task["ppo"]["n_steps"]


# --------------------------------------------------------------------------------------------------
# Workers. Timing conventions (wall clock, perf_counter):
#   import_s: importing the framework (kppo + TensorFlow + gymnasium; torch + SB3 + gymnasium).
#   setup_s : building the vector env and the model (`PPO(...)`). For kppo on pendulum, a use_sde=True attempt
#             that raises NotImplementedError is timed apart (sde_attempt_s) and not counted.
#   learn_s : model.learn(timesteps).
#   total_s : setup_s + learn_s. The final evaluation is excluded from every figure, including peak RSS.
# --------------------------------------------------------------------------------------------------


def _source_sha(package_dir: str) -> str:
    """A short hash of a package's .py sources, to tell which version of a working tree a run used."""
    import hashlib

    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(package_dir)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, package_dir).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:12]


def worker_kppo(task: dict, timesteps: int, seed: int, eval_episodes: int, sde_mode: str = "auto") -> dict:
    t0 = time.perf_counter()
    import gymnasium as gym
    import kppo
    from kppo._tf import tf

    kppo.PPO  # noqa: B018  (kppo loads its names lazily: import_s counts the SB3 facade's modules, as before)

    # One thread, like SB3 with torch.set_num_threads(1). Must happen before TensorFlow runs its first op.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    t1 = time.perf_counter()

    env_id, n_envs = task["env_id"], task["n_envs"]
    kwargs = dict(task["ppo"], learning_rate=_learning_rate(task["lr"]), seed=seed, verbose=0)
    policy_kwargs = dict(
        net_arch=task["net_arch"], activation_fn=task.get("activation", "tanh"), **task.get("policy", {})
    )

    def make_env():
        env = kppo.make_vec_env(env_id, n_envs=n_envs, seed=seed)
        return kppo.VecNormalize(env, gamma=task["ppo"]["gamma"]) if task.get("normalize") else env

    sde_note, sde_attempt_s, use_sde = None, 0.0, False
    if task["sde"] and sde_mode == "off":
        sde_note = "--kppo-sde off"
        policy_kwargs = dict(policy_kwargs, squash_output=True)
    elif task["sde"]:
        try:
            env = make_env()
            model = kppo.PPO("MlpPolicy", env, policy_kwargs=policy_kwargs, **task["sde"], **kwargs)
            use_sde = True
        except NotImplementedError as exc:
            sde_note = f"{type(exc).__name__}: {exc}"
            try:
                env.close()
            except Exception:  # already closed by the failed constructor
                pass
            sde_attempt_s = time.perf_counter() - t1
            t1 = time.perf_counter()
            policy_kwargs = dict(policy_kwargs, squash_output=True)
    if not use_sde:
        env = make_env()
        model = kppo.PPO("MlpPolicy", env, policy_kwargs=policy_kwargs, **kwargs)
    t2 = time.perf_counter()
    model.learn(timesteps)
    t3 = time.perf_counter()
    peak_rss = _rss_mb()

    eval_env = gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))  # the policy normalizes observations itself
    eval_env.reset(seed=seed + EVAL_SEED_OFFSET)
    returns, _ = kppo.evaluate_policy(
        model, eval_env, n_eval_episodes=eval_episodes, deterministic=True, return_episode_rewards=True
    )
    eval_env.close()
    return dict(
        import_s=t1 - t0 - sde_attempt_s,
        setup_s=t2 - t1,
        learn_s=t3 - t2,
        env_steps=int(model.num_timesteps),
        peak_rss_mb=peak_rss,
        returns=[float(r) for r in returns],
        use_sde=use_sde,
        squash_output=bool(policy_kwargs.get("squash_output", False)),
        sde_attempt_s=sde_attempt_s,
        sde_note=sde_note,
        eval_on=f"gymnasium {env_id} (kppo.evaluate_policy, deterministic)",
        threads=dict(
            intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
        ),
        versions=package_versions("kppo", "tensorflow", "keras", "tensorflow-probability", "gymnasium", "numpy"),
        kppo_source_sha=_source_sha(os.path.dirname(os.path.abspath(kppo.__file__))),
    )


def worker_sb3(task: dict, timesteps: int, seed: int, eval_episodes: int, sde_mode: str = "auto") -> dict:
    del sde_mode  # SB3 always runs the task's gSDE setting
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    t1 = time.perf_counter()
    env_id = task["env_id"]
    env = make_vec_env(env_id, n_envs=task["n_envs"], vec_env_cls=DummyVecEnv, seed=seed)
    if task.get("normalize"):
        env = VecNormalize(env, gamma=task["ppo"]["gamma"])
    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[task.get("activation", "tanh")]
    model = PPO(
        "MlpPolicy",
        env,
        learning_rate=_learning_rate(task["lr"]),
        policy_kwargs=dict(net_arch=task["net_arch"], activation_fn=activation, **task.get("policy", {})),
        seed=seed,
        device="cpu",
        verbose=0,
        **(task["sde"] or {}),
        **task["ppo"],
    )
    t2 = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    t3 = time.perf_counter()
    peak_rss = _rss_mb()

    eval_env = monitor = Monitor(gym.make(env_id))
    monitor.reset(seed=seed + EVAL_SEED_OFFSET)
    if task.get("normalize"):  # frozen statistics of training, raw rewards (Monitor's) reported
        eval_env = VecNormalize(DummyVecEnv([lambda: monitor]), training=False, norm_reward=False)
        eval_env.obs_rms = env.obs_rms
    returns, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=eval_episodes, deterministic=True, return_episode_rewards=True
    )
    eval_env.close()
    return dict(
        import_s=t1 - t0,
        setup_s=t2 - t1,
        learn_s=t3 - t2,
        env_steps=int(model.num_timesteps),
        peak_rss_mb=peak_rss,
        returns=[float(r) for r in returns],
        use_sde=bool(model.use_sde),
        squash_output=False,
        eval_on=f"gymnasium {env_id} (SB3 evaluate_policy, deterministic)",
        threads=dict(intra_op=torch.get_num_threads()),
        versions=package_versions("torch", "stable-baselines3", "gymnasium", "numpy"),
    )


WORKERS = {"kppo": worker_kppo, "sb3": worker_sb3}


def run_worker(name: str, task_name: str, timesteps: int, seed: int, eval_episodes: int, sde_mode: str) -> None:
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out = WORKERS[name](TASKS[task_name], timesteps, seed, eval_episodes, sde_mode)
    out = dict(framework=name, task=task_name, timesteps=timesteps, seed=seed, **out)
    out["total_s"] = out["setup_s"] + out["learn_s"]
    out["steps_per_s"] = out["env_steps"] / out["learn_s"] if out["learn_s"] > 0 else float("nan")
    out["final_return"] = statistics.mean(out["returns"])
    out["final_return_std"] = statistics.pstdev(out["returns"])
    out["loadavg_1m_before"] = load_before
    out["loadavg_1m_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out["python"] = sys.executable
    sys.stdout.flush()
    print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------------------------------
# Driver.
# --------------------------------------------------------------------------------------------------


def _launch(name: str, task_name: str, python: str, timesteps: int, args) -> dict:
    cmd = [
        python,
        os.path.abspath(__file__),
        "--worker",
        name,
        "--task",
        task_name,
        "--timesteps",
        str(timesteps),
        "--seed",
        str(args.seed),
        "--eval-episodes",
        str(args.eval_episodes),
        "--kppo-sde",
        args.kppo_sde,
    ]
    print(f"[bench] {task_name}/{name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=_worker_env(name), timeout=args.timeout
        )
    except subprocess.TimeoutExpired:
        return dict(framework=name, task=task_name, error=f"timed out after {args.timeout}s")
    wall = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except json.JSONDecodeError:
                continue
            if res.get("framework") == name:
                res["process_wall_s"] = wall  # interpreter start, imports and evaluation included
                return res
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    return dict(framework=name, task=task_name, error=f"exit {proc.returncode}", stderr_tail="\n".join(tail))


def summarize(results: list, frameworks: list, task_sde: bool = False) -> tuple[list, str]:
    keys = ("import_s", "setup_s", "learn_s", "total_s", "steps_per_s", "peak_rss_mb", "final_return")
    rows = []
    for name in frameworks:
        ok = [r for r in results if r.get("framework") == name and "error" not in r]
        if not ok:
            continue
        label = name
        if name == "kppo" and any(r.get("sde_note") or (task_sde and not r.get("use_sde")) for r in ok):
            label = "kppo (no gSDE)"
        row = dict(framework=name, label=label, n=len(ok), env_steps=ok[0]["env_steps"])
        for k in keys:
            row[k] = statistics.median(r[k] for r in ok)
        rows.append(row)
    kp = next((r for r in rows if r["framework"] == "kppo"), None)
    for row in rows:
        row["kppo_sps_ratio"] = kp["steps_per_s"] / row["steps_per_s"] if kp and row["steps_per_s"] else None
        row["kppo_total_ratio"] = kp["total_s"] / row["total_s"] if kp and row["total_s"] else None
    columns = [
        ("framework", "label", str),
        ("n", "n"),
        ("env_steps", "env_steps"),
        ("import_s", "import_s"),
        ("setup_s", "setup_s"),
        ("learn_s", "learn_s"),
        ("total_s", "total_s"),
        ("steps/s", "steps_per_s", 0),
        ("peak_rss_mb", "peak_rss_mb", 0),
        ("final_return", "final_return", 1),
    ]
    ratios = [("kppo steps/s / this", "steps_per_s"), ("kppo total_s / this", "total_s")] if kp else []
    return rows, harness.side_by_side(rows, columns, ratios, reference=rows.index(kp) if kp else 0)


def _describe(task_name: str, timesteps: int) -> str:
    t = TASKS[task_name]
    ppo = t["ppo"]
    kind, lr = t["lr"]
    rollouts = -(-timesteps // _rollout(t))
    return (
        f"PPO {t['env_id']} ({task_name}): {t['n_envs']} envs x {ppo['n_steps']} steps, {timesteps:,} steps "
        f"requested ({rollouts} rollouts = {rollouts * _rollout(t):,} steps), {ppo['n_epochs']} epochs, "
        f"batch {ppo['batch_size']}, lr {lr:g}{' linearly annealed' if kind == 'linear' else ''}, "
        f"gamma {ppo['gamma']}, gae_lambda {ppo['gae_lambda']}, clip {ppo['clip_range']}, "
        f"ent_coef {ppo['ent_coef']}"
        + (f", {', '.join(f'{k}={v}' for k, v in t['sde'].items())} (SB3)" if t["sde"] else "")
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated subset of {','.join(TASKS)}")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated subset of kppo,sb3")
    p.add_argument("--repeats", type=int, default=1, help="runs per framework and task; the order alternates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--timesteps-scale",
        type=float,
        default=1.0,
        help="multiply every task's step budget (e.g. 0.1 for a smoke run)",
    )
    p.add_argument("--eval-episodes", type=int, default=10, help="deterministic episodes for final_return")
    p.add_argument(
        "--kppo-sde",
        choices=("auto", "off"),
        default="auto",
        help="pendulum, kppo: 'auto' tries use_sde=True and falls back to use_sde=False + "
        "squash_output=True on NotImplementedError; 'off' runs the fallback directly",
    )
    p.add_argument(
        "--python-peers",
        default=sys.executable,
        help="interpreter for the sb3 worker (default: the one running this script)",
    )
    p.add_argument(
        "--python-kppo",
        default=sys.executable,
        help="interpreter for the kppo worker (default: the one running this script)",
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a worker is killed")
    p.add_argument("--json", default=None, help="write the raw results and the summaries here")
    p.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    p.add_argument("--task", choices=tuple(TASKS), help=argparse.SUPPRESS)
    p.add_argument("--timesteps", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        if not args.task or not args.timesteps:
            p.error("--worker needs --task and --timesteps")
        run_worker(args.worker, args.task, args.timesteps, args.seed, args.eval_episodes, args.kppo_sde)
        return 0

    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    for kind, given, known in (("task", tasks, TASKS), ("framework", frameworks, FRAMEWORKS)):
        unknown = [x for x in given if x not in known]
        if unknown:
            p.error(f"unknown {kind}(s): {', '.join(unknown)} (choose from {', '.join(known)})")
    if args.timesteps_scale <= 0:
        p.error("--timesteps-scale: expected a positive number")
    budgets = {t: max(1, round(TASKS[t]["timesteps"] * args.timesteps_scale)) for t in tasks}
    pythons = {f: args.python_kppo if f == "kppo" else args.python_peers for f in frameworks}

    available, notes = _cp._available(frameworks, pythons, REQUIRED_MODULES)

    results = []
    for rep in range(args.repeats):
        order = available if rep % 2 == 0 else available[::-1]
        for task_name in tasks:
            for f in order:
                res = _launch(f, task_name, pythons[f], budgets[task_name], args)
                res["repeat"] = rep
                results.append(res)
                if "error" in res:
                    msg = f"{task_name}/{f} (repeat {rep}) failed: {res['error']}"
                    notes.append(msg)
                    print(f"[bench] {msg}\n{res.get('stderr_tail', '')}", file=sys.stderr, flush=True)
                else:
                    print(
                        f"[bench] {task_name}/{f}: learn_s={res['learn_s']:.2f} total_s={res['total_s']:.2f} "
                        f"steps/s={res['steps_per_s']:.0f} return={res['final_return']:.1f}",
                        file=sys.stderr,
                        flush=True,
                    )

    summaries = {}
    for task_name in tasks:
        task_results = [r for r in results if r.get("task") == task_name]
        rows, table = summarize(task_results, available, bool(TASKS[task_name]["sde"]))
        summaries[task_name] = rows
        print(
            f"\n{_describe(task_name, budgets[task_name])}; seed {args.seed}, median of {args.repeats} "
            f"repeat(s), one thread per framework\n{harness.machine_header(_cp.worker_versions(task_results))}\n"
        )
        print(table)
        sde_notes = {r["sde_note"] for r in task_results if r.get("sde_note")}
        for n in sorted(sde_notes):
            why = "as asked" if n.startswith("--") else f"as it raised {n}"
            print(f"\nkppo ran with use_sde=False, policy_kwargs=dict(squash_output=True) ({why}).")
    for n in notes:
        print(f"\nNote: {n}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                dict(
                    setting=dict(
                        tasks={t: dict(TASKS[t], timesteps=budgets[t]) for t in tasks},
                        timesteps_scale=args.timesteps_scale,
                        seed=args.seed,
                        repeats=args.repeats,
                        eval_episodes=args.eval_episodes,
                        kppo_sde=args.kppo_sde,
                        cpu_count=os.cpu_count(),
                    ),
                    summary=summaries,
                    runs=results,
                    notes=notes,
                ),
                fh,
                indent=2,
            )
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
