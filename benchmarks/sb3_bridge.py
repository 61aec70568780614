"""SB3 zip -> int8 artifact: the wall time of `kppo.PPO.load` + VecNormalize + `kppo.export(quantize="int8")`, the
artifact's size, the smallest TFLite Micro arena that runs it (`kppo_runtime.micro_check.check`, which also compares
TFLite Micro's actions with LiteRT's), and its agreement with SB3's deterministic actions over the 1,000 observations
recorded with each save (`tests/fixtures/sb3/saved`, SB3 2.9.2). Prints one markdown row per save, with the date, CPU
model and load. Needs tflite-micro (`pip install "./export[micro]"`).

    python benchmarks/sb3_bridge.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

import kppo
from kppo.exporter.runner import TFLiteRunner
from kppo_runtime.micro_check import check
import harness  # benchmarks/ is sys.path[0] for a script

SAVED = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sb3" / "saved"


def row(case: str, out: Path) -> list[str]:
    data = dict(np.load(SAVED / f"{case}.npz"))
    raw = data["obs"].astype(np.float32)
    start = time.perf_counter()
    model = kppo.PPO.load(SAVED / f"{case}.zip")
    if (SAVED / f"{case}.pkl").is_file():
        model.use_vec_normalize(SAVED / f"{case}.pkl")
    exported = kppo.export(model, out / f"{case}.tflite", quantize="int8", representative_obs=raw)
    seconds = time.perf_counter() - start
    micro = check(exported.path)
    runner = TFLiteRunner(exported.path)
    got = np.concatenate([np.asarray(runner(raw[i : i + 1])).reshape(1, -1) for i in range(len(raw))])
    want = data["actions"].reshape(len(raw), -1)
    if want.dtype.kind == "f":
        agreement = f"max abs error {np.abs(got - want).max():.1e} (action range 4)"
    else:
        agreement = f"{np.mean(np.all(got == want, axis=1)):.1%} equal"
    return [
        case,
        f"{seconds:.1f} s",
        f"{exported.metadata['size_bytes']:,} B",
        f"{micro['arena_bytes']:,} B (Micro vs LiteRT max error {micro['max_abs_error_vs_litert']:.1e})",
        f"{agreement} over {len(raw)}",
    ]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        rows = [row(case, Path(folder)) for case in ("pendulum_vecnorm", "cartpole")]
    print(harness.machine_header())
    print()
    header = ["SB3 save", "zip -> int8 artifact", "size", "TFLite Micro arena", "int8 vs SB3's actions"]
    print(harness.markdown_table(header, rows))


if __name__ == "__main__":
    main()
