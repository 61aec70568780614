"""1 vs N replicas (tf.distribute.MirroredStrategy over logical CPU devices) on the fixed CartPole setting.

    python benchmarks/replicas.py [--timesteps 200000] [--replicas 2]

Each configuration runs in a fresh process (logical devices must be set before TensorFlow starts).
"""

import argparse
import json
import subprocess
import sys

import harness  # benchmarks/ is sys.path[0] for a script

WORKER = """
import json, sys
import kppo
from kppo._tf import tf
replicas, timesteps = int(sys.argv[1]), int(sys.argv[2])
if replicas > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
config = kppo.Config(total_timesteps=timesteps, eval_freq=1)
if replicas > 1:
    config = config.replace(distribute="mirrored", devices=[f"/cpu:{i}" for i in range(replicas)])
result = kppo.train("CartPole-v1", config, seed=0)
t = result.timings
steps = int(result.metrics["train/total_steps"][-1])
final_return = float(result.metrics["eval/mean_returns"][-1])
print(json.dumps({"replicas": replicas, "compile_s": t["compile_s"], "run_s": t["run_s"], "total_s": t["total_s"],
                  "steps_per_s_total": steps / t["total_s"], "final_return": final_return}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=200_000)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for replicas in (1, args.replicas):
        out = subprocess.run(
            [sys.executable, "-c", WORKER, str(replicas), str(args.timesteps)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    columns = [
        ("replicas", "replicas", str),
        ("compile s", "compile_s", 1),
        ("run s", "run_s", 1),
        ("total s", "total_s", 1),
        ("steps/s (end to end)", "steps_per_s_total", 0),
        ("final return", "final_return", 1),
    ]
    print(harness.machine_header())
    print()
    print(harness.side_by_side(rows, columns, [("1 replica's total s / this", "total_s")]))


if __name__ == "__main__":
    main()
