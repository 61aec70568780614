#!/usr/bin/env python
"""Image policies, training throughput side by side: kppo vs Stable-Baselines3 (torch), one run, one page of tables.

Settings (host path: gymnasium envs stepped in Python, DummyVecEnv / SyncVectorEnv on both sides):
  minatar  MinAtar Breakout ("MinAtar/Breakout-v1", the minatar package's gymnasium env, its bool observations cast
           to float32 Box(0, 1) by the same small ObservationWrapper on both sides), 8 envs (`make_vec_env`),
           PPO("CnnPolicy", n_steps=128, batch_size=256, n_epochs=4, policy_kwargs=dict(net_arch=[],
           normalize_images=False)); kppo picks its SmallCNN (Conv2D(16, 3x3, stride 1, ReLU, valid) -> flatten ->
           Dense(128, ReLU)) for the 10x10 grid, SB3 gets the same network as a torch `features_extractor_class`
           (`TorchSmallCNN` in cnn_settings.py, features_dim=128). Measured: 8 rollouts (8,192 steps).
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
import statistics
import subprocess
import sys
import time

import harness  # benchmarks/ is sys.path[0] for a script
from cnn_settings import (
    FRAMEWORKS,
    N_STEPS,
    PONG_ID,
    REPO_ROOT,
    SETTINGS,
    fmt,
    load_average,
    median_of,
    ratio,
    rollout_bytes,
    rollout_steps,
)
from cnn_workers import WORKERS


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
    ]
    body: list[list[str]] = []

    def row(label, key, digits=0, invert=False):
        a, b = median_of(kp, key), median_of(sb, key)
        body.append([label, fmt(a, digits), fmt(b, digits), ratio(b, a) if invert else ratio(a, b)])

    row("**env steps/s (median)**", "steps_per_s")
    for name, runs_ in (("kppo", kp), ("SB3", sb)):
        values = ", ".join(f"{r['steps_per_s']:,.0f}" for r in runs_)
        body.append(
            [f"steps/s per repeat, {name}", values if name == "kppo" else "", values if name == "SB3" else "", ""]
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
        body.append([label, fmt(a, 2), fmt(b, 2), ""])
    a = _update_median(kp)
    b = _update_median(sb)
    body.append(["update: learn - rollout (s)", fmt(a, 2), fmt(b, 2), f"{ratio(b, a)} faster"])
    if kp:
        xla = "yes" if kp[0].get("update_xla") else "no"
        body.append([f"kppo update XLA-compiled ({kp[0].get('gradient_steps')} gradient steps an update)", xla, "", ""])
    threads = [(r[0]["threads"] if r else None) for r in (kp, sb)]
    cells = ["" if t is None else f"{t.get('intra_op')}, {t.get('inter_op')}" for t in threads]
    body.append(["threads (intra-op, inter-op; 0 = TensorFlow's default)", *cells, ""])
    loads = [r["load_before"] for r in kp + sb if r.get("load_before") is not None]
    if loads:
        body.append(["1-min load average before the workers (min-max)", f"{min(loads):.1f}-{max(loads):.1f}", "", ""])
    return "\n".join(lines) + "\n" + harness.markdown_table(["measure", "kppo", "SB3", "kppo / SB3"], body, "lrrr")


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
    ]
    header = [
        "setting",
        "runs",
        "kppo steps/s",
        "SB3 steps/s",
        "kppo / SB3",
        "kppo: rollout (env, CNN, finish) / update",
        "SB3: rollout (env, policy.forward) / update",
    ]
    body = []
    for setting, by_framework in runs.items():
        kp, sb = by_framework.get("kppo", []), by_framework.get("sb3", [])
        if not kp and not sb:
            continue
        a, b = median_of(kp, "steps_per_s"), median_of(sb, "steps_per_s")
        splits = []
        for r, parts in ((kp, ("env_step", "acting_cnn", "finish")), (sb, ("env_step", "acting_policy"))):
            inner = ", ".join(fmt(_phase_median(r, p), 2) for p in parts)
            splits.append(f"{fmt(_phase_median(r, 'rollout'), 2)} ({inner}) / {fmt(_update_median(r), 2)}" if r else "")
        body.append([SETTINGS[setting]["label"], f"{len(kp)}, {len(sb)}", fmt(a), fmt(b), ratio(a, b), *splits])
    return "\n".join(lines) + "\n" + harness.markdown_table(header, body, "lrrrrrr")


def memory_table(runs: list[dict]) -> str:
    lines = [
        f"**kppo, {PONG_ID}, memory**: a fresh interpreter builds the Pong setting and runs `learn` of one rollout "
        f"(n_steps={N_STEPS}); peak RSS (ru_maxrss)",
        "",
    ]
    header = [
        "envs",
        "gradient steps",
        "update XLA",
        "RSS after setup (MiB)",
        "peak RSS (MiB)",
        "one rollout of uint8 obs (MB)",
        "as float32 (MB)",
        "learn (s): rollout (finish) / update",
    ]
    body = []
    for r in runs:
        n, phases = r["n_envs"], r.get("phases", {})
        u8 = rollout_bytes(n, N_STEPS, (84, 84, 4), 1) / 1e6
        split = ""
        if "rollout" in phases:
            split = (
                f"{phases['rollout']:.1f} ({phases.get('finish', 0.0):.1f}) / {r['learn_s'] - phases['rollout']:.1f}"
            )
        body.append(
            [
                n,
                r["gradient_steps"],
                "yes" if r["update_xla"] else "no",
                f"{r['rss_after_setup_mb']:,.0f}",
                f"{r['peak_rss_mb']:,.0f}",
                f"{u8:,.0f}",
                f"{4 * u8:,.0f}",
                f"{r['learn_s']:.1f}: {split}",
            ]
        )
    return "\n".join(lines) + "\n" + harness.markdown_table(header, body, "rrlrrrrr")


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
    ]
    header = [
        "extractor",
        "observation",
        "batch (envs)",
        *(f"compiled TF (µs), {label}" for label in labels),
        *(f"numpy im2col (µs), {label}" for label in labels),
        "fastest numpy / fastest compiled",
        "max abs diff",
    ]
    body = []
    for i, row in enumerate(results[0]["rows"]):
        rows = [r["rows"][i] for r in results]
        compiled, numpy_ = [r["compiled_us"] for r in rows], [r["numpy_us"] for r in rows]
        body.append(
            [
                row["extractor"],
                row["observation"],
                row["batch"],
                *(f"{v:,.0f}" for v in compiled + numpy_),
                f"{min(numpy_) / min(compiled):.2f}x",
                f"{max(r['max_abs_diff'] for r in rows):.1e}",
            ]
        )
    return "\n".join(lines) + "\n" + harness.markdown_table(header, body, "llr" + "r" * (2 * len(results) + 2))


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


def runs_of(*by_setting: dict) -> list[dict]:
    """Every worker's result in `{setting: {framework: [result, ...]}}` tables."""
    return [r for table in by_setting for runs in table.values() for results in runs.values() for r in results]


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

    peers = {k: v for r in runs_of(runs, one_thread) if r.get("framework") == "sb3" for k, v in r["versions"].items()}
    print(
        f"\n{harness.machine_header(peers, 'ale-py', 'minatar')}\n"
        f"1-min load average {load_start:.1f} at the start; "
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
        result = dict(harness.machine(), runs=runs, one_thread=one_thread)
        with open(args.json, "w") as f:
            json.dump(dict(result, memory=memory, acting=acting), f, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
