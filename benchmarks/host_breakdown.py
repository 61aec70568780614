#!/usr/bin/env python
"""Where a training iteration on a gymnasium env spends its time: per vector step of the host rollout (env step,
acting, bookkeeping), the one compiled call after the rollout, and the update per gradient step, with the update
compiled as a TensorFlow graph and with XLA.

The host runner is built as `kppo.train` builds it (one CPU thread for TensorFlow); timers are wrapped around
`GymVecEnv.step`, the numpy acting functions of `kppo.rollout.gymnasium` and the post-rollout call, so nothing in kppo
is changed for the measurement. Settings: those of `benchmarks/gym_ppo.py` (CartPole 16 envs x 128, Pendulum with gSDE
4 x 1024) and RL-Zoo's HalfCheetah-v5 PPO setting (1 env x 512 steps, batch 64, 20 epochs, 2x256, normalization).

Usage (from the repository root):
  .venv/bin/python benchmarks/host_breakdown.py                         # all tasks, markdown table
  .venv/bin/python benchmarks/host_breakdown.py --tasks cartpole --iterations 5
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script

TASKS = {
    "cartpole": dict(env="CartPole-v1", num_envs=16, num_steps=128, num_epochs=4, num_minibatches=4),
    "pendulum": dict(
        env="Pendulum-v1",
        num_envs=4,
        num_steps=1024,
        num_epochs=10,
        num_minibatches=64,
        use_sde=True,
        sde_sample_freq=4,
        gamma=0.9,
        learning_rate=1e-3,
    ),
    "halfcheetah": "configs/halfcheetah.yaml",
}
SECONDS, CALLS = collections.Counter(), collections.Counter()


def _timed(name, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[name] += time.perf_counter() - start
            CALLS[name] += 1

    wrapper.timed = True
    return wrapper


def _install_timers() -> None:
    """Timers around the env step, numpy acting, the post-rollout call and the whole rollout (once per process)."""
    import kppo.rollout.gymnasium as host_rollout
    import kppo.training.runners.host as host_runner
    from kppo.gym_envs.vector import GymVecEnv

    if getattr(GymVecEnv.step, "timed", False):
        return
    GymVecEnv.step = _timed("env", GymVecEnv.step)
    for name in ("network_input", "actor_params"):
        setattr(host_rollout, name, _timed("act", getattr(host_rollout, name)))
    collect = host_rollout.collect_host_rollout

    def collect_timed(vec_env, agent, settings, finish_fn, *rest, **kwargs):
        for name in ("sample_np", "to_env_np", "new_noise_np"):
            if not getattr(getattr(agent.dist, name), "timed", False):
                setattr(agent.dist, name, _timed("act", getattr(agent.dist, name)))
        return collect(vec_env, agent, settings, _timed("finish", finish_fn), *rest, **kwargs)

    host_runner.collect_host_rollout = _timed("rollout", collect_timed)


def measure(task: str, jit_update: bool, iterations: int) -> dict:
    import kppo
    import kppo.training.runners.host as host_runner
    from kppo.training.runners.settings import resolve
    from kppo._tf import tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    _install_timers()
    setting = TASKS[task]
    base = kppo.Config.from_yaml(setting) if isinstance(setting, str) else kppo.Config(**setting)
    config = base.replace(total_timesteps=10**8, eval_freq=10**6, jit_update=jit_update)
    runner = host_runner.HostRunner(config.env, resolve(config))
    state = runner.run_iterations(runner.state, 1).state  # compiles
    SECONDS.clear()
    CALLS.clear()
    start = time.perf_counter()
    for _ in range(iterations):
        state = runner.run_iterations(state, 1).state
    iteration = (time.perf_counter() - start) / iterations
    runner.close()
    steps = iterations * config.num_steps
    rollout = SECONDS["rollout"] / iterations
    finish = SECONDS["finish"] / iterations
    loop = rollout - finish
    act = SECONDS["act"] / steps
    env = SECONDS["env"] / steps
    gradient_steps = config.num_epochs * config.num_minibatches
    return dict(
        task=task,
        jit_update=jit_update,
        iteration_ms=iteration * 1e3,
        env_us=env * 1e6,
        act_us=act * 1e6,
        bookkeeping_us=(loop / config.num_steps - env - act) * 1e6,
        step_us=loop / config.num_steps * 1e6,
        finish_ms=finish * 1e3,
        update_ms=(iteration - rollout) * 1e3,
        gradient_step_us=(iteration - rollout) / gradient_steps * 1e6,
        env_steps_per_s=config.num_envs * config.num_steps / iteration,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for task in args.tasks.split(","):
        for jit_update in (False, True):
            rows.append(measure(task, jit_update, args.iterations))
            print(rows[-1], file=sys.stderr, flush=True)
    print(f"one TensorFlow thread, {args.iterations} iterations after one to compile\n{harness.machine_header()}\n")
    header = [
        "task",
        "update",
        "env step µs",
        "acting µs",
        "bookkeeping µs",
        "per vector step µs",
        "post-rollout call ms",
        "update ms",
        "per gradient step µs",
        "env steps/s",
    ]
    cells = [
        [
            r["task"],
            "XLA" if r["jit_update"] else "graph",
            f"{r['env_us']:.0f}",
            f"{r['act_us']:.0f}",
            f"{r['bookkeeping_us']:.0f}",
            f"{r['step_us']:.0f}",
            f"{r['finish_ms']:.1f}",
            f"{r['update_ms']:.0f}",
            f"{r['gradient_step_us']:.0f}",
            f"{r['env_steps_per_s']:,.0f}",
        ]
        for r in rows
    ]
    print(harness.markdown_table(header, cells, align="llrrrrrrrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
