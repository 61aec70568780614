"""Image-policy export figures: artifact size (float32, int8), LiteRT microseconds per frame and TensorFlow Lite
for Microcontrollers' arena and microseconds, for a SmallCNN on MinAtar-like 10x10x4 frames and a NatureCNN on
84x84x4 frames (kppo.PPO "CnnPolicy", trained briefly on a task whose frames look like the input they stand for).

Targets: MinAtar-CNN int8 <= 160 KB and <= 50 us/frame; NatureCNN int8 <= 1.8 MB and
<= 2 ms/frame (LiteRT, one thread, its default XNNPACK delegate). TFLite Micro's microseconds are its portable
reference kernels on this host CPU, not a microcontroller's figure.

    python benchmarks/image_export.py [--task minatar nature] [--steps 20000] [--out bench_out/image_export]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

import kppo
from kppo.exporter.calibration import record_observations
from kppo.exporter.runner import TFLiteRunner
import harness  # benchmarks/ is sys.path[0] for a script

ROOT = Path(__file__).resolve().parents[1]
KIT = """
import json, sys
for name in ("tensorflow", "keras", "kppo"):
    sys.modules[name] = None
from kppo_runtime.latency import measure
from kppo_runtime.micro_check import check
from kppo_runtime.runtime import Controller
if __name__ == "__main__":
    path, observations = sys.argv[1], int(sys.argv[2])
    out = measure(Controller(path), 2000)
    out.update(check(path, observations))
    print(json.dumps(out))
"""
TASKS = {
    # name: (frame shape, kind, objects per channel, TFLite Micro check observations)
    "minatar": ((10, 10, 4), "sparse", 3, 300),
    "nature": ((84, 84, 4), "blocks", 6, 20),
}
TARGETS = {"minatar": (160_000, 50.0), "nature": (1_800_000, 2000.0)}


class Quadrants(gym.Env):
    """Reward 1 when the action (Discrete(4)) names the quadrant holding the most lit cells of channel 0. `sparse`:
    MinAtar's look (cells 0 or 255, a few objects per channel); `blocks`: an Atari-like frame stack (4x4-pixel
    objects of random brightness on a dark, noisy background)."""

    def __init__(self, shape=(10, 10, 4), kind="sparse", objects=3):
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.shape, self.kind, self.objects = shape, kind, objects

    def _obs(self):
        rng = self.np_random
        h, w, c = self.shape
        size = 1 if self.kind == "sparse" else 4
        frame = np.zeros(self.shape, np.int64) if self.kind == "sparse" else rng.integers(0, 40, self.shape)
        self.target = int(rng.integers(4))
        for channel in range(c):
            for i in range(self.objects * (2 if channel == 0 else 1)):
                quadrant = self.target if (channel == 0 and i % 2 == 0) else int(rng.integers(4))
                y = (quadrant // 2) * (h // 2) + int(rng.integers(0, h // 2 - size + 1))
                x = (quadrant % 2) * (w // 2) + int(rng.integers(0, w // 2 - size + 1))
                frame[y : y + size, x : x + size, channel] = 255 if self.kind == "sparse" else rng.integers(120, 256)
        return frame.astype(np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(action == self.target)
        self.t += 1
        return self._obs(), reward, False, self.t >= 25, {}


def run_task(name: str, steps: int, out: Path) -> list[dict]:
    shape, kind, objects, micro_obs = TASKS[name]

    def make():
        return Quadrants(shape, kind, objects)

    model = kppo.PPO(
        "CnnPolicy",
        kppo.make_vec_env(make, n_envs=8, seed=0),
        n_steps=64,
        batch_size=128,
        n_epochs=4,
        learning_rate=5e-4,
        seed=0,
    )
    if steps:
        model.learn(steps)
    policy = model._get_policy()
    mean_return, _ = kppo.evaluate_policy(model, make(), n_eval_episodes=20, warn=False)
    frames = record_observations(policy, make, 1000, seed=10_000)  # not the calibration's episodes
    want = policy.get_action(frames)
    print(
        f"{name}: {type(policy.actor.extractor.extractor).__name__} on {shape}, {steps} steps, return {mean_return}/25"
    )
    rows = []
    for quantize in (None, "int8"):
        exported = kppo.export(
            model, out / f"{name}_{quantize or 'float32'}.tflite", quantize=quantize, calibration_env=make
        )
        agree = float(np.mean(TFLiteRunner(exported.path)(frames) == want))
        kit = subprocess.run(
            [sys.executable, "-c", KIT, str(exported.path), str(micro_obs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        figures = json.loads(kit.stdout.strip().splitlines()[-1])
        rows.append(
            {
                "task": name,
                "quantization": quantize or "float32",
                "size": exported.metadata["size_bytes"],
                "agree": agree,
                "return": mean_return,
                **figures,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--steps", type=int, default=20_000, help="training steps per task (0: untrained)")
    parser.add_argument("--out", default="bench_out/image_export")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [row for name in args.task for row in run_task(name, args.steps, out)]
    print(f"\n{harness.machine_header(None, 'ai-edge-litert')}\n")
    cells = []
    for row in rows:
        size, us = TARGETS[row["task"]]
        target = ""
        if row["quantization"] == "int8":
            ok = row["size"] <= size and row["invoke_us"] <= us
            target = f"<= {size:,} B, <= {us:g} us: {'met' if ok else 'MISSED'}"
        cells.append(
            [
                row["task"],
                row["quantization"],
                f"{row['size']:,}",
                f"{row['invoke_us']:.1f}",
                f"{row['arena_bytes']:,}",
                f"{row['micro_invoke_us']:,.0f}",
                f"{100 * row['agree']:.1f}%",
                target,
            ]
        )
    header = ["task", "quantization", "size bytes", "LiteRT us/frame (invoke)", "TFLM arena bytes", "TFLM us/frame"]
    print(harness.markdown_table([*header, "actions = float policy (1,000 own frames)", "target (int8)"], cells))
    (out / "figures.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
