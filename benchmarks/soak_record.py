"""What `soak.py` records, in its worker interpreter: the two parts (TF-native and gymnasium) with the sampler
thread, the trace counter and the iteration hook that watch them. Results: docs/benchmarks/soak.md."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


NATIVE_KEEP = 3  # TrainingCheckpointer's max_to_keep (kppo.training.checkpointer)
NATIVE_CHECKPOINT_EVERY = 160  # iterations (10 compiled calls of 16)
GYM_CHECKPOINT_STEPS = 100_000
GYM_EVAL_STEPS = 50_000
GYM_N_ENVS = 8


# ---------------------------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------------------------


def memory_mb() -> dict[str, float]:
    """VmRSS, RssAnon and RssFile of this process (/proc/self/status), in MiB. RssAnon is the process's own heap:
    under memory pressure the kernel drops file-backed pages (the TensorFlow library's code) from VmRSS, not these."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (files removed while walking are skipped)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


class TraceCounter:
    """Counts concrete functions traced in this process, through TensorFlow's `CONCRETE_FUNCTION_CALLBACKS`
    (called by `tracing_compilation` once per trace of any tf.function, nested ones included)."""

    def __init__(self):
        from tensorflow.python.eager.polymorphic_function import transform

        self.traces: list[tuple[float, str]] = []  # (perf_counter, function name)
        transform.CONCRETE_FUNCTION_CALLBACKS.append(self._on_trace)

    def _on_trace(self, concrete_function) -> None:
        name = concrete_function.name
        self.traces.append((time.perf_counter(), name.decode() if isinstance(name, bytes) else str(name)))

    @property
    def count(self) -> int:
        return len(self.traces)


def check_trace_counter(counter: TraceCounter) -> dict:
    """A toy tf.function: the counter must count its first trace, no trace for a call of the same signature, and a
    retrace for a new shape and for each new Python float (the classic retrace), as `experimental_get_tracing_count`
    does."""
    from kppo._tf import tf

    double = tf.function(lambda x: 2 * x)
    counts = []
    for arg in (tf.zeros([2]), tf.ones([2]), tf.zeros([3]), 1.0, 2.0):
        before = counter.count
        double(arg)
        counts.append((counter.count - before, double.experimental_get_tracing_count()))
    ok = [c for c, _ in counts] == [1, 0, 1, 1, 1] and [t for _, t in counts] == [1, 1, 2, 3, 4]
    if not ok:
        raise SystemExit(f"trace counter: expected traces [1, 0, 1, 1, 1], got {counts}")
    return {
        "calls": ["zeros[2]", "ones[2]", "zeros[3]", "1.0", "2.0"],
        "traces_counted": [c for c, _ in counts],
        "experimental_get_tracing_count": [t for _, t in counts],
        "ok": ok,
    }


class Sampler:
    """A thread sampling (time, RSS, steps, traces, checkpoint bytes) every `period` seconds, and the same row on
    demand (`sample`) from the iteration hook."""

    def __init__(self, period: float, counter: TraceCounter, folder: Path):
        self.period, self.counter, self.folder = period, counter, folder
        self.t0 = time.perf_counter()
        self.steps = 0
        self.timed: list[list[float]] = []
        self.hooked: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def row(self) -> list[float]:
        memory = memory_mb()
        return [
            time.perf_counter() - self.t0,
            memory["VmRSS"],
            self.steps,
            self.counter.count,
            folder_bytes(self.folder),
            time.process_time(),  # CPU seconds of the whole process (all its threads)
            os.getloadavg()[0],
            memory["RssAnon"],
            memory["RssFile"],
        ]

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.timed.append(self.row())

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.timed.append(self.row())
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.timed.append(self.row())


COLUMNS = ["t_s", "rss_mb", "steps", "traces", "checkpoint_bytes", "cpu_s", "load_1min", "rss_anon_mb", "rss_file_mb"]


def make_hook(sampler: Sampler, saves: set[str], folder: Path):
    """A kppo callback: `_on_rollout_end` records a row (once per compiled call on TF-native envs, once per
    iteration on gymnasium envs) and the checkpoint names present, so each save is counted."""
    import kppo

    class SoakHook(kppo.BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:
            sampler.steps = int(self.model.num_timesteps)
            sampler.hooked.append(sampler.row())
            if folder.is_dir():
                saves.update(p.name.split(".")[0] for p in folder.iterdir() if p.name.endswith((".index", ".zip")))

    return SoakHook()


# ---------------------------------------------------------------------------------------------------------------
# The two parts (run in a worker interpreter)
# ---------------------------------------------------------------------------------------------------------------


def native_part(steps: int, run_dir: Path, sample_s: float, checkpoint_every: int) -> dict:
    import kppo

    counter = TraceCounter()
    probe = check_trace_counter(counter)
    config = kppo.Config(total_timesteps=steps, checkpoint_every=checkpoint_every, verbose=0)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.to_yaml(run_dir / "config.yaml")
    folder = run_dir / "checkpoints"
    sampler, saves = Sampler(sample_s, counter, folder), set()
    hook = make_hook(sampler, saves, folder)
    traces_before = counter.count
    sampler.start()
    result = kppo.train("cartpole", config, callback=hook, checkpoint_dir=folder)
    sampler.stop()
    runner = hook.model.runner
    return {
        "setting": {
            "env": "cartpole (TF-native)",
            "total_timesteps": steps,
            "num_envs": config.num_envs,
            "num_steps": config.num_steps,
            "iterations_per_call": config.iterations_per_call,
            "eval_rounds": config.eval_rounds,
            "checkpoint_every": checkpoint_every,
            "keep": NATIVE_KEEP,
        },
        "trace_probe": probe,
        "traces_before_run": traces_before,
        "function_tracing_counts": {
            "iterations_fn": runner.iterations_fn.experimental_get_tracing_count(),
            "evaluation_fn": runner.evaluation_fn.experimental_get_tracing_count(),
        },
        "trace_names": [(round(t - sampler.t0, 3), name) for t, name in counter.traces[traces_before:]],
        "timed": sampler.timed,
        "hooked": sampler.hooked,
        "saves": sorted(saves, key=lambda s: int(s.split("-")[-1])),
        "final_files": sorted(p.name for p in folder.iterdir()),
        "kppo_timings": result.timings,
        "final_eval_return": float(result.metrics["eval/mean_returns"][-1]),
    }


def gym_part(steps: int, run_dir: Path, sample_s: float, checkpoint_steps: int, eval_steps: int) -> dict:
    import kppo

    counter = TraceCounter()
    probe = check_trace_counter(counter)
    folder = run_dir / "checkpoints"
    sampler, saves = Sampler(sample_s, counter, folder), set()
    hook = make_hook(sampler, saves, folder)
    env = kppo.make_vec_env("CartPole-v1", n_envs=GYM_N_ENVS, seed=0)
    hyper = dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0)
    model = kppo.PPO(
        "MlpPolicy", env, learning_rate=lambda p: 1e-3 * p, clip_range=lambda p: 0.2 * p, seed=0, verbose=0, **hyper
    )
    callbacks = [
        kppo.CheckpointCallback(max(checkpoint_steps // GYM_N_ENVS, 1), str(folder), name_prefix="ppo"),
        kppo.EvalCallback(
            "CartPole-v1",
            n_eval_episodes=10,
            eval_freq=max(eval_steps // GYM_N_ENVS, 1),
            best_model_save_path=str(run_dir / "best"),
            log_path=str(run_dir / "eval"),
            verbose=0,
        ),
        hook,
    ]
    traces_before = counter.count
    sampler.start()
    t0 = time.perf_counter()
    model.learn(steps, callback=callbacks)
    wall = time.perf_counter() - t0
    sampler.stop()
    runner = model._runner  # the host runner (private: its compiled finish_fn's own tracing count)
    zips = {p.name: p.stat().st_size for p in folder.iterdir() if p.suffix == ".zip"}
    return {
        "setting": {
            "env": "CartPole-v1 (gymnasium, kppo.PPO)",
            "total_timesteps": steps,
            "n_envs": GYM_N_ENVS,
            **hyper,
            "learning_rate": "linear 1e-3 -> 0",
            "clip_range": "linear 0.2 -> 0",
            "checkpoint_every_steps": checkpoint_steps,
            "eval_every_steps": eval_steps,
            "n_eval_episodes": 10,
        },
        "trace_probe": probe,
        "traces_before_run": traces_before,
        "function_tracing_counts": {"finish_fn": runner.finish_fn.experimental_get_tracing_count()},
        "trace_names": [(round(t - sampler.t0, 3), name) for t, name in counter.traces[traces_before:]],
        "timed": sampler.timed,
        "hooked": sampler.hooked,
        "saves": sorted(saves, key=lambda s: int(s.split("_")[1])),
        "zip_bytes": zips,
        "learn_wall_s": wall,
        "final_eval_return": float(callbacks[1].last_mean_reward),
        "best_eval_return": float(callbacks[1].best_mean_reward),
    }
