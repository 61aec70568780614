#!/usr/bin/env python
r"""Pixels on a GPU: RL-Zoo's Atari PPO on Pong (configs/pong.yaml) and a 2,048-member population of CNN PPO on
TF-native MinAtar Breakout, prepared for a machine with a GPU (nothing else needs one).

Parts (`--parts`, both by default), each in a fresh interpreter that prints its figures as they come, so a part that
fails, runs out of memory or is killed at its timeout leaves what it had measured and the other part still runs:
  pong     `kppo.train` on configs/pong.yaml (gymnasium PongNoFrameskip-v4 in SB3's AtariWrapper, 4 stacked frames,
           NatureCNN, 8 envs stepped on the host, the update on the GPU; lr and clip annealed over the config's 10M
           steps) until --pong-steps (10M), --pong-minutes of training or its timeout, whichever comes first:
           steps/s of the training calls after the first (evaluation rounds included), wall time, steps done, the
           hours 10M steps take at that rate, and the final evaluation return: `kppo.evaluate_policy` of the policy
           at the end over --pong-eval-episodes whole games on SB3's `make_atari_env` + `VecFrameStack(4)`,
           stochastic actions (RL-Zoo's Atari benchmark, 20.99 for its PPO at 10M steps); also the config's own
           deterministic evaluation rounds (one every 1M steps) that ran.
  minatar  --members (2,048) seeds of benchmarks/minatar_cnn.py's SETTING (SmallCNN, 128 envs x 128 steps per member,
           4 epochs of 8 minibatches; --minatar-envs to change the envs) on "breakout_minatar_gymnax" as one compiled
           program (`kppo.training.runners.population`), calls of SETTING's 4 iterations until --minatar-minutes after
           the first call or its timeout: the members' build time, the first call (tracing, XLA compilation and 4
           iterations) and the steps/s of the calls after it (all members' steps); the learning rate anneals over 10M
           steps a member (gymnax's budget).

Output: one JSON object (date, CPU, TensorFlow, GPUs, GPU memory peak, each part's figures or its error), printed and,
when $OUT is set, written to $OUT/device_pixels.json after each part.

On a GPU machine (sized here for one H200 and a 10-minute limit a command): TensorFlow with its CUDA libraries,
gymnasium, ale-py and opencv must be installed (`pip install -e ".[atari]"`, TensorFlow's CUDA build of the pinned
version: `pip install "tensorflow[and-cuda]==2.21.0"`). From the repository root:

    PYTHONUNBUFFERED=1 timeout 590 python benchmarks/device_pixels.py --pong-timeout 180 --minatar-timeout 390 \
        --minatar-envs 64

Pong then trains until 70 s before its 180 s are up (after imports, building and compilation: tens of thousands of
its 10M steps; the steps/s give the full run's hours) and evaluates in the next 60; MinAtar builds its 2,048 members
(0.1-0.4 s each on a CPU: minutes, the part's largest share), compiles, and trains until its 390 s are nearly up.
64 envs a member, not SETTING's 128: at 128 the rollouts alone hold 2,048 x 128 x 128 observations of 10x10x4
float32 (54 GB) and a minibatch's convolution activations and gradients tens more, near the H200's 139 GB (an
estimate, never measured); drop `--minatar-envs 64` to try SETTING as it is. The full Pong run takes hours:
`python benchmarks/device_pixels.py --parts pong`.

Smoke test (CPU, tiny sizes, both parts):

    .venv/bin/python benchmarks/device_pixels.py --smoke
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
import harness  # benchmarks/ is sys.path[0] for a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PONG_ID = "PongNoFrameskip-v4"
MINATAR_ENV = "breakout_minatar_gymnax"
MINATAR_TIMESTEPS = 10_000_000  # a member's budget, which the linear learning rate anneals over (gymnax's)
EVAL_RESERVE_S = 60.0  # of Pong's timeout, kept for the final evaluation
#: --smoke: a few iterations of each part on CPU.
SMOKE_PONG = dict(num_envs=2, num_steps=16, num_minibatches=2, num_epochs=1, total_timesteps=96, num_eval_envs=1)
SMOKE_PONG_STEPS = 64  # 2 of the 3 iterations: stopped before the (one) evaluation round
SMOKE_MINATAR = dict(num_envs=4, num_steps=8, num_minibatches=2, num_epochs=1, num_eval_envs=2, jit_rollout=False)


def emit(figures: dict) -> None:
    """The part's figures so far, as the last line of its stdout (the driver keeps the last one)."""
    print(json.dumps(figures), flush=True)


def devices() -> dict:
    from kppo._tf import tf

    gpus = tf.config.list_physical_devices("GPU")
    names = [tf.config.experimental.get_device_details(g).get("device_name", g.name) for g in gpus]
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30 if gpus else None
    return {"tensorflow": tf.__version__, "gpus": names, "gpu_peak_gib": None if peak is None else round(peak, 2)}


def pong(args: argparse.Namespace, deadline: float) -> dict:
    """configs/pong.yaml until --pong-steps, --pong-minutes or `deadline` (less the evaluation's reserve); then the
    final evaluation."""
    import numpy as np

    import kppo

    config = kppo.Config.from_yaml(ROOT / "configs" / "pong.yaml")
    config = config.replace(**SMOKE_PONG, eval_freq=1) if args.smoke else config
    config = config.replace(vectorization=args.pong_vectorization)
    budget = SMOKE_PONG_STEPS if args.smoke else args.pong_steps  # the schedules still anneal over total_timesteps
    stop_at = [deadline - EVAL_RESERVE_S]
    calls: list[tuple[float, int]] = []  # (time, steps so far) after every training call: one rollout each

    def progress(steps: int) -> None:
        calls.append((time.perf_counter(), steps))
        if len(calls) == 1 and args.pong_minutes is not None:  # minutes of training after the first (compiled) call
            stop_at[0] = min(stop_at[0], time.time() + 60 * args.pong_minutes)

    def should_stop() -> bool:
        return time.time() > stop_at[0] or (budget < config.total_timesteps and bool(calls) and calls[-1][1] >= budget)

    start = time.perf_counter()
    result = kppo.train(config=config, on_progress=progress, should_stop=should_stop)
    trained = time.perf_counter()
    (t0, s0), (t1, s1) = calls[0], calls[-1]
    rate = (s1 - s0) / (t1 - t0) if len(calls) > 1 else None
    figures = {
        "config": "configs/pong.yaml",
        "vectorization": config.vectorization,
        "steps": int(s1),
        "of_steps": int(config.total_timesteps),
        "stopped_early": bool(result.interrupted),
        "train_wall_s": round(trained - start, 1),
        "compile_s": round(result.timings["compile_s"], 1),
        "steps_per_s": None if rate is None else round(rate, 1),
        "hours_for_10m_steps": None if rate is None else round(1e7 / rate / 3600, 2),
        "round_eval_returns": [round(float(x), 2) for x in np.atleast_1d(result.metrics.get("eval/mean_returns", []))],
    }
    emit(figures)
    env = kppo.VecFrameStack(kppo.make_atari_env(PONG_ID, n_envs=min(8, args.pong_eval_episodes), seed=1), 4)
    returns, lengths = kppo.evaluate_policy(
        result.policy, env, n_eval_episodes=args.pong_eval_episodes, deterministic=False, return_episode_rewards=True
    )
    env.close()
    return {
        **figures,
        "final_eval_return": round(float(np.mean(returns)), 2),
        "final_eval_returns": [round(float(r), 1) for r in returns],
        "final_eval_frames": [int(n) for n in lengths],  # the Monitor under the AtariWrapper counts frames
        "eval_s": round(time.perf_counter() - trained, 1),
    }


def minatar(args: argparse.Namespace, deadline: float) -> dict:
    """--members seeds of minatar_cnn.py's SETTING as one population: build, first call, steps/s of the calls after
    it, until --minatar-minutes after the first call or `deadline`."""
    import numpy as np

    import kppo
    from benchmarks.minatar_cnn import SETTING
    from kppo.training.runners import make_population_runner

    setting = {**SETTING, "num_envs": args.minatar_envs or SETTING["num_envs"]}
    setting.update(SMOKE_MINATAR if args.smoke else {})
    base = kppo.Config(**setting, total_timesteps=MINATAR_TIMESTEPS, eval_freq=1)
    per_call = base.iterations_per_call
    steps_per_call = per_call * base.rollout_size * args.members
    start = time.perf_counter()
    runner, _ = make_population_runner(MINATAR_ENV, [base.replace(seed=seed) for seed in range(args.members)])
    built = time.perf_counter()
    figures: dict = {
        "env": MINATAR_ENV,
        "members": args.members,
        "setting": setting,
        "build_s": round(built - start, 1),
    }
    emit(figures)
    state, times = runner.state, [built]
    stop_at = deadline
    while len(times) < 3 or time.time() + (times[-1] - times[-2]) < stop_at:  # 2 calls at least; none cut short
        result = runner.run_iterations(state, per_call)
        state = result.state
        losses = np.asarray(result.diagnostics.total_loss)  # waits for the call to finish
        times.append(time.perf_counter())
        if len(times) == 2:
            stop_at = min(deadline, time.time() + 60 * args.minatar_minutes)
        later = len(times) - 2  # calls after the first
        figures.update(
            first_call_s=round(times[1] - built, 1),
            calls=len(times) - 1,
            steps=(len(times) - 1) * steps_per_call,
            steps_per_s=round(later * steps_per_call / (times[-1] - times[1])) if later else None,
            finite_losses=bool(np.all(np.isfinite(losses))),
        )
        emit(figures)
    return figures


PARTS = {"pong": pong, "minatar": minatar}


def worker(args: argparse.Namespace) -> None:
    """One part in this interpreter; an error is reported as its type and first line (the other part still runs)."""
    deadline = args.deadline if args.deadline is not None else float("inf")
    try:
        emit({**PARTS[args.worker](args, deadline), **devices()})
    except Exception as err:  # out of GPU memory, a missing package
        emit({"error": f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:500]}"})


def run_part(part: str, timeout: float | None) -> dict:
    """The part's last JSON line; on a timeout, what it printed before it was killed."""
    start = time.perf_counter()
    command = [sys.executable, __file__, *sys.argv[1:], "--worker", part]
    if timeout is not None:
        command += ["--deadline", str(time.time() + timeout - 10)]  # 10 s to print before the kill
    killed, returncode = False, None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        stdout, stderr, returncode = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        stdout, stderr, killed = _text(expired.stdout), _text(expired.stderr), True
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    figures = json.loads(lines[-1]) if lines else {}
    if killed:
        figures["error"] = f"killed at its timeout of {timeout:.0f} s; the figures are those printed before"
    elif not lines:
        figures["error"] = f"exit {returncode}: {stderr.strip().splitlines()[-1:] if stderr.strip() else ''}"
    figures["process_s"] = round(time.perf_counter() - start, 1)
    return figures


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="pong,minatar", help="comma list of pong, minatar")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU")
    parser.add_argument("--pong-steps", type=int, default=10_000_000, help="stop after this many steps")
    parser.add_argument("--pong-minutes", type=float, help="minutes of training after the first call (default: all)")
    parser.add_argument("--pong-timeout", type=float, help="seconds for the whole part (training stops 60 s before)")
    parser.add_argument("--pong-eval-episodes", type=int, default=8)
    parser.add_argument("--pong-vectorization", default="async", help="'async' (a process per env) or 'sync'")
    parser.add_argument("--members", type=int, default=2048)
    parser.add_argument("--minatar-envs", type=int, help="envs a member (default: SETTING's 128)")
    parser.add_argument("--minatar-minutes", type=float, default=2.5, help="minutes of calls after the first")
    parser.add_argument("--minatar-timeout", type=float, help="seconds for the whole part")
    parser.add_argument("--worker", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)  # time.time() the worker must be done by
    args = parser.parse_args()
    if args.smoke:
        # 2 evaluation envs: a batch of 2 frames acts through TensorFlow, 1 through numpy (slower here, see
        # kppo.agent.numpy_conv's rule)
        args.pong_eval_episodes, args.pong_vectorization, args.members, args.minatar_minutes = 2, "sync", 2, 0.0
    if args.worker:
        worker(args)
        return 0
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"--parts: expected names among {sorted(PARTS)}, got {unknown}")
    report: dict = harness.machine()
    print(harness.machine_header(), flush=True)
    out_dir = os.environ.get("OUT")
    for part in parts:
        report[part] = run_part(part, args.pong_timeout if part == "pong" else args.minatar_timeout)
        if out_dir:
            Path(out_dir, "device_pixels.json").write_text(json.dumps(report, indent=2))
        print(json.dumps({part: report[part]}), flush=True)
    return 1 if any("error" in report[p] for p in parts) else 0


if __name__ == "__main__":
    sys.exit(main())
