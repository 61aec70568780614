#!/usr/bin/env python
"""Recurrent policies on tasks without velocities: kppo.RecurrentPPO vs sb3-contrib's RecurrentPPO, and both
frameworks' plain MLP PPO on the same tasks, at RL-Zoo's `ppo_lstm` settings.

Tasks (gymnasium envs with the velocities removed by an observation wrapper, the same for both frameworks):
  cartpole_novel  CartPole-v1 observed as [x, theta] (RL-Zoo's CartPoleNoVel-v1): 8 envs x 32 steps, batch 256,
                  20 epochs, gamma 0.98, GAE 0.8, lr 1e-3 and clip 0.2 annealed linearly, ent_coef 0, observations
                  normalized (VecNormalize(norm_obs=True, norm_reward=False)), ortho_init=False, ReLU, LSTM 64 with a
                  critic LSTM, pi/vf [64]; 100,000 steps.
  pendulum_novel  Pendulum-v1 observed as [cos, sin] (PendulumNoVel-v1): 4 envs x 1024 steps, batch 128, 10 epochs,
                  gamma 0.9, GAE 0.95, lr 1e-3, clip 0.2, gSDE (sample freq 4), the same network and normalization;
                  100,000 steps.
The MLP rows use the same settings without the LSTM (`PPO("MlpPolicy")`). Each (task, framework, seed) runs in its
own interpreter, one CPU thread; after training, 20 deterministic episodes (state carried for recurrent models).

    .venv/bin/python benchmarks/recurrent.py --python-peers .venv-bench/bin/python --tasks cartpole_novel --seeds 0 1 2
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
FRAMEWORKS = ("kppo_lstm", "sb3_contrib_lstm", "kppo_mlp", "sb3_mlp")
TASKS = {
    "cartpole_novel": dict(
        env_id="CartPole-v1",
        keep=[0, 2],
        n_envs=8,
        timesteps=100_000,
        linear=True,
        ppo=dict(n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8, ent_coef=0.0),
    ),
    "pendulum_novel": dict(
        env_id="Pendulum-v1",
        keep=[0, 1],
        n_envs=4,
        timesteps=100_000,
        linear=False,
        ppo=dict(
            n_steps=1024,
            batch_size=128,
            n_epochs=10,
            gamma=0.9,
            gae_lambda=0.95,
            ent_coef=0.0,
            use_sde=True,
            sde_sample_freq=4,
        ),
    ),
}
EVAL_EPISODES = 20


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_kppo_bench_{name}", os.path.join(_HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_env(task: dict):
    """The task's gymnasium env, its observation reduced to the `keep` entries (no velocities)."""
    import gymnasium as gym
    import numpy as np

    env = gym.make(task["env_id"])
    keep = task["keep"]
    space = gym.spaces.Box(env.observation_space.low[keep], env.observation_space.high[keep], dtype=np.float32)
    return gym.wrappers.TransformObservation(env, lambda obs: np.asarray(obs, np.float32)[keep], space)


def _schedules(task: dict) -> dict:
    if task["linear"]:
        return dict(learning_rate=lambda p: 1e-3 * p, clip_range=lambda p: 0.2 * p)
    return dict(learning_rate=1e-3, clip_range=0.2)


def _play(predict, task: dict, seed: int, recurrent: bool) -> list[float]:
    """20 deterministic episodes (seeds 10,000 + seed + i), the state carried for a recurrent model."""
    import numpy as np

    env, returns = make_env(task), []
    for i in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=10_000 + 100 * seed + i)
        state, start, total, done = None, True, 0.0, False
        while not done:
            action, state = predict(obs, state, np.array([start]))
            obs, reward, terminated, truncated, _ = env.step(action)
            total, start, done = total + float(reward), False, terminated or truncated
        returns.append(total)
    return returns


def worker(name: str, task_name: str, seed: int) -> dict:
    task = TASKS[task_name]
    recurrent = name.endswith("lstm")
    policy_kwargs = dict(ortho_init=False, net_arch=dict(pi=[64], vf=[64]))
    if recurrent:
        policy_kwargs.update(lstm_hidden_size=64, enable_critic_lstm=True)
    if name.startswith("kppo"):
        import kppo
        from kppo._tf import tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        policy_kwargs["activation_fn"] = "relu"
        venv = kppo.VecNormalize(
            kppo.make_vec_env(lambda: make_env(task), n_envs=task["n_envs"], seed=seed),
            norm_obs=True,
            norm_reward=False,
            gamma=task["ppo"]["gamma"],
        )
        cls, version = (kppo.RecurrentPPO, kppo.__version__) if recurrent else (kppo.PPO, kppo.__version__)
    else:
        import sb3_contrib
        import stable_baselines3
        import torch
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import VecNormalize

        torch.set_num_threads(1)
        policy_kwargs["activation_fn"] = torch.nn.ReLU
        venv = VecNormalize(
            make_vec_env(lambda: make_env(task), n_envs=task["n_envs"], seed=seed),
            norm_obs=True,
            norm_reward=False,
            gamma=task["ppo"]["gamma"],
        )
        cls = sb3_contrib.RecurrentPPO if recurrent else stable_baselines3.PPO
        version = sb3_contrib.__version__ if recurrent else stable_baselines3.__version__
    model = cls(
        "MlpLstmPolicy" if recurrent else "MlpPolicy",
        venv,
        seed=seed,
        policy_kwargs=policy_kwargs,
        **task["ppo"],
        **_schedules(task),
        **({} if name.startswith("kppo") else {"device": "cpu"}),
    )
    start = time.perf_counter()
    model.learn(task["timesteps"])
    learn_s = time.perf_counter() - start
    if not name.startswith("kppo"):
        venv.training = False

    def predict(obs, state, episode_start):
        if not name.startswith("kppo"):
            obs = venv.normalize_obs(obs)  # SB3: the wrapper normalizes; kppo's model does it itself
        if recurrent:
            return model.predict(obs, state=state, episode_start=episode_start, deterministic=True)
        return model.predict(obs, deterministic=True)[0], None

    returns = _play(predict, task, seed, recurrent)
    return {
        "framework": name,
        "task": task_name,
        "seed": seed,
        "version": version,
        "learn_s": learn_s,
        "steps_per_s": model.num_timesteps / learn_s,
        "mean_return": sum(returns) / len(returns),
        "returns": returns,
    }


def _launch(name: str, task: str, seed: int, python: str) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", name, "--task", task, "--seed", str(seed)]
    env = {**os.environ, "PYTHONPATH": os.path.dirname(_HERE), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.path.dirname(_HERE))
    if out.returncode != 0:
        raise RuntimeError(f"{name} {task} seed {seed} failed: {out.stderr.strip().splitlines()[-3:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    stats = _load("stats")
    header = ["task", "framework", "seeds", "mean return", "95% CI", "per seed", "steps/s", "p vs kppo LSTM"]
    body = []
    for task in dict.fromkeys(r["task"] for r in results):
        ours = [r["mean_return"] for r in results if r["task"] == task and r["framework"] == "kppo_lstm"]
        for name in FRAMEWORKS:
            rows = [r for r in results if r["task"] == task and r["framework"] == name]
            if not rows:
                continue
            finals = [r["mean_return"] for r in rows]
            low, high = stats.bootstrap_mean_ci(finals)
            speed = sorted(r["steps_per_s"] for r in rows)[len(rows) // 2]
            p = "" if name == "kppo_lstm" or not ours else f"{stats.permutation_test(ours, finals).p_value:.3f}"
            body.append(
                [
                    task,
                    f"{name} ({rows[0]['version']})",
                    len(rows),
                    f"{sum(finals) / len(finals):.1f}",
                    f"[{low:.1f}, {high:.1f}]",
                    " / ".join(f"{v:.1f}" for v in finals),
                    f"{speed:,.0f}",
                    p,
                ]
            )
    return harness.markdown_table(header, body)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=FRAMEWORKS)
    parser.add_argument("--task", choices=list(TASKS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--python-kppo", default=sys.executable)
    parser.add_argument("--python-peers", default=sys.executable)
    parser.add_argument("--json", help="write every worker's record here (appended to what is there)")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.task, args.seed)), flush=True)
        return 0
    results = json.load(open(args.json)) if args.json and os.path.exists(args.json) else []
    for task in args.tasks.split(","):
        for seed in args.seeds:
            for name in args.frameworks.split(","):
                python = args.python_kppo if name.startswith("kppo") else args.python_peers
                results.append(_launch(name, task, seed, python))
                print(
                    f"{task} {name} seed {seed}: {results[-1]['mean_return']:.1f} "
                    f"({results[-1]['steps_per_s']:,.0f} steps/s)",
                    file=sys.stderr,
                    flush=True,
                )
                if args.json:
                    with open(args.json, "w") as f:
                        json.dump(results, f, indent=1)
    peers = {"sb3_contrib_lstm": "sb3-contrib", "sb3_mlp": "stable-baselines3"}
    print(harness.machine_header({peers[r["framework"]]: r["version"] for r in results if r["framework"] in peers}))
    print()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
