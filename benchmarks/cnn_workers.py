"""The workers of `cnn_speed.py`, one a fresh interpreter (`cnn_speed.py --worker NAME --setting SETTING`): kppo's
and SB3's timed learn with its phases, and kppo's acting CNN (compiled call against numpy im2col). Each returns the
dict the driver prints as one JSON line. Results: docs/benchmarks/images.md.
"""

from __future__ import annotations

import statistics
import sys
import time

from cnn_settings import (
    ACTING_ENVS,
    MINATAR_ID,
    PONG_ID,
    SETTINGS,
    Timer,
    float_obs_wrapper,
    kppo_env,
    measure_learn,
    peak_rss_mb,
    register_minatar,
    torch_small_cnn,
)
from harness import package_versions


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
