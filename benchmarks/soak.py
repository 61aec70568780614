#!/usr/bin/env python
"""The long run (issue 39, item 3): a 10M-step TF-native run and a 2M-step gymnasium run, watched for drift.

Two parts, each in a fresh interpreter started by this driver (so each RSS series starts from a bare process):

- `native`: `kppo.train("cartpole", kppo.Config(...))`, the fixed CartPole setting (16 envs x 128 steps, 16
  iterations per compiled call, 10 evaluation rounds) for `--native-steps`, checkpointing into a run directory
  (`config.yaml` + `checkpoints/`) every `NATIVE_CHECKPOINT_EVERY` iterations and at every round's end;
  kppo's `TrainingCheckpointer` keeps the last 3.
- `gym`: `kppo.PPO("MlpPolicy", make_vec_env("CartPole-v1", 8))` with RL-Zoo's CartPole-v1 hyperparameters for
  `--gym-steps`, with SB3-style `CheckpointCallback` (every `GYM_CHECKPOINT_STEPS` steps) and `EvalCallback`
  (every `GYM_EVAL_STEPS` steps, 10 episodes, best model saved).

Against time, each part records: RSS (`VmRSS` of /proc/self/status, sampled by a thread every `--sample-s` seconds
and at every compiled call / iteration), steps so far, the number of concrete functions traced in the process (a
callback in TensorFlow's `CONCRETE_FUNCTION_CALLBACKS` registry, the one tf.debugging's dumper uses: it fires once
per trace of any tf.function, nested ones included; the script checks on a toy function that it counts a retrace
and agrees with `experimental_get_tracing_count`), and the bytes of the files in the checkpoint folder. An
iteration hook (a `kppo.BaseCallback`'s `_on_rollout_end`: once per compiled call on the TF-native path, once per
iteration on the host path) gives the steps/s series.

Targets, evaluated and printed per part (warm-up = the first `WARMUP_FRACTION` of the run's steps):

- RSS flat: after warm-up, every RSS sample within 5% of the RSS at the end of warm-up.
- No retracing after the first iteration: no trace after the first iteration hook returned (the first compiled call
  and, for the TF-native run, its evaluation warm-up compiled beside it).
- Steady steps/s: the last quarter's steps/s within 10% of the second quarter's (the coefficient of variation of
  `STEADY_WINDOWS` equal-step windows after warm-up is printed beside it).
- Checkpoint folder bounded: TF-native, never larger than its size after `keep` saves x (keep + 1) / keep (a save
  writes the new checkpoint before it deletes the oldest). The gymnasium run's `CheckpointCallback` keeps every save
  (as SB3's: no keep-count), so its bound is the number of saves x one checkpoint's size: each saved zip the same
  size (within 5%) and nothing else growing.

    .venv/bin/python benchmarks/soak.py --smoke --out /tmp/soak_smoke.json --plots /tmp/soak_plots
    .venv/bin/python benchmarks/soak.py --out benchmarks/results/soak.json --plots docs/figures
    .venv/bin/python benchmarks/soak.py --parts gym --out benchmarks/results/soak.json   # keeps the native part

An existing `--out` file keeps the parts not run this time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from machine import finish_record, package_versions, run_record

WARMUP_FRACTION = 0.10  # of the run's steps
RSS_TOLERANCE = 0.05
STEADY_TOLERANCE = 0.10
STEADY_WINDOWS = 20
CHECKPOINT_SIZE_TOLERANCE = 0.05  # gymnasium run: spread of the saved zips' sizes
NATIVE_BETWEEN_SAVES_TOLERANCE = 0.10  # TF-native run: growth of the between-saves size after keep saves
NATIVE_KEEP = 3  # TrainingCheckpointer's max_to_keep (kppo.training.checkpointer)
NATIVE_CHECKPOINT_EVERY = 160  # iterations (10 compiled calls of 16)
GYM_CHECKPOINT_STEPS = 100_000
GYM_EVAL_STEPS = 50_000
GYM_N_ENVS = 8
SERIES_POINTS = 600  # at most this many rows of each series go into the JSON (evenly thinned)
SMOKE = {
    "native_steps": 163_840,
    "gym_steps": 20_480,
    "native_checkpoint_every": 16,
    "gym_checkpoint_steps": 4_096,
    "gym_eval_steps": 4_096,
}


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


# ---------------------------------------------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------------------------------------------


def _interp_time(hooked: list[list[float]], steps: float, column: int = 0) -> float:
    """`column` (time by default; 5: CPU seconds) when the run reached `steps` (linear between the hook's rows)."""
    prev = [0.0] * len(hooked[0])
    for row in hooked:
        if row[2] >= steps:
            v0, s0, v1, s1 = prev[column], prev[2], row[column], row[2]
            return v1 if s1 == s0 else v0 + (v1 - v0) * (steps - s0) / (s1 - s0)
        prev = row
    return hooked[-1][column]


def evaluate(part: str, data: dict) -> dict:
    """The drift figures and whether each target holds."""
    hooked = data["hooked"]
    total = hooked[-1][2]
    warm_t = _interp_time(hooked, WARMUP_FRACTION * total)
    end_t = hooked[-1][0]
    rows = sorted(data["timed"] + hooked)  # both series, by time
    checkpoint = _native_folder if part == "native" else _gym_folder
    return {
        "rss": _rss(rows, hooked, warm_t, end_t, 1),
        "rss_anon": _rss(rows, hooked, warm_t, end_t, 7),
        "retracing": _retracing(data),
        "steps_per_s": _steadiness(hooked),
        "checkpoint_folder": checkpoint(data, [r[4] for r in rows]),
        "wall_s": end_t,
        "steps": total,
    }


def _rss(rows: list, hooked: list, warm_t: float, end_t: float, column: int) -> dict:
    """Drift of one memory column (1: VmRSS, 7: RssAnon) after warm-up."""
    import numpy as np

    total = hooked[-1][2]
    after = [r for r in rows if warm_t <= r[0] <= end_t]
    start, end = after[0][column], after[-1][column]
    rss, t = np.array([r[column] for r in after]), np.array([r[0] for r in after])
    half = np.array([[r[2], r[column]] for r in hooked if r[2] >= total / 2])
    jumps = np.diff(rss)
    at = int(np.argmax(np.abs(jumps))) if len(jumps) else 0
    return {
        "warmup": f"first {WARMUP_FRACTION:.0%} of the steps ({WARMUP_FRACTION * total:,.0f}), to t = {warm_t:.1f} s",
        "warmup_end_t_s": warm_t,
        "start_mb": start,
        "end_mb": end,
        "min_mb": float(rss.min()),
        "max_mb": float(rss.max()),
        "first_sample_mb": rows[0][column],
        "drift_end_pct": 100 * (end / start - 1),
        "drift_max_pct": 100 * (rss.max() / start - 1),
        "drift_min_pct": 100 * (rss.min() / start - 1),
        "slope_mb_per_min": 60 * float(np.polyfit(t, rss, 1)[0]) if len(after) > 2 else 0.0,
        "second_half_slope_mb_per_m_steps": 1e6 * float(np.polyfit(half[:, 0], half[:, 1], 1)[0])
        if len(half) > 2
        else 0.0,
        "largest_step_mb": float(jumps[at]) if len(jumps) else 0.0,
        "largest_step_t_s": float(t[at + 1]) if len(jumps) else 0.0,
        "target": f"every sample after warm-up within {RSS_TOLERANCE:.0%} of the start",
        "met": bool(np.all(np.abs(rss / start - 1) <= RSS_TOLERANCE)),
    }


def _retracing(data: dict) -> dict:
    first_t = data["hooked"][0][0]
    early = [name for t, name in data["trace_names"] if t <= first_t]
    late = [name for t, name in data["trace_names"] if t > first_t]
    early_names = {_base(name) for name in early}
    return {
        "before_first_iteration": len(early),
        "after_first_iteration": len(late),
        "retraces_of_traced_functions": sum(1 for name in late if _base(name) in early_names),
        "late_names": sorted({_base(name) for name in late}),
        "function_tracing_counts": data["function_tracing_counts"],
        "target": "no trace after the first iteration hook",
        "met": not late,
    }


def _quarter_rate(hooked: list, total: float, q: int, column: int = 0) -> float:
    """Steps per second (column 0: wall; 5: CPU) over the q-th quarter of the run's steps (q = 0..3)."""
    span = _interp_time(hooked, total * (q + 1) / 4, column) - _interp_time(hooked, total * q / 4, column)
    return (total / 4) / span


def _steadiness(hooked: list) -> dict:
    """Steps per second of wall time (the target) and per CPU-second of the process (what is left once other
    processes' share of the cores is taken out: on a shared machine the wall rate follows their load)."""
    import numpy as np

    total = hooked[-1][2]
    edges = np.linspace(WARMUP_FRACTION * total, total, STEADY_WINDOWS + 1)
    rates = np.diff(edges) / np.diff([_interp_time(hooked, s) for s in edges])
    cpu_rates = np.diff(edges) / np.diff([_interp_time(hooked, s, 5) for s in edges])
    second, last = _quarter_rate(hooked, total, 1), _quarter_rate(hooked, total, 3)
    cpu_second, cpu_last = _quarter_rate(hooked, total, 1, 5), _quarter_rate(hooked, total, 3, 5)
    loads = np.array([r[6] for r in hooked])
    return {
        "overall_steps_per_s": (total - hooked[0][2]) / (hooked[-1][0] - hooked[0][0]),
        "second_quarter_steps_per_s": second,
        "last_quarter_steps_per_s": last,
        "last_over_second": last / second,
        "window_cv_pct": 100 * float(rates.std() / rates.mean()),
        "window_min_steps_per_s": float(rates.min()),
        "window_max_steps_per_s": float(rates.max()),
        "windows": STEADY_WINDOWS,
        "second_quarter_steps_per_cpu_s": cpu_second,
        "last_quarter_steps_per_cpu_s": cpu_last,
        "cpu_last_over_second": cpu_last / cpu_second,
        "cpu_window_cv_pct": 100 * float(cpu_rates.std() / cpu_rates.mean()),
        "load_1min_min": float(loads.min()),
        "load_1min_mean": float(loads.mean()),
        "load_1min_max": float(loads.max()),
        "target": f"last quarter within {STEADY_TOLERANCE:.0%} of the second quarter (wall steps/s)",
        "met": bool(abs(last / second - 1) <= STEADY_TOLERANCE),
        "cpu_met": bool(abs(cpu_last / cpu_second - 1) <= STEADY_TOLERANCE),
    }


def _native_folder(data: dict, sizes: list[int]) -> dict:
    """Between saves (the hook's rows: a call's checkpoint is written after its hook returns, so none falls inside a
    save) and at any time (the thread's rows too, which may fall inside a save)."""
    keep = data["setting"]["keep"]
    after_keep_t = _time_of_save(data, keep)  # the first hook row after `keep` saves
    hooked = data["hooked"]
    size_keep = next((r[4] for r in hooked if after_keep_t is not None and r[0] >= after_keep_t), sizes[-1])
    between = max(r[4] for r in hooked if after_keep_t is not None and r[0] >= after_keep_t)
    in_save_bound = size_keep * (keep + 2) / keep
    return {
        "saves": len(data["saves"]),
        "keep": keep,
        "files_at_end": sum(1 for f in data["final_files"] if f.endswith(".index")),
        "size_after_keep_saves_bytes": size_keep,
        "max_between_saves_bytes": between,
        "between_over_after_keep": between / size_keep,
        "max_bytes": max(sizes),
        "end_bytes": sizes[-1],
        "bound_bytes": size_keep * (1 + NATIVE_BETWEEN_SAVES_TOLERANCE),
        "in_save_bound_bytes": in_save_bound,
        "target": f"between saves, never above the size after keep saves x {1 + NATIVE_BETWEEN_SAVES_TOLERANCE:.2f} "
        "(the metric rows each checkpoint holds grow by one row a round); during a save, never above it x "
        "(keep + 2) / keep (the new checkpoint beside the kept ones, and its temporary shard until TF merges it)",
        "met": bool(between <= size_keep * (1 + NATIVE_BETWEEN_SAVES_TOLERANCE) and max(sizes) <= in_save_bound),
    }


def _gym_folder(data: dict, sizes: list[int]) -> dict:
    zips = list(data["zip_bytes"].values()) or [0]
    bound = len(data["zip_bytes"]) * max(zips)
    return {
        "saves": len(data["zip_bytes"]),
        "keep": None,
        "zip_min_bytes": min(zips),
        "zip_max_bytes": max(zips),
        "max_bytes": max(sizes),
        "end_bytes": sizes[-1],
        "bound_bytes": bound,
        "target": f"CheckpointCallback keeps every save (no keep-count, as SB3): never above saves x the largest zip, "
        f"the zips' sizes within {CHECKPOINT_SIZE_TOLERANCE:.0%}",
        "met": bool(max(zips) <= min(zips) * (1 + CHECKPOINT_SIZE_TOLERANCE) and max(sizes) <= bound),
    }


def _time_of_save(data: dict, k: int) -> float | None:
    """The time of the first iteration-hook row after the `k`-th checkpoint was written (checkpoint numbers count
    iterations; a call's checkpoint is written after its hook row, so the row must be a later call's)."""
    rollout = data["setting"]["num_envs"] * data["setting"]["num_steps"]
    numbers = sorted(int(s.split("-")[-1]) for s in data["saves"])
    if len(numbers) < k:
        return None
    steps_k = numbers[k - 1] * rollout
    return next((r[0] for r in data["hooked"] if r[2] > steps_k), None)


def _base(name: str) -> str:
    """`__inference_run_iterations_123` -> `run_iterations`."""
    name = name.removeprefix("__inference_")
    head, _, tail = name.rpartition("_")
    return head if tail.isdigit() else name


# ---------------------------------------------------------------------------------------------------------------
# Report, plots, driver
# ---------------------------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def print_summary(part: str, s: dict) -> None:
    tr, sp, ck = s["retracing"], s["steps_per_s"], s["checkpoint_folder"]
    print(f"== {part}: {s['steps']:,} steps in {s['wall_s']:.0f} s")
    for name, rss in (("VmRSS", s["rss"]), ("RssAnon", s["rss_anon"])):
        print(
            f"  {name} after warm-up ({rss['warmup']}): {rss['start_mb']:.0f} -> {rss['end_mb']:.0f} MiB, drift "
            f"{rss['drift_end_pct']:+.1f}% (range {rss['drift_min_pct']:+.1f}..{rss['drift_max_pct']:+.1f}%; second "
            f"half {rss['second_half_slope_mb_per_m_steps']:+.2f} MiB per 1M steps; largest step "
            f"{rss['largest_step_mb']:+.1f} MiB at {rss['largest_step_t_s']:.0f} s)  [{_verdict(rss['met'])}]"
        )
    print(
        f"  traces: {tr['before_first_iteration']} up to the first iteration, {tr['after_first_iteration']} after "
        f"({tr['retraces_of_traced_functions']} of functions traced before; {tr['late_names']})  "
        f"[{_verdict(tr['met'])}]"
    )
    print(
        f"  steps/s: 2nd quarter {sp['second_quarter_steps_per_s']:,.0f}, last quarter "
        f"{sp['last_quarter_steps_per_s']:,.0f} (x{sp['last_over_second']:.3f}), window CV "
        f"{sp['window_cv_pct']:.1f}%  [{_verdict(sp['met'])}]; per CPU-second x{sp['cpu_last_over_second']:.3f}, "
        f"window CV {sp['cpu_window_cv_pct']:.1f}% [{_verdict(sp['cpu_met'])}]; load {sp['load_1min_min']:.1f}-"
        f"{sp['load_1min_max']:.1f}"
    )
    if ck["keep"] is None:
        sizes = (
            f"max {ck['max_bytes'] / 1e6:.3f} MB, bound {ck['bound_bytes'] / 1e6:.3f} MB (saves x the largest zip); "
            f"zips {ck['zip_min_bytes'] / 1e3:.1f}-{ck['zip_max_bytes'] / 1e3:.1f} kB"
        )
    else:
        sizes = (
            f"after {ck['keep']} saves {ck['size_after_keep_saves_bytes'] / 1e6:.3f} MB; between saves at most "
            f"{ck['max_between_saves_bytes'] / 1e6:.3f} MB (x{ck['between_over_after_keep']:.3f}, bound "
            f"{ck['bound_bytes'] / 1e6:.3f}); any sample at most {ck['max_bytes'] / 1e6:.3f} MB (in-save bound "
            f"{ck['in_save_bound_bytes'] / 1e6:.3f})"
        )
    print(f"  checkpoint folder, {ck['saves']} saves: {sizes}  [{_verdict(ck['met'])}]")


def plot(part: str, data: dict, summary: dict, folder: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed, hooked = np.array(data["timed"], float), np.array(data["hooked"], float)
    fig, axes = plt.subplots(4, 1, figsize=(8, 9), sharex=True)
    axes[0].plot(timed[:, 0], timed[:, 1], lw=0.8, label=f"VmRSS, every {data.get('sample_s', 1)} s")
    axes[0].plot(hooked[:, 0], hooked[:, 1], ".", ms=1.5, label="VmRSS, per iteration hook")
    axes[0].plot(timed[:, 0], timed[:, 7], lw=0.8, label="RssAnon (heap)")
    anon = summary["rss_anon"]["start_mb"]
    axes[0].axhspan(anon * (1 - RSS_TOLERANCE), anon * (1 + RSS_TOLERANCE), color="orange", alpha=0.08)
    warm_t = summary["rss"]["warmup_end_t_s"]
    start = summary["rss"]["start_mb"]
    for ax in axes:
        ax.axvline(warm_t, color="grey", ls=":", lw=0.8)
    axes[0].axhspan(start * (1 - RSS_TOLERANCE), start * (1 + RSS_TOLERANCE), color="green", alpha=0.08)
    axes[0].set_ylabel("RSS (MiB)")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="lower right")
    n = max(len(hooked) // 200, 1)  # steps/s over groups of n hook intervals
    idx = np.arange(0, len(hooked), n)
    t, s = hooked[idx, 0], hooked[idx, 2]
    mid, cpu = 0.5 * (t[1:] + t[:-1]), hooked[idx, 5]
    axes[1].plot(mid, np.diff(s) / np.maximum(np.diff(t), 1e-9), lw=0.8, label="per wall second")
    axes[1].plot(mid, np.diff(s) / np.maximum(np.diff(cpu), 1e-9), lw=0.8, ls="--", label="per CPU-second")
    axes[1].set_ylabel("steps/s")
    axes[1].set_ylim(bottom=0)
    load = axes[1].twinx()
    load.plot(timed[:, 0], timed[:, 6], color="grey", lw=0.6, alpha=0.6)
    load.set_ylabel("load avg (1 min)", fontsize=8, color="grey")
    load.set_ylim(bottom=0)
    axes[1].legend(fontsize=7, loc="lower right")
    axes[2].step(timed[:, 0], timed[:, 3] - data["traces_before_run"], where="post", lw=0.8)
    axes[2].set_ylabel("traces (cumulative)")
    axes[3].plot(timed[:, 0], timed[:, 4] / 1e6, lw=0.8)
    axes[3].set_ylabel("checkpoint folder (MB)")
    axes[3].set_xlabel("time (s)")
    title = data["setting"]["env"]
    fig.suptitle(f"soak, {part}: {title}, {summary['steps']:,} steps", fontsize=10)
    fig.tight_layout()
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = str(Path(folder) / f"soak_{part}.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def thin(rows: list, points: int = SERIES_POINTS) -> list:
    """At most `points` rows, evenly spaced, the first and last kept; values rounded."""
    step = max(1, -(-len(rows) // points))
    kept = rows[::step] + ([rows[-1]] if (len(rows) - 1) % step else [])
    return [[round(v, 3) if isinstance(v, float) else v for v in r] for r in kept]


def worker(args: argparse.Namespace) -> None:
    sizes = SMOKE if args.smoke else {}
    run_dir = Path(args.run_dir) / args.worker
    shutil.rmtree(run_dir, ignore_errors=True)
    header = run_record()
    if args.worker == "native":
        data = native_part(
            args.native_steps, run_dir, args.sample_s, sizes.get("native_checkpoint_every", NATIVE_CHECKPOINT_EVERY)
        )
    else:
        data = gym_part(
            args.gym_steps,
            run_dir,
            args.sample_s,
            sizes.get("gym_checkpoint_steps", GYM_CHECKPOINT_STEPS),
            sizes.get("gym_eval_steps", GYM_EVAL_STEPS),
        )
    data["sample_s"] = args.sample_s
    data["machine"] = {k: header[k] for k in ("date", "cpu", "cores", "load_average_start")}
    data["machine"]["load_average_end"] = os.getloadavg()
    Path(args.worker_out).write_text(json.dumps(data))


def summarize(part: str, data: dict, plots: str | None) -> dict:
    """The part's entry of the record: its summary (printed, plotted) and its series, thinned."""
    summary = evaluate(part, data)
    summary["process_wall_s"] = data.get("process_wall_s")
    print_summary(part, summary)
    if plots:
        print(f"  plot: {plot(part, data, summary, plots)}")
    for key in ("timed", "hooked"):
        data[key] = {"columns": COLUMNS, "rows": thin(data[key])}
    data["trace_names"] = data["trace_names"][:200]
    return {"summary": summary, **data}


def evaluate_only(parts: list[str], args: argparse.Namespace) -> None:
    """Evaluates the workers' full records in `--run-dir` again into `--out`, keeping the header (date, machine,
    load) of the run that made them when `--out` has it."""
    if not args.run_dir:
        raise SystemExit("--evaluate-only: expected --run-dir, the directory the run kept, got none")
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    record = {k: v for k, v in previous.items() if k != "runs"} or run_record(benchmark="soak")
    record["evaluated"] = time.strftime("%Y-%m-%d %H:%M")
    record["runs"] = {k: v for k, v in previous.get("runs", {}).items() if k not in parts}
    for part in parts:
        data = json.loads((Path(args.run_dir) / f"{part}.json").read_text())
        earlier = previous.get("runs", {}).get(part, {}).get("summary", {})
        data.setdefault("process_wall_s", earlier.get("process_wall_s"))
        record["runs"][part] = summarize(part, data, args.plots)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--native-steps", type=int, default=10_000_000)
    parser.add_argument("--gym-steps", type=int, default=2_000_000)
    parser.add_argument("--parts", default="native,gym", help="which parts to run, in this order")
    parser.add_argument("--out", default="benchmarks/results/soak.json", help="the JSON record")
    parser.add_argument("--plots", help="write soak_<part>.png here")
    parser.add_argument("--sample-s", type=float, default=1.0, help="the RSS sampling thread's period")
    parser.add_argument("--run-dir", help="where the runs' directories go (default: a temporary one, removed)")
    parser.add_argument("--smoke", action="store_true", help="tiny budgets, frequent checkpoints: a quick check")
    parser.add_argument(
        "--evaluate-only",
        action="store_true",
        help="run nothing: evaluate the workers' records kept in --run-dir again (targets, plots, --out)",
    )
    parser.add_argument("--worker", choices=["native", "gym"], help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.native_steps, args.gym_steps = SMOKE["native_steps"], SMOKE["gym_steps"]
    if args.worker:
        worker(args)
        return
    parts = [p for p in args.parts.split(",") if p]
    if args.evaluate_only:
        evaluate_only(parts, args)
        return
    record = run_record(
        benchmark="soak",
        parts=parts,
        smoke=args.smoke,
        native_steps=args.native_steps,
        gym_steps=args.gym_steps,
        warmup_fraction=WARMUP_FRACTION,
        versions=package_versions("kppo", "tensorflow", "keras", "gymnasium"),
    )
    previous = json.loads(Path(args.out).read_text()) if args.out and Path(args.out).is_file() else {}
    record["runs"] = {k: v for k, v in previous.get("runs", {}).items() if k not in parts}
    own_dir = args.run_dir is None
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="kppo-soak-"))
    try:
        for part in parts:
            out = run_dir / f"{part}.json"
            command = [
                sys.executable,
                __file__,
                "--worker",
                part,
                "--worker-out",
                str(out),
                "--run-dir",
                str(run_dir),
                "--native-steps",
                str(args.native_steps),
                "--gym-steps",
                str(args.gym_steps),
                "--sample-s",
                str(args.sample_s),
            ] + (["--smoke"] if args.smoke else [])
            t0 = time.perf_counter()
            done = subprocess.run(command, check=False)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                raise SystemExit(f"{part}: the worker failed (exit {done.returncode})")
            data = json.loads(out.read_text())
            data["process_wall_s"] = wall
            out.write_text(json.dumps(data))  # `--evaluate-only` reads it back
            record["runs"][part] = summarize(part, data, args.plots)
    finally:
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    finish_record(record, args.out)
    if args.out:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
