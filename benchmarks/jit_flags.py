"""Measures the XLA flags: compile time and time per training iteration for jit_rollout x jit_update.

    python benchmarks/jit_flags.py [--env CartPole-v1] [--iterations 40]

Each combination runs in a fresh subprocess (so compile caches do not leak between them).
"""

import argparse
import json
import subprocess
import sys

import harness  # benchmarks/ is sys.path[0] for a script

WORKER = """
import json, sys, time
import kppo
from kppo._tf import tf
from kppo.training.runners.native import build_native, make_iterations_fn
from kppo.training.runners.settings import resolve
env, jit_rollout, jit_update, iterations = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4])
spec = resolve(kppo.Config(env=env, jit_rollout=jit_rollout, jit_update=jit_update))
run = build_native(env, spec)
step = make_iterations_fn(run.train_env, run.agent, spec)
t0 = time.perf_counter()
state, diag = step(run.state, tf.constant(1)); float(diag.total_loss)
compile_s = time.perf_counter() - t0
t0 = time.perf_counter()
state, diag = step(state, tf.constant(iterations)); float(diag.total_loss)
per_iteration = (time.perf_counter() - t0) / iterations
print(json.dumps(dict(jit_rollout=jit_rollout, jit_update=jit_update, compile_s=compile_s,
                      ms_per_iteration=1e3 * per_iteration, steps_per_s=config.rollout_size / per_iteration)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for repeat in range(args.repeats):
        combos = [(r, u) for r in (1, 0) for u in (0, 1)]
        for jit_rollout, jit_update in combos if repeat % 2 == 0 else combos[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", WORKER, args.env, str(jit_rollout), str(jit_update), str(args.iterations)],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{args.env}, best of {args.repeats}\n{harness.machine_header()}\n")
    cells = []
    for r, u in [(True, False), (True, True), (False, False), (False, True)]:
        runs = [x for x in rows if x["jit_rollout"] == r and x["jit_update"] == u]
        best = min(runs, key=lambda x: x["ms_per_iteration"])
        compile_s = min(x["compile_s"] for x in runs)
        cells.append([r, u, f"{compile_s:.2f}", f"{best['ms_per_iteration']:.1f}", f"{best['steps_per_s']:,.0f}"])
    header = ["jit_rollout", "jit_update", "compile s (first call)", "ms / iteration", "steps/s"]
    print(harness.markdown_table(header, cells))


if __name__ == "__main__":
    main()
