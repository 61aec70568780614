#!/usr/bin/env python
"""The long run: a 10M-step TF-native run and a 2M-step gymnasium run, watched for drift.

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


from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import finish_record, package_versions, run_record
from soak_record import COLUMNS, GYM_CHECKPOINT_STEPS, GYM_EVAL_STEPS, NATIVE_CHECKPOINT_EVERY, gym_part, native_part
from soak_verdict import WARMUP_FRACTION, evaluate, plot, print_summary

SERIES_POINTS = 600  # at most this many rows of each series go into the JSON (evenly thinned)
SMOKE = {
    "native_steps": 163_840,
    "gym_steps": 20_480,
    "native_checkpoint_every": 16,
    "gym_checkpoint_steps": 4_096,
    "gym_eval_steps": 4_096,
}


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
