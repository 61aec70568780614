#!/usr/bin/env python
"""Image policies, training throughput side by side: kppo vs Stable-Baselines3 (torch), one run, one page of tables.

Settings (host path: gymnasium envs stepped in Python, DummyVecEnv / SyncVectorEnv on both sides):
  minatar  MinAtar Breakout ("MinAtar/Breakout-v1", the minatar package's gymnasium env, its bool observations cast
           to float32 Box(0, 1) by the same small ObservationWrapper on both sides), 8 envs (`make_vec_env`),
           PPO("CnnPolicy", n_steps=128, batch_size=256, n_epochs=4, policy_kwargs=dict(net_arch=[],
           normalize_images=False)); kppo picks its SmallCNN (Conv2D(16, 3x3, stride 1, ReLU, valid) -> flatten ->
           Dense(128, ReLU)) for the 10x10 grid, SB3 gets the same network as a torch `features_extractor_class`
           (`TorchSmallCNN` below, features_dim=128). Measured: 8 rollouts (8,192 steps).
  pong     RL-Zoo's PPO Atari setting on PongNoFrameskip-v4: make_atari_env(n_envs=8, seed=0) + VecFrameStack(4)
           (each framework's own), PPO("CnnPolicy", n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4,
           clip_range=0.1, vf_coef=0.5, ent_coef=0.01): NatureCNN on both sides. Measured: 3 rollouts (3,072 steps).
  pong_ale the same PPO with kppo stepping ale-py's threaded C++ `AtariVectorEnv("pong", 8, life_loss_info=True,
           stack_num=4)` through `kppo.vec_envs.ale_vector.AtariVectorEnvAdapter` (channels-first stacks), SB3 its
           make_atari_env + VecFrameStack as in `pong` (SB3 has no AtariVectorEnv path): each framework's fastest
           host path for Atari, not the same preprocessing code (the adapter's docstring says what differs).

Throughput = env steps / wall seconds of `model.learn(N, reset_num_timesteps=False)` after a warm-up
`model.learn(<one rollout>)` that pays compilation and the first rollout. Each framework keeps its default thread
settings (TensorFlow's and torch's own pools). The same run splits the measured learn into phases, by light
instrumentation that does not change what runs: rollout (kppo: `collect_host_rollout`, its per-step acting CNN call
`frozen_extractor` and its closing compiled `finish_rollout` apart; SB3: `on_rollout_start` -> `on_rollout_end`, its
`policy.forward` apart), env stepping (the vector env's `step`, both sides) and update (the rest of `learn`).
A sensitivity pass (`--one-thread-repeats`, default 1) runs both settings again with one thread per framework
(TensorFlow's intra/inter-op pools of 1, `torch.set_num_threads(1)`): on a busy machine torch's default OpenMP pool
can lose most of its time waiting for threads the scheduler gave to other processes.

Also, kppo only:
  memory   peak RSS (`resource.getrusage` ru_maxrss) of a fresh interpreter that builds the Pong setting with 8 and 64
           envs and runs `learn` of one rollout; with the update kept out of XLA (`--memory-graph-update`, default:
           from 64 gradient steps an update, n_envs >= 32 here, kppo XLA-compiles the host update, and XLA:CPU runs
           NatureCNN's filter gradients ~100x slower: `--worker kppo --setting pong --memory-only
           --update-xla-min-steps 0` shows it at 8 envs);
  acting   microseconds per vector step of the acting CNN: kppo's compiled `frozen_extractor` call against a numpy
           im2col implementation of the same tower (`kppo.agent.numpy_conv.numpy_tower`, what the host rollout acts
           with at small batches), SmallCNN on MinAtar's 10x10x4 and NatureCNN on Pong's 84x84x4 uint8 stacks, 1, 8
           and 64 envs (plus a 1,024-row batch), in one
           worker with OpenBLAS's default threads and one with OPENBLAS_NUM_THREADS=1.

Each measurement runs in its own fresh interpreter (this file with `--worker NAME --setting SETTING`) that prints
one JSON line; the driver alternates the frameworks' order across repeats and prints markdown tables (medians) with
the date, CPU model and load average.

Usage (from the repository root; SB3 in a separate venv, torch's CPU wheel):
  /tmp/sb3venv/bin/pip install minatar==1.0.15 ale-py==0.12.1 opencv-python-headless==5.0.0.93 psutil
  .venv/bin/python benchmarks/cnn_speed.py --python-sb3 /tmp/sb3venv/bin/python
  .venv/bin/python benchmarks/cnn_speed.py --settings minatar --repeats 1 --scale 0.25 --skip memory,acting  # smoke

Results: docs/benchmarks/images.md.

Only the standard library is imported at module level: the driver needs neither framework.
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
from typing import Any
from machine import cpu_model, package_versions

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINATAR_ID = "MinAtar/Breakout-v1"
PONG_ID = "PongNoFrameskip-v4"
N_STEPS = 128
SETTINGS = {
    "minatar": dict(
        env_id=MINATAR_ID,
        n_envs=8,
        rollouts=8,
        ppo=dict(n_steps=N_STEPS, batch_size=256, n_epochs=4),
        label="MinAtar Breakout, 8 envs, SmallCNN",
    ),
    "pong": dict(
        env_id=PONG_ID,
        n_envs=8,
        rollouts=3,
        ppo=dict(
            n_steps=N_STEPS,
            n_epochs=4,
            batch_size=256,
            learning_rate=2.5e-4,
            clip_range=0.1,
            vf_coef=0.5,
            ent_coef=0.01,
        ),
        label="Pong (RL-Zoo Atari PPO), 8 envs x 4 frames, NatureCNN",
    ),
}
# The same PPO on Pong, kppo stepping ale-py's threaded C++ AtariVectorEnv (kppo's fast host path for Atari), SB3 its
# own make_atari_env + VecFrameStack (SB3 has no AtariVectorEnv path): not the same preprocessing code (see
# `kppo.vec_envs.ale_vector.AtariVectorEnvAdapter` for what differs from SB3's AtariWrapper).
SETTINGS["pong_ale"] = dict(
    SETTINGS["pong"], label="Pong (RL-Zoo Atari PPO), 8 envs x 4 frames, NatureCNN; kppo on ale-py's AtariVectorEnv"
)
FRAMEWORKS = ("kppo", "sb3")
ACTING_ENVS = (1, 8, 64)


# --------------------------------------------------------------------------------------------------
# Pure helpers (no framework needed).
# --------------------------------------------------------------------------------------------------


def load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MiB (Linux reports ru_maxrss in KiB, macOS in bytes)."""
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def rollout_steps(setting: dict) -> int:
    return setting["n_envs"] * setting["ppo"]["n_steps"]


def rollout_bytes(n_envs: int, n_steps: int, obs_shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of one rollout's observations: n_steps x n_envs images of `obs_shape`, `itemsize` bytes a value."""
    size = 1
    for d in obs_shape:
        size *= d
    return n_envs * n_steps * size * itemsize


def median_of(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else ""


def fmt(value: float | None, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


# --------------------------------------------------------------------------------------------------
# Workers.
# --------------------------------------------------------------------------------------------------


def float_obs_wrapper():
    """The ObservationWrapper both sides put on MinAtar: bool grids -> float32 Box(0, 1) (same shape)."""
    import gymnasium as gym
    import numpy as np

    class FloatObservation(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, np.float32)

        def observation(self, observation):
            return np.asarray(observation, np.float32)

    return FloatObservation


def register_minatar() -> str:
    import gymnasium as gym
    from minatar.gym import register_envs

    register_envs()
    return str(gym.spec(MINATAR_ID).entry_point) + f", observation dtype {_minatar_dtype()}"


def _minatar_dtype() -> str:
    import gymnasium as gym

    env = gym.make(MINATAR_ID)
    dtype = str(env.observation_space.dtype)
    env.close()
    return dtype


class Timer:
    """Accumulated seconds and calls of wrapped callables."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
                self.calls[name] = self.calls.get(name, 0) + 1

        return timed

    def reset(self):
        self.seconds.clear()
        self.calls.clear()


def measure_learn(model, setting: dict, timer: Timer, rollouts: int) -> dict:
    """Warm-up learn of one rollout, then the timed learn of `rollouts` rollouts; phases from `timer`."""
    t0 = time.perf_counter()
    model.learn(rollout_steps(setting))
    t1 = time.perf_counter()
    timer.reset()
    before = int(model.num_timesteps)
    model.learn(rollouts * rollout_steps(setting), reset_num_timesteps=False)
    learn_s = time.perf_counter() - t1
    steps = int(model.num_timesteps) - before
    return dict(
        warmup_s=t1 - t0,
        learn_s=learn_s,
        env_steps=steps,
        steps_per_s=steps / learn_s,
        phases=dict(timer.seconds),
        phase_calls=dict(timer.calls),
        peak_rss_mb=peak_rss_mb(),
    )


def kppo_env(setting_name: str, n_envs: int) -> tuple[str, Any, dict | None]:
    """(where the env comes from, the kppo vector env of `setting_name`, the CnnPolicy's policy_kwargs)."""
    import kppo

    if setting_name == "minatar":
        source = register_minatar()
        env = kppo.make_vec_env(MINATAR_ID, n_envs=n_envs, seed=0, wrapper_class=float_obs_wrapper())
        return source, env, dict(net_arch=[], normalize_images=False)
    if setting_name == "pong_ale":
        from ale_py.vector_env import AtariVectorEnv
        from gymnasium.vector import AutoresetMode

        from kppo.vec_envs.ale_vector import AtariVectorEnvAdapter

        ale = AtariVectorEnv("pong", n_envs, autoreset_mode=AutoresetMode.SAME_STEP, life_loss_info=True, stack_num=4)
        source = "ale_py AtariVectorEnv('pong', life_loss_info=True, stack_num=4) + kppo's AtariVectorEnvAdapter"
        return source, kppo.VecEnv(AtariVectorEnvAdapter(ale)), None
    env = kppo.VecFrameStack(kppo.make_atari_env(PONG_ID, n_envs=n_envs, seed=0), n_stack=4)
    return "kppo.make_atari_env + kppo.VecFrameStack", env, None


def worker_kppo(setting_name: str, args) -> dict:
    t0 = time.perf_counter()
    import kppo
    import kppo.agent.numpy_actor as numpy_actor
    import kppo.training.runners.base as runner_base
    import kppo.training.runners.host as host
    from kppo._tf import tf

    setting = SETTINGS[setting_name]
    timer = Timer()
    # Instrumentation: the host rollout, its vector env's step, its acting CNN calls and its closing compiled call.
    collect, choose = host.collect_host_rollout, numpy_actor.acting_extractor

    def timed_collect(vec_env, agent, settings, finish_fn, *rest):
        if not getattr(vec_env, "_bench_timed", False):
            vec_env.step = timer.wrap("env_step", vec_env.step)
            vec_env._bench_timed = True
        return timer.wrap("rollout", collect)(vec_env, agent, settings, timer.wrap("finish", finish_fn), *rest)

    host.collect_host_rollout = timed_collect

    def timed_extractor(layer, compiled):  # the acting CNN, numpy or compiled (`kppo.agent.numpy_conv`)
        forward, in_numpy = choose(layer, compiled)
        return timer.wrap("acting_cnn", forward), in_numpy

    numpy_actor.acting_extractor = timed_extractor
    if args.update_xla_min_steps is not None:  # kppo's rule: XLA for the host update from 64 gradient steps
        runner_base.XLA_UPDATE_MIN_GRADIENT_STEPS = args.update_xla_min_steps
    if args.threads:  # before TensorFlow runs its first op
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    t1 = time.perf_counter()
    n_envs = args.n_envs or setting["n_envs"]
    source, env, policy_kwargs = kppo_env(setting_name, n_envs)
    model = kppo.PPO("CnnPolicy", env, policy_kwargs=policy_kwargs, seed=0, verbose=0, **setting["ppo"])
    t2 = time.perf_counter()
    rss_built = peak_rss_mb()
    if args.memory_only:
        model.learn(n_envs * setting["ppo"]["n_steps"])
        out = dict(learn_s=time.perf_counter() - t2, peak_rss_mb=peak_rss_mb(), phases=dict(timer.seconds))
    else:
        out = measure_learn(model, setting, timer, args.rollouts or setting["rollouts"])
    extractor = model.agent.actor.extractor
    out.update(
        import_s=t1 - t0,
        setup_s=t2 - t1,
        rss_after_setup_mb=rss_built,
        n_envs=n_envs,
        env_source=source,
        extractor=type(getattr(extractor, "extractor", extractor)).__name__,
        extractor_parameters=int(sum(v.numpy().size for v in extractor.variables)),
        observation_space=str(model.observation_space),
        gradient_steps=int(
            setting["ppo"]["n_epochs"] * n_envs * setting["ppo"]["n_steps"] // setting["ppo"]["batch_size"]
        ),
        update_xla=bool(runner_base.jit_update(model.config, True)),
        threads=dict(
            intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
        ),
        versions=package_versions("kppo", "tensorflow", "keras", "gymnasium", "numpy", "ale-py", "minatar"),
    )
    return out


def torch_small_cnn():
    """kppo's SmallCNN as a torch `features_extractor_class`: Conv2d(C, 16, 3, stride 1) + ReLU -> flatten ->
    Linear(features_dim) + ReLU, reading HWC images (smallest dimension last) transposed to CHW, as kppo does."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    class TorchSmallCNN(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim: int = 128):
            super().__init__(observation_space, features_dim)
            shape = tuple(observation_space.shape)
            self.channels_last = shape[-1] < shape[0]
            chw = (shape[2], shape[0], shape[1]) if self.channels_last else shape
            self.cnn = torch.nn.Sequential(
                torch.nn.Conv2d(chw[0], 16, kernel_size=3, stride=1), torch.nn.ReLU(), torch.nn.Flatten()
            )
            with torch.no_grad():
                flat = self.cnn(torch.zeros(1, *chw)).shape[1]
            self.linear = torch.nn.Sequential(torch.nn.Linear(flat, features_dim), torch.nn.ReLU())

        def forward(self, observations):
            x = observations.permute(0, 3, 1, 2) if self.channels_last else observations
            return self.linear(self.cnn(x))

    return TorchSmallCNN


def worker_sb3(setting_name: str, args) -> dict:
    t0 = time.perf_counter()
    import gymnasium as gym
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    setting = SETTINGS[setting_name]
    timer = Timer()

    class Phases(BaseCallback):
        def _on_rollout_start(self):
            self.start = time.perf_counter()

        def _on_rollout_end(self):
            timer.seconds["rollout"] = timer.seconds.get("rollout", 0.0) + time.perf_counter() - self.start
            timer.calls["rollout"] = timer.calls.get("rollout", 0) + 1

        def _on_step(self):
            return True

    t1 = time.perf_counter()
    n_envs = args.n_envs or setting["n_envs"]
    if setting_name == "minatar":
        source = register_minatar()
        env = make_vec_env(
            MINATAR_ID, n_envs=n_envs, seed=0, wrapper_class=float_obs_wrapper(), vec_env_cls=DummyVecEnv
        )
        policy_kwargs = dict(
            net_arch=[],
            normalize_images=False,
            features_extractor_class=torch_small_cnn(),
            features_extractor_kwargs=dict(features_dim=128),
        )
    else:
        import ale_py

        gym.register_envs(ale_py)
        source = "SB3 make_atari_env + VecFrameStack"
        env = VecFrameStack(make_atari_env(PONG_ID, n_envs=n_envs, seed=0), n_stack=4)
        policy_kwargs = None
    model = PPO("CnnPolicy", env, policy_kwargs=policy_kwargs, seed=0, device="cpu", verbose=0, **setting["ppo"])
    t2 = time.perf_counter()
    model.env.step = timer.wrap("env_step", model.env.step)
    model.policy.forward = timer.wrap("acting_policy", model.policy.forward)
    learn = model.learn
    model.learn = lambda n, **kw: learn(n, callback=Phases(), **kw)
    out = measure_learn(model, setting, timer, args.rollouts or setting["rollouts"])
    out.update(
        import_s=t1 - t0,
        setup_s=t2 - t1,
        n_envs=n_envs,
        env_source=source,
        extractor=type(model.policy.features_extractor).__name__,
        extractor_parameters=sum(p.numel() for p in model.policy.features_extractor.parameters()),
        observation_space=str(model.observation_space),
        threads=dict(intra_op=torch.get_num_threads(), inter_op=torch.get_num_interop_threads()),
        versions=package_versions("stable-baselines3", "torch", "gymnasium", "numpy", "ale-py", "minatar"),
    )
    return out


def per_call_us(fn, calls: int, repeats: int, block_s: float | None = None) -> float:
    """Median over `repeats` blocks of the mean microseconds of `fn()` over `calls` calls (after min(10, calls)
    warm-up calls); with `block_s`, at most as many calls (at least 2) as fit in `block_s` seconds a block."""
    start = time.perf_counter()
    fn()
    if block_s is not None:
        calls = max(2, min(calls, int(block_s / max(time.perf_counter() - start, 1e-9))))
    for _ in range(min(10, calls) - 1):
        fn()
    blocks = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        blocks.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(blocks)


def worker_acting(setting_name: str, args) -> dict:
    """kppo's compiled `frozen_extractor` call vs `numpy_tower`, per vector step, SmallCNN and NatureCNN."""
    del setting_name
    import gymnasium as gym
    import numpy as np

    from kppo._tf import tf
    from kppo.agent.extractors import NatureCNN, Preprocessed, SmallCNN
    from kppo.agent.numpy_actor import frozen_extractor
    from kppo.agent.numpy_conv import numpy_tower

    rng = np.random.default_rng(0)
    cases = [
        ("SmallCNN", "MinAtar 10x10x4 float32", SmallCNN, gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32), False),
        ("NatureCNN", "Pong 84x84x4 uint8", NatureCNN, gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), True),
    ]
    rows = []
    for name, obs_label, build, space, normalize in cases:
        layer = Preprocessed(build(space.shape), space, normalize)
        dim = int(np.prod(space.shape))
        layer(tf.zeros([1, dim], space.dtype))  # builds the weights
        forward = numpy_tower(layer)
        compiled = frozen_extractor(layer)
        for batch in (*ACTING_ENVS, 1024):
            if space.dtype == np.uint8:
                obs = rng.integers(0, 256, (batch, dim), dtype=np.uint8)
            else:
                obs = (rng.random((batch, dim)) < 0.1).astype(np.float32)
            diff = float(np.max(np.abs(compiled(obs) - forward(obs))))
            calls, repeats, block = args.calls, args.acting_repeats, args.acting_block_s
            rows.append(
                dict(
                    extractor=name,
                    observation=obs_label,
                    batch=batch,
                    compiled_us=per_call_us(lambda f=compiled, o=obs: f(o), calls, repeats, block),
                    numpy_us=per_call_us(lambda f=forward, o=obs: f(o), calls, repeats, block),
                    max_abs_diff=diff,
                )
            )
            print(f"[acting] {rows[-1]}", file=sys.stderr, flush=True)
    # The floor of one compiled call on this machine: x + 1 on the same [8, 400] input, fed and fetched the same way.
    plus_one = tf.function(lambda x: x + 1.0, autograph=False)
    obs = np.zeros((8, 400), np.float32)
    floor_us = per_call_us(lambda: plus_one(tf.constant(obs)).numpy(), args.calls, args.acting_repeats)
    threads = dict(
        intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
        inter_op=tf.config.threading.get_inter_op_parallelism_threads(),
    )
    return dict(rows=rows, tf_call_floor_us=floor_us, threads=threads, versions=package_versions("tensorflow", "numpy"))


WORKERS = {"kppo": worker_kppo, "sb3": worker_sb3, "acting": worker_acting}


# --------------------------------------------------------------------------------------------------
# Driver.
# --------------------------------------------------------------------------------------------------


def _launch(name: str, python: str, setting: str, args, extra: list[str] = (), env_vars: dict | None = None) -> dict:
    cmd = [python, os.path.abspath(__file__), "--worker", name, "--setting", setting, "--calls", str(args.calls)]
    cmd += ["--acting-repeats", str(args.acting_repeats), "--acting-block-s", str(args.acting_block_s), *extra]
    if args.scale != 1.0 and name != "acting" and "--memory-only" not in extra:
        cmd += ["--rollouts", str(max(1, round(SETTINGS[setting]["rollouts"] * args.scale)))]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_vars or {}))
    if name != "sb3":  # `import kppo` from the repository, installed or not
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shown = " ".join(f"{k}={v}" for k, v in (env_vars or {}).items())
    print(f"[cnn_speed] {shown + ' ' if shown else ''}{' '.join(cmd)}", file=sys.stderr, flush=True)
    load_before, start = load_average(), time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {args.timeout}s")
    wall = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            out = json.loads(line)
            out.update(process_wall_s=wall, load_before=load_before, load_after=load_average())
            summary = {k: out[k] for k in ("steps_per_s", "learn_s", "peak_rss_mb") if k in out}
            print(f"[cnn_speed]   -> {summary}, {wall:.0f}s, load {load_before:.1f}", file=sys.stderr, flush=True)
            return out
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    print(f"[cnn_speed] {name}/{setting} failed (exit {proc.returncode}):\n{tail}", file=sys.stderr, flush=True)
    return dict(error=f"exit {proc.returncode}", stderr_tail=tail)


def throughput_table(setting: str, runs: dict[str, list[dict]]) -> str:
    s = SETTINGS[setting]
    kp, sb = runs.get("kppo", []), runs.get("sb3", [])
    lines = [
        f"**{s['label']}** ({s['env_id']}; PPO CnnPolicy {', '.join(f'{k}={v}' for k, v in s['ppo'].items())}; "
        f"timed learn of {_rollouts_of(kp + sb, s)} rollouts after a one-rollout warm-up)",
        "",
        "| measure | kppo | SB3 | kppo / SB3 |",
        "|---|--:|--:|--:|",
    ]

    def row(label, key, digits=0, invert=False):
        a, b = median_of(kp, key), median_of(sb, key)
        r = ratio(b, a) if invert else ratio(a, b)
        lines.append(f"| {label} | {fmt(a, digits)} | {fmt(b, digits)} | {r} |")

    row("**env steps/s (median)**", "steps_per_s")
    for name, runs_ in (("kppo", kp), ("SB3", sb)):
        values = ", ".join(f"{r['steps_per_s']:,.0f}" for r in runs_)
        lines.append(
            f"| steps/s per repeat, {name} | {values if name == 'kppo' else ''} | {values if name == 'SB3' else ''} | |"
        )
    row("timed learn (s)", "learn_s", 1)
    row("warm-up learn, one rollout (s)", "warmup_s", 1)
    row("setup: env + PPO(...) (s)", "setup_s", 1)
    row("peak RSS of the worker (MiB)", "peak_rss_mb")
    phases = [
        ("rollout", "rollout (s)"),
        ("env_step", "  of which env step (s)"),
        ("acting_cnn", "  of which kppo acting CNN calls (s)"),
        ("acting_policy", "  of which SB3 policy.forward (s)"),
        ("finish", "  of which kppo finish_rollout (s)"),
    ]
    for key, label in phases:
        a = _phase_median(kp, key)
        b = _phase_median(sb, key)
        if a is None and b is None:
            continue
        lines.append(f"| {label} | {fmt(a, 2)} | {fmt(b, 2)} | |")
    a = _update_median(kp)
    b = _update_median(sb)
    lines.append(f"| update: learn - rollout (s) | {fmt(a, 2)} | {fmt(b, 2)} | {ratio(b, a)} faster |")
    if kp:
        xla = "yes" if kp[0].get("update_xla") else "no"
        lines.append(
            f"| kppo update XLA-compiled ({kp[0].get('gradient_steps')} gradient steps an update) | {xla} | | |"
        )
    threads = [(r[0]["threads"] if r else None) for r in (kp, sb)]
    lines.append(
        "| threads (intra-op, inter-op; 0 = TensorFlow's default) | "
        + " | ".join("" if t is None else f"{t.get('intra_op')}, {t.get('inter_op')}" for t in threads)
        + " | |"
    )
    loads = [r["load_before"] for r in kp + sb if r.get("load_before") is not None]
    if loads:
        lines.append(f"| 1-min load average before the workers (min-max) | {min(loads):.1f}-{max(loads):.1f} | | |")
    return "\n".join(lines)


def _rollouts_of(runs: list[dict], setting: dict) -> str:
    counts = sorted({r["env_steps"] // rollout_steps(setting) for r in runs})
    return ", ".join(str(c) for c in counts) or "?"


def _phase_median(runs: list[dict], key: str) -> float | None:
    values = [r["phases"][key] for r in runs if key in r.get("phases", {})]
    return statistics.median(values) if values else None


def _update_median(runs: list[dict]) -> float | None:
    values = [r["learn_s"] - r["phases"]["rollout"] for r in runs if "rollout" in r.get("phases", {})]
    return statistics.median(values) if values else None


def one_thread_table(runs: dict) -> str:
    lines = [
        "**Sensitivity: one thread per framework** (TensorFlow intra/inter-op 1; `torch.set_num_threads(1)`), "
        "same settings and timed learn, medians; seconds of the timed learn split as rollout (env step, acting "
        "network) / update",
        "",
        "| setting | runs | kppo steps/s | SB3 steps/s | kppo / SB3 | kppo: rollout (env, CNN, finish) / update | "
        "SB3: rollout (env, policy.forward) / update |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for setting, by_framework in runs.items():
        kp, sb = by_framework.get("kppo", []), by_framework.get("sb3", [])
        if not kp and not sb:
            continue
        a, b = median_of(kp, "steps_per_s"), median_of(sb, "steps_per_s")
        splits = []
        for r, parts in ((kp, ("env_step", "acting_cnn", "finish")), (sb, ("env_step", "acting_policy"))):
            inner = ", ".join(fmt(_phase_median(r, p), 2) for p in parts)
            splits.append(f"{fmt(_phase_median(r, 'rollout'), 2)} ({inner}) / {fmt(_update_median(r), 2)}" if r else "")
        lines.append(
            f"| {SETTINGS[setting]['label']} | {len(kp)}, {len(sb)} | {fmt(a)} | {fmt(b)} | {ratio(a, b)} | "
            f"{splits[0]} | {splits[1]} |"
        )
    return "\n".join(lines)


def memory_table(runs: list[dict]) -> str:
    lines = [
        f"**kppo, {PONG_ID}, memory**: a fresh interpreter builds the Pong setting and runs `learn` of one rollout "
        f"(n_steps={N_STEPS}); peak RSS (ru_maxrss)",
        "",
        "| envs | gradient steps | update XLA | RSS after setup (MiB) | peak RSS (MiB) | one rollout of uint8 obs (MB) "
        "| as float32 (MB) | learn (s): rollout (finish) / update |",
        "|--:|--:|---|--:|--:|--:|--:|--:|",
    ]
    for r in runs:
        n, phases = r["n_envs"], r.get("phases", {})
        u8 = rollout_bytes(n, N_STEPS, (84, 84, 4), 1) / 1e6
        split = ""
        if "rollout" in phases:
            split = (
                f"{phases['rollout']:.1f} ({phases.get('finish', 0.0):.1f}) / {r['learn_s'] - phases['rollout']:.1f}"
            )
        lines.append(
            f"| {n} | {r['gradient_steps']} | {'yes' if r['update_xla'] else 'no'} | {r['rss_after_setup_mb']:,.0f} | "
            f"{r['peak_rss_mb']:,.0f} | {u8:,.0f} | {4 * u8:,.0f} | {r['learn_s']:.1f}: {split} |"
        )
    return "\n".join(lines)


def acting_table(results: list[dict]) -> str:
    """One row per (extractor, batch): the compiled call and numpy_tower in each acting worker (by its env vars)."""
    labels = [" ".join(f"{k}={v}" for k, v in r["env_vars"].items()) or "OpenBLAS default threads" for r in results]
    floors = ", ".join(f"{r['tf_call_floor_us']:,.0f} µs ({label})" for r, label in zip(results, labels))
    lines = [
        "**kppo, acting CNN per vector step**: compiled `frozen_extractor` call (what the host rollout runs) vs "
        "`numpy_tower` (im2col + matmul) on the same weights, µs per call, median of blocks; one worker per "
        f"OpenBLAS setting (TensorFlow threads {results[0].get('threads')}). The floor of one compiled call "
        f"(`x + 1` on [8, 400] float32, fed and fetched the same way): {floors}",
        "",
        "| extractor | observation | batch (envs) | "
        + " | ".join(f"compiled TF (µs), {label}" for label in labels)
        + " | "
        + " | ".join(f"numpy im2col (µs), {label}" for label in labels)
        + " | fastest numpy / fastest compiled | max abs diff |",
        "|---|---|--:|" + "--:|" * (2 * len(results) + 2),
    ]
    for i, row in enumerate(results[0]["rows"]):
        rows = [r["rows"][i] for r in results]
        compiled, numpy_ = [r["compiled_us"] for r in rows], [r["numpy_us"] for r in rows]
        lines.append(
            f"| {row['extractor']} | {row['observation']} | {row['batch']} | "
            + " | ".join(f"{v:,.0f}" for v in compiled + numpy_)
            + f" | {min(numpy_) / min(compiled):.2f}x | {max(r['max_abs_diff'] for r in rows):.1e} |"
        )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--python-sb3", default="/tmp/sb3venv/bin/python", help="interpreter with stable_baselines3")
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per framework and setting")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the timed rollouts (smoke runs)")
    parser.add_argument("--memory-envs", default="8,64", help="kppo Pong memory runs (n_envs)")
    parser.add_argument(
        "--memory-graph-update",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="memory runs: keep the update out of XLA (kppo XLA-compiles it from 64 gradient steps: n_envs >= 32)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: throughput, one-thread, memory, acting")
    parser.add_argument(
        "--one-thread-repeats", type=int, default=1, help="extra alternating runs with one thread per framework"
    )
    parser.add_argument("--calls", type=int, default=200, help="acting calls per timed block")
    parser.add_argument("--acting-repeats", type=int, default=5)
    parser.add_argument("--acting-block-s", type=float, default=0.3, help="acting: seconds per timed block at most")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--json", help="also write the workers' results here")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--setting", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    parser.add_argument("--rollouts", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--n-envs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--update-xla-min-steps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    return parser


def _alternate(settings, frameworks, repeats, pythons, args, extra, failures, flip=False) -> dict:
    """`repeats` rounds of every (setting, framework) worker, the frameworks' order reversed every other round."""
    runs: dict = {s: {f: [] for f in frameworks} for s in settings}
    for rep in range(repeats):
        order = frameworks if (rep % 2 == 0) != flip else frameworks[::-1]
        for setting in settings:
            for name in order:
                out = _launch(name, pythons[name], setting, args, extra)
                (failures if "error" in out else runs[setting][name]).append(dict(out, repeat=rep))
    return runs


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        out = WORKERS[args.worker](args.setting, args)
        print(json.dumps(dict(framework=args.worker, setting=args.setting, **out)), flush=True)
        return 0

    settings = [s for s in args.settings.split(",") if s]
    frameworks = [f for f in args.frameworks.split(",") if f]
    skip = set(args.skip.split(","))
    pythons = {"kppo": sys.executable, "sb3": args.python_sb3, "acting": sys.executable}
    started, load_start = time.time(), load_average()
    failures: list = []
    repeats = 0 if "throughput" in skip else args.repeats
    runs = _alternate(settings, frameworks, repeats, pythons, args, [], failures)
    repeats = 0 if "one-thread" in skip else args.one_thread_repeats
    one_thread = _alternate(settings, frameworks, repeats, pythons, args, ["--threads", "1"], failures, flip=True)
    memory = []
    for n in [] if "memory" in skip else [int(n) for n in args.memory_envs.split(",") if n]:
        # From 64 gradient steps (n_envs >= 32 here) kppo XLA-compiles the host update, whose NatureCNN filter
        # gradients XLA:CPU runs ~100x slower (docs/benchmarks/images.md): the memory runs keep the graph update.
        lift = ["--update-xla-min-steps", str(10**9)] if args.memory_graph_update else []
        out = _launch("kppo", sys.executable, "pong", args, ["--n-envs", str(n), "--memory-only", *lift])
        (failures if "error" in out else memory).append(out)
    acting = []
    for env_vars in [] if "acting" in skip else [{}, {"OPENBLAS_NUM_THREADS": "1"}]:
        out = _launch("acting", sys.executable, "minatar", args, [], env_vars)
        (failures if "error" in out else acting).append(dict(out, env_vars=env_vars))

    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}, {cpu_model()} ({os.cpu_count()} CPUs), "
        f"1-min load average {load_start:.1f} at the start, {load_average():.1f} at the end; "
        f"{args.repeats} alternating repeat(s), wall {time.time() - started:.0f} s\n"
    )
    tables = [throughput_table(s, runs[s]) for s in settings if any(runs[s].values())]
    if any(any(v.values()) for v in one_thread.values()):
        tables.append(one_thread_table(one_thread))
    if memory:
        tables.append(memory_table(memory))
    if acting:
        tables.append(acting_table(acting))
    print("\n\n".join(tables) + "\n")
    for f in failures:
        print(f"Failed: {f.get('error')}\n{f.get('stderr_tail', '')}")
    if args.json:
        result = dict(date=time.strftime("%Y-%m-%d"), cpu=cpu_model(), runs=runs, one_thread=one_thread)
        with open(args.json, "w") as f:
            json.dump(dict(result, memory=memory, acting=acting), f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
