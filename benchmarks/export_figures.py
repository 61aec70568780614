"""Export figures for the README: artifact size per quantization, single-observation latency, TFLite Micro arena,
and the closed-loop return change of quantized artifacts on Pendulum-v1 (trained with configs/pendulum.yaml).

    python benchmarks/export_figures.py [--episodes 20] [--out bench_out/export]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import kppo

ROOT = Path(__file__).resolve().parents[1]
KIT = """
import json, sys
for name in ("tensorflow", "kppo"):
    sys.modules[name] = None
from export.evaluate import run_episodes
from export.latency import measure
from export.micro_check import check
from export.runtime import Controller
path, episodes, micro = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
c = Controller(path)
out = {"returns": run_episodes(c, "Pendulum-v1", episodes, 1000), **measure(c, 5000)}
if micro:
    out.update(check(path, 300))
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", default="bench_out/export")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = kppo.train(config=kppo.Config.from_yaml(ROOT / "configs" / "pendulum.yaml"), seed=0)
    print(f"trained: eval {result.metrics['eval/mean_returns'][-1]:.1f}")
    rows = []
    for quantize in (None, "float16", "dynamic", "int8"):
        exported = kppo.export(result, out / f"pendulum_{quantize or 'float32'}.tflite", quantize=quantize)
        micro = quantize in (None, "int8")
        run = subprocess.run([sys.executable, "-c", KIT, str(exported.path), str(args.episodes), str(int(micro))],
                             cwd=ROOT, capture_output=True, text=True, check=True)
        kit = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append((quantize or "float32", exported.metadata, kit))
    base = np.mean(rows[0][2]["returns"])
    print("\n| quantization | size bytes | parity max error (rel. to range) | median invoke us | TFLM arena bytes "
          "| closed-loop return (20 ep.) | change vs float32 |")
    print("|---|---|---|---|---|---|---|")
    for name, meta, kit in rows:
        mean = np.mean(kit["returns"])
        arena = kit.get("arena_bytes", "n/a (TFLM rejects)") if name != "float16" else "n/a"
        print(f"| {name} | {meta['size_bytes']:,} | {meta['parity']['max_error']:.2e} | {kit['invoke_us']:.1f} | "
              f"{arena} | {mean:.1f} | {100 * (mean - base) / abs(base):+.1f}% |")


if __name__ == "__main__":
    main()
