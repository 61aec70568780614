#!/usr/bin/env python
"""Side-by-side PPO benchmark on CartPole-v1: kppo vs Stable-Baselines3 (torch) vs rejax (JAX).

One fixed setting for every framework:
  CartPole-v1, 16 envs x 128 steps per rollout, 500k steps (rounded down to whole rollouts),
  4 epochs, 4 minibatches (512 samples each), lr 2.5e-4 linearly annealed to 0, gamma 0.99,
  GAE lambda 0.95, clip 0.2, ent_coef 0.01, vf_coef 0.5, max_grad_norm 0.5,
  separate actor/critic 2x64 tanh MLPs, no observation/reward normalization.

Each framework runs in its own fresh interpreter (a worker: this same file with ``--worker NAME``),
so compile time and peak RSS are not polluted by the other frameworks. The driver alternates the
order of the frameworks across repeats, parses the one JSON line each worker prints, and prints a
markdown table (median over repeats, or --stat min|mean) with kppo's ratios against each peer.

Usage (from the repository root; kppo runs under the interpreter that runs this script unless
--python-kppo says otherwise, SB3 and rejax under --python-peers):
  .venv/bin/python benchmarks/cartpole.py --python-peers .venv-bench/bin/python
  .venv/bin/python benchmarks/cartpole.py --frameworks sb3,rejax --python-peers .venv-bench/bin/python --json out.json

Only the standard library is imported here at module level: the driver needs none of the frameworks,
and each worker imports only its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script
from harness import package_versions

# --------------------------------------------------------------------------------------------------
# The fixed setting.
# --------------------------------------------------------------------------------------------------
ENV_ID = "CartPole-v1"
NUM_ENVS = 16
NUM_STEPS = 128
ROLLOUT = NUM_ENVS * NUM_STEPS  # 2048
NUM_EPOCHS = 4
NUM_MINIBATCHES = 4
BATCH_SIZE = ROLLOUT // NUM_MINIBATCHES  # 512
LEARNING_RATE = 2.5e-4
GAMMA = 0.99
GAE_LAMBDA = 0.95
CLIP = 0.2
ENT_COEF = 0.01
VF_COEF = 0.5
MAX_GRAD_NORM = 0.5
HIDDEN = (64, 64)

FRAMEWORKS = ("kppo", "sb3", "rejax")
# Modules a framework's interpreter must be able to find for its worker to be worth starting.
REQUIRED_MODULES = {
    "kppo": ("kppo", "tensorflow", "keras"),
    "sb3": ("torch", "stable_baselines3", "gymnasium"),
    "rejax": ("jax", "rejax", "gymnax"),
}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss_mb() -> float:
    # Linux reports ru_maxrss in KiB, macOS in bytes.
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


# --------------------------------------------------------------------------------------------------
# Workers. Each returns a dict; `run_worker` adds the common fields and prints it as one JSON line.
# Timing conventions (all wall clock, perf_counter):
#   import_s : importing the framework (torch/SB3, jax/rejax, kppo/TensorFlow).
#   compile_s: ahead-of-time compilation/tracing (0 for SB3, which runs eagerly).
#   run_s    : the training loop proper, after compilation.
#   total_s  : everything after the imports up to the end of training: env + model construction,
#              compilation and the training loop. The benchmark's own final evaluation is excluded
#              (kppo's in-training evaluation round is part of its train() call and so included).
# --------------------------------------------------------------------------------------------------


def worker_sb3(timesteps: int, seed: int, eval_episodes: int) -> dict:
    t0 = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common import utils as sb3_utils
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    t1 = time.perf_counter()

    if hasattr(sb3_utils, "LinearSchedule"):  # SB3 >= 2.6
        lr = sb3_utils.LinearSchedule(LEARNING_RATE, 0.0, 1.0)
    else:
        lr = sb3_utils.get_linear_fn(LEARNING_RATE, 0.0, 1.0)
    env = make_vec_env(ENV_ID, n_envs=NUM_ENVS, seed=seed, vec_env_cls=DummyVecEnv)
    model = PPO(
        "MlpPolicy",
        env,
        learning_rate=lr,
        n_steps=NUM_STEPS,
        batch_size=BATCH_SIZE,
        n_epochs=NUM_EPOCHS,
        gamma=GAMMA,
        gae_lambda=GAE_LAMBDA,
        clip_range=CLIP,
        ent_coef=ENT_COEF,
        vf_coef=VF_COEF,
        max_grad_norm=MAX_GRAD_NORM,
        policy_kwargs=dict(net_arch=dict(pi=list(HIDDEN), vf=list(HIDDEN)), activation_fn=torch.nn.Tanh),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    t2 = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    t3 = time.perf_counter()

    eval_env = Monitor(gym.make(ENV_ID))
    eval_env.reset(seed=seed + 10_000)
    returns, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=eval_episodes, deterministic=True, return_episode_rewards=True
    )
    return dict(
        import_s=t1 - t0,
        setup_s=t2 - t1,
        compile_s=0.0,
        run_s=t3 - t2,
        total_s=t3 - t1,
        env_steps=int(model.num_timesteps),
        final_return=float(sum(returns) / len(returns)),
        eval_episodes=len(returns),
        eval_on="gymnasium CartPole-v1 (SB3 evaluate_policy, deterministic)",
        threads=torch.get_num_threads(),
        versions=package_versions("torch", "stable-baselines3", "gymnasium", "numpy"),
    )


def make_rejax_algo(timesteps: int):
    """rejax's PPO at the fixed setting, without evaluation inside the run (also used by benchmarks/population.py)."""
    import jax.numpy as jnp
    import rejax

    num_iterations = -(-timesteps // ROLLOUT)  # rejax runs ceil(eval_freq / rollout) iterations
    updates_per_iteration = NUM_EPOCHS * NUM_MINIBATCHES

    def lr_schedule(count):
        # Same per-iteration linear annealing as CleanRL/kppo: the optimizer steps
        # `updates_per_iteration` times per iteration; anneal once per iteration to 0.
        frac = 1.0 - (count // updates_per_iteration) / num_iterations
        return LEARNING_RATE * frac

    algo = rejax.PPO.create(
        env=ENV_ID,
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        num_epochs=NUM_EPOCHS,
        num_minibatches=NUM_MINIBATCHES,
        learning_rate=lr_schedule,  # handed to optax.adam, which accepts a schedule
        max_grad_norm=MAX_GRAD_NORM,
        gamma=GAMMA,
        gae_lambda=GAE_LAMBDA,
        clip_eps=CLIP,
        ent_coef=ENT_COEF,
        vf_coef=VF_COEF,
        total_timesteps=timesteps,
        eval_freq=timesteps,  # one "evaluation round" = the whole run
        skip_initial_evaluation=True,
        normalize_observations=False,
        normalize_rewards=False,
        agent_kwargs=dict(activation="tanh", hidden_layer_sizes=HIDDEN),
    )
    # No evaluation inside the timed run (SB3's learn() does none either); the final policy is
    # evaluated below, outside the timings.
    algo = algo.replace(eval_callback=lambda algo, ts, rng: jnp.zeros(()))
    return algo


def worker_rejax(timesteps: int, seed: int, eval_episodes: int) -> dict:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    t0 = time.perf_counter()
    import jax
    import rejax  # noqa: F401  (imported here so import_s counts it)

    t1 = time.perf_counter()

    algo = make_rejax_algo(timesteps)
    key = jax.random.PRNGKey(seed)
    train = jax.jit(algo.train).lower(key).compile()
    t2 = time.perf_counter()
    ts, _ = train(key)
    jax.block_until_ready(ts)
    t3 = time.perf_counter()

    final_return, eval_on = _rejax_eval(algo, ts, seed, eval_episodes)
    return dict(
        import_s=t1 - t0,
        compile_s=t2 - t1,  # env/agent construction (negligible) + lower + XLA compile
        run_s=t3 - t2,
        total_s=t3 - t1,
        env_steps=int(ts.global_step),
        final_return=final_return,
        eval_episodes=eval_episodes,
        eval_on=eval_on,
        jax_backend=jax.default_backend(),
        versions=package_versions("jax", "jaxlib", "rejax", "gymnax", "flax", "optax", "distrax", "numpy"),
    )


def _rejax_eval(algo, ts, seed: int, episodes: int):
    """Deterministic (argmax) evaluation of rejax's final actor, on gymnasium CartPole-v1 when
    gymnasium is installed (the same env SB3 is scored on), else on rejax's gymnax CartPole."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    params = ts.actor_ts.params

    def logits_fn(module, obs):
        return module.action_logits(module.features(obs))

    @jax.jit
    def greedy(obs):
        return jnp.argmax(algo.actor.apply(params, obs, method=logits_fn), axis=-1)

    try:
        import gymnasium as gym
    except ImportError:
        gym = None
    if gym is not None:
        env = gym.make(ENV_ID)
        returns = []
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + 10_000 + i)
            done, ret = False, 0.0
            while not done:
                action = int(greedy(np.asarray(obs, dtype=np.float32)[None])[0])
                obs, reward, terminated, truncated, _ = env.step(action)
                ret += float(reward)
                done = terminated or truncated
            returns.append(ret)
        return float(np.mean(returns)), "gymnasium CartPole-v1 (argmax actor)"

    from rejax.evaluate import evaluate

    def act(obs, rng):
        return greedy(obs[None])[0]

    _, rets = evaluate(act, jax.random.PRNGKey(seed + 10_000), algo.env, algo.env_params, episodes)
    return float(np.mean(rets)), "gymnax CartPole-v1 (argmax actor, rejax.evaluate)"


def worker_kppo(timesteps: int, seed: int, eval_episodes: int) -> dict:
    t0 = time.perf_counter()
    import kppo

    kppo.train  # noqa: B018  (kppo loads its names lazily: import_s counts TensorFlow and the training modules)

    t1 = time.perf_counter()
    cfg = kppo.Config(
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        total_timesteps=timesteps,
        num_epochs=NUM_EPOCHS,
        num_minibatches=NUM_MINIBATCHES,
        learning_rate=LEARNING_RATE,
        lr_schedule="linear",
        gamma=GAMMA,
        gae_lambda=GAE_LAMBDA,
        clip_range=CLIP,
        clip_range_vf=CLIP,  # rex's CLIP_EPS clips the value too (rejax does the same)
        ent_coef=ENT_COEF,
        vf_coef=VF_COEF,
        max_grad_norm=MAX_GRAD_NORM,
        num_hidden_layers=len(HIDDEN),
        num_hidden_units=HIDDEN[0],
        activation="tanh",
        eval_freq=1,  # one evaluation round, at the end of the run
        num_eval_envs=max(16, eval_episodes),
    )
    result = kppo.train(ENV_ID, cfg, seed=seed)
    t2 = time.perf_counter()
    timings = dict(result.timings)
    rollout = getattr(cfg, "rollout_size", ROLLOUT)
    num_iterations = getattr(cfg, "num_iterations", timesteps // ROLLOUT)
    # kppo books its first compiled call(s) -- tracing + XLA compile + the first `iterations_per_call`
    # training iterations, and the first evaluation round -- as compile_s; run_s covers the rest.
    first_call_iterations = min(getattr(cfg, "iterations_per_call", 0), num_iterations)
    return dict(
        import_s=t1 - t0,
        compile_s=float(timings["compile_s"]),
        run_s=float(timings["run_s"]),
        total_s=t2 - t1,  # measured around Config + train(), like the peers
        kppo_total_s=float(timings["total_s"]),  # kppo's own end-to-end figure
        env_steps=int(num_iterations * rollout),
        run_steps=int((num_iterations - first_call_iterations) * rollout),
        final_return=float(result.metrics["eval/mean_returns"][-1]),
        eval_episodes=cfg.num_eval_envs,
        eval_on="kppo's own deterministic evaluation (result.metrics['eval/mean_returns'][-1])",
        versions=package_versions("kppo", "tensorflow", "keras", "tensorflow-probability", "numpy"),
    )


WORKERS = {"kppo": worker_kppo, "sb3": worker_sb3, "rejax": worker_rejax}


def run_worker(name: str, timesteps: int, seed: int, eval_episodes: int) -> None:
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out = WORKERS[name](timesteps, seed, eval_episodes)
    out = dict(framework=name, timesteps=timesteps, seed=seed, **out)
    # Other work on the machine skews the timings; the 1-minute load average tells when it did.
    out["loadavg_1m_before"] = load_before
    out["loadavg_1m_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    # Steps collected inside run_s (all of them, except for kppo, whose first call counts as compile).
    out.setdefault("run_steps", out["env_steps"])
    out["steps_per_s"] = out["run_steps"] / out["run_s"] if out["run_s"] > 0 else float("nan")
    out["peak_rss_mb"] = _rss_mb()
    out["python"] = sys.executable
    sys.stdout.flush()
    print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------------------------------
# Driver.
# --------------------------------------------------------------------------------------------------


def _has_modules(python: str, modules, cwd: str, env: dict) -> tuple[bool, str]:
    code = (
        "import importlib.util, sys\n"
        f"missing = [m for m in {list(modules)!r} if importlib.util.find_spec(m) is None]\n"
        "print(','.join(missing))\n"
    )
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"cannot run {python}: {exc}"
    if proc.returncode != 0:
        return False, f"{python} failed: {proc.stderr.strip()[-300:]}"
    missing = proc.stdout.strip()
    return (not missing), (f"{python} lacks {missing}" if missing else "")


def _available(frameworks: list[str], pythons: dict[str, str], required: dict) -> tuple[list[str], list[str]]:
    """(frameworks whose interpreter has their modules, notes naming the skipped ones and why)."""
    available, notes = [], []
    for f in frameworks:
        ok, why = _has_modules(pythons[f], required[f], REPO_ROOT, _worker_env(f))
        if ok:
            available.append(f)
        else:
            notes.append(f"skipped {f}: {why}")
            print(f"[bench] skipping {f}: {why}", file=sys.stderr, flush=True)
    return available, notes


def _worker_env(name: str) -> dict:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if name == "kppo":
        # Let `import kppo` find the package from the repository root even when it is not installed.
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _launch(name: str, python: str, args) -> dict:
    cmd = [
        python,
        os.path.abspath(__file__),
        "--worker",
        name,
        "--timesteps",
        str(args.timesteps),
        "--seed",
        str(args.seed),
        "--eval-episodes",
        str(args.eval_episodes),
    ]
    print(f"[bench] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=_worker_env(name), timeout=args.timeout
        )
    except subprocess.TimeoutExpired:
        return dict(framework=name, error=f"timed out after {args.timeout}s")
    wall = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except json.JSONDecodeError:
                continue
            if res.get("framework") == name:
                res["process_wall_s"] = wall  # includes interpreter start, imports and evaluation
                return res
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    return dict(framework=name, error=f"exit {proc.returncode}", stderr_tail="\n".join(tail))


def worker_versions(results: list[dict]) -> dict[str, str]:
    """The package versions the workers reported (the peers run in their own interpreter)."""
    return {name: version for r in results for name, version in r.get("versions", {}).items()}


def summarize(results: list, frameworks: list, stat: str = "median") -> tuple[list, str]:
    pick = {"median": statistics.median, "min": min, "mean": statistics.mean}[stat]
    keys = ("import_s", "compile_s", "run_s", "total_s", "steps_per_s", "peak_rss_mb", "final_return")
    rows = []
    for name in frameworks:
        ok = [r for r in results if r.get("framework") == name and "error" not in r]
        if not ok:
            continue
        row = dict(framework=name, n=len(ok), env_steps=ok[0]["env_steps"])
        for k in keys:
            values = [r[k] for r in ok]
            # "min" means best: the lowest time/memory, the highest throughput and return.
            row[k] = max(values) if stat == "min" and k in ("steps_per_s", "final_return") else pick(values)
        rows.append(row)
    kp = next((r for r in rows if r["framework"] == "kppo"), None)
    for row in rows:
        if kp is None:
            row["kppo_total_ratio"] = row["kppo_sps_ratio"] = None
        else:
            row["kppo_total_ratio"] = kp["total_s"] / row["total_s"]
            # a budget that fits in the first (compiled) call leaves no timed steps: no throughput to compare
            row["kppo_sps_ratio"] = kp["steps_per_s"] / row["steps_per_s"] if row["steps_per_s"] else None

    columns = [
        ("framework", "framework", str),
        ("n", "n"),
        ("env_steps", "env_steps"),
        ("import_s", "import_s"),
        ("compile_s", "compile_s"),
        ("run_s", "run_s"),
        ("total_s", "total_s"),
        ("steps/s", "steps_per_s", 0),
        ("peak_rss_mb", "peak_rss_mb", 0),
        ("final_return", "final_return", 1),
    ]
    ratios = [("kppo total_s / this", "total_s"), ("kppo steps/s / this", "steps_per_s")] if kp else []
    return rows, harness.side_by_side(rows, columns, ratios, reference=rows.index(kp) if kp else 0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated subset of kppo,sb3,rejax")
    p.add_argument("--repeats", type=int, default=1, help="runs per framework; the order alternates per repeat")
    p.add_argument(
        "--timesteps", type=int, default=500_000, help=f"environment steps; rounded down to whole rollouts of {ROLLOUT}"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-episodes", type=int, default=10, help="deterministic episodes for final_return")
    p.add_argument(
        "--python-peers",
        default=sys.executable,
        help="interpreter for the sb3 and rejax workers (default: the one running this script)",
    )
    p.add_argument(
        "--python-kppo",
        default=sys.executable,
        help="interpreter for the kppo worker (default: the one running this script)",
    )
    p.add_argument(
        "--stat",
        choices=("median", "min", "mean"),
        default="median",
        help="how repeats are combined in the table; 'min' takes each column's best value",
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before a worker is killed")
    p.add_argument("--json", default=None, help="write the raw results and the summary here")
    p.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        run_worker(args.worker, args.timesteps, args.seed, args.eval_episodes)
        return 0

    requested = args.timesteps
    args.timesteps = max(ROLLOUT, (args.timesteps // ROLLOUT) * ROLLOUT)
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    unknown = [f for f in frameworks if f not in FRAMEWORKS]
    if unknown:
        p.error(f"unknown framework(s): {', '.join(unknown)} (choose from {', '.join(FRAMEWORKS)})")
    pythons = {f: args.python_kppo if f == "kppo" else args.python_peers for f in frameworks}

    available, notes = _available(frameworks, pythons, REQUIRED_MODULES)

    results = []
    for rep in range(args.repeats):
        order = available if rep % 2 == 0 else available[::-1]
        for f in order:
            res = _launch(f, pythons[f], args)
            res["repeat"] = rep
            results.append(res)
            if "error" in res:
                msg = f"{f} (repeat {rep}) failed: {res['error']}"
                notes.append(msg)
                print(f"[bench] {msg}\n{res.get('stderr_tail', '')}", file=sys.stderr, flush=True)
            else:
                print(
                    f"[bench] {f}: run_s={res['run_s']:.2f} total_s={res['total_s']:.2f} "
                    f"return={res['final_return']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )

    rows, table = summarize(results, available, args.stat)
    print(
        f"\nPPO {ENV_ID}: {NUM_ENVS} envs x {NUM_STEPS} steps, {args.timesteps:,} steps "
        f"({args.timesteps // ROLLOUT} rollouts; requested {requested:,}), {NUM_EPOCHS} epochs x "
        f"{NUM_MINIBATCHES} minibatches of {BATCH_SIZE}, seed {args.seed}, {args.stat} of {args.repeats} repeat(s)\n"
        f"{harness.machine_header(worker_versions(results))}\n"
    )
    print(table)
    for n in notes:
        print(f"\nNote: {n}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                dict(
                    setting=dict(
                        env=ENV_ID,
                        num_envs=NUM_ENVS,
                        num_steps=NUM_STEPS,
                        timesteps=args.timesteps,
                        requested_timesteps=requested,
                        num_epochs=NUM_EPOCHS,
                        num_minibatches=NUM_MINIBATCHES,
                        batch_size=BATCH_SIZE,
                        learning_rate=LEARNING_RATE,
                        seed=args.seed,
                        repeats=args.repeats,
                        cpu_count=os.cpu_count(),
                        stat=args.stat,
                    ),
                    summary=rows,
                    runs=results,
                    notes=notes,
                ),
                fh,
                indent=2,
            )
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
