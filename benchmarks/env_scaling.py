"""Training steps/s against the number of TF-native environments (CartPole-v1), on whatever devices TensorFlow sees.

    python benchmarks/env_scaling.py                                  # 2,048 ... 65,536 envs, one device
    python benchmarks/env_scaling.py --envs 2048 4096 --distribute mirrored   # all local GPUs

Each size runs in a fresh process: `iterations` training iterations of `steps` steps per env (1 epoch x 4
minibatches, 2x64 networks), one call per iteration; steps/s counts the iterations after the first (compiled) one
and includes one small evaluation round. The table names the device (GPU model from TensorFlow's device details).
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
envs, steps, iterations, distribute = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
gpus = tf.config.list_physical_devices("GPU")
device = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") if gpus else "CPU"
config = kppo.Config(num_envs=envs, num_steps=steps, total_timesteps=envs * steps * iterations, num_epochs=1,
                     num_minibatches=4, eval_freq=1, num_eval_envs=8, iterations_per_call=1, distribute=distribute)
result = kppo.train("CartPole-v1", config, seed=0)
t = result.timings
timed_steps = envs * steps * (iterations - 1)
print(json.dumps({"envs": envs, "device": device, "devices": max(len(gpus), 1), "compile_s": t["compile_s"],
                  "run_s": t["run_s"], "steps_per_s": timed_steps / t["run_s"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[2048, 4096, 8192, 16384, 32768, 65536])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--distribute", choices=("none", "mirrored"), default="none")
    parser.add_argument("--timeout", type=int, default=1200)
    args = parser.parse_args()
    rows = []
    for envs in args.envs:
        out = subprocess.run(
            [sys.executable, "-c", WORKER, str(envs), str(args.steps), str(args.iterations), args.distribute],
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
        if out.returncode != 0:
            failure = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode
            rows.append([f"{envs:,}", f"failed: {failure}", "", "", ""])
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append([f"{r['envs']:,}", r["device"], r["devices"], f"{r['compile_s']:.1f}", f"{r['steps_per_s']:,.0f}"])
    print(harness.machine_header())
    print()
    print(harness.markdown_table(["envs", "device", "devices", "compile s", "steps/s"], rows))


if __name__ == "__main__":
    main()
