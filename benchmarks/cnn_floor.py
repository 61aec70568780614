#!/usr/bin/env python
"""The floor of the host path's image settings in `benchmarks/cnn_speed.py`: what no PPO on this CPU can go under.

For each setting, in one fresh interpreter per thread setting:
  env      seconds for the setting's timed steps (MinAtar 8,192, Pong 3,072) of the same vector env with random actions
           (`cnn_speed.kppo_env`, what the benchmark's kppo worker trains on): no policy at all;
  network  seconds for the timed learn's gradient steps (MinAtar 128, Pong 48, minibatches of 256) of kppo's own
           actor-critic (the `kppo.PPO("CnnPolicy", ...)` the benchmark trains): forward pass of the shared extractor,
           both heads, the gradient of the sum of their outputs with respect to every weight, in one compiled
           tf.function; no PPO loss, no clipping, no Adam.
  bound    steps / (env + network): the steps/s of a learner whose rollout and update cost nothing but the env and the
           network's arithmetic. Divided by SB3's steps/s from a cnn_speed.py run on the same machine, it is the most
           any kppo could gain over SB3 on this machine in that setting.

Usage (from the repository root):
  .venv/bin/python benchmarks/cnn_floor.py                       # both settings, 1 thread and TensorFlow's default
  .venv/bin/python benchmarks/cnn_floor.py --settings minatar --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script
from cnn_settings import SETTINGS, kppo_env, rollout_steps

MINIBATCH = 256


def _model(setting: str):
    import kppo

    _, env, policy_kwargs = kppo_env(setting, SETTINGS[setting]["n_envs"])  # what cnn_speed.py's kppo worker trains
    return kppo.PPO("CnnPolicy", env, policy_kwargs=policy_kwargs, seed=0, verbose=0, **SETTINGS[setting]["ppo"])


def _env_seconds(model, steps: int) -> float:
    import numpy as np

    from kppo.gym_envs.make import gym_vec_env

    vec_env = gym_vec_env(model.get_env(), seed=0)  # what kppo.PPO steps on the host
    vec_env.reset(seed=0)
    rng = np.random.default_rng(0)
    n_envs, actions = vec_env.num_envs, vec_env.action_space.n
    for _ in range(20):  # warm-up
        vec_env.step(rng.integers(0, actions, n_envs))
    start = time.perf_counter()
    for _ in range(steps // n_envs):
        vec_env.step(rng.integers(0, actions, n_envs))
    return time.perf_counter() - start


def _network_seconds(model, gradient_steps: int) -> float:
    import numpy as np

    from kppo._tf import tf
    from kppo.agent.agent import actor_critic

    agent = model.agent
    space = model.observation_space
    obs = np.random.default_rng(0).integers(0, 2 if space.dtype != np.uint8 else 256, (MINIBATCH, *space.shape))
    obs = tf.constant(obs.reshape(MINIBATCH, -1).astype(space.dtype if space.dtype == np.uint8 else np.float32))

    @tf.function(autograph=False)
    def gradients(x):
        with tf.GradientTape() as tape:
            params, values = actor_critic(agent, x)
            total = tf.reduce_sum(params) + tf.reduce_sum(values)
        return tf.add_n([tf.reduce_sum(g) for g in tape.gradient(total, agent.variables) if g is not None])

    gradients(obs).numpy()  # trace
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(gradient_steps):
            gradients(obs).numpy()
        best = min(best, time.perf_counter() - start)
    return best


def worker(setting: str, threads: int) -> dict:
    from kppo._tf import tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    model = _model(setting)
    ppo, steps = SETTINGS[setting]["ppo"], rollout_steps(SETTINGS[setting]) * SETTINGS[setting]["rollouts"]
    gradient_steps = ppo["n_epochs"] * steps // ppo["batch_size"]
    env_s, network_s = _env_seconds(model, steps), _network_seconds(model, gradient_steps)
    return dict(
        setting=setting,
        threads=threads,
        steps=steps,
        gradient_steps=gradient_steps,
        env_s=env_s,
        network_s=network_s,
        bound_steps_per_s=steps / (env_s + network_s),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="minatar,pong")
    parser.add_argument("--threads", default="1,0", help="TensorFlow intra/inter-op threads per run (0: its default)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, int(args.threads))), flush=True)
        return 0
    rows = []
    for setting in args.settings.split(","):
        for threads in args.threads.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", setting, "--threads", threads]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
            rows.append(json.loads(out))
            print(f"[cnn_floor] {rows[-1]}", file=sys.stderr)
    print(harness.machine_header(None, "ale-py", "minatar"))
    print()
    header = [
        "setting",
        "TF threads",
        "steps",
        "gradient steps",
        "env alone (s)",
        "network alone (s)",
        "bound (steps/s)",
    ]
    cells = [
        [
            SETTINGS[r["setting"]]["label"],
            r["threads"] or "default",
            f"{r['steps']:,}",
            r["gradient_steps"],
            f"{r['env_s']:.2f}",
            f"{r['network_s']:.2f}",
            f"{r['bound_steps_per_s']:,.0f}",
        ]
        for r in rows
    ]
    print(harness.markdown_table(header, cells, align="lrrrrrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
