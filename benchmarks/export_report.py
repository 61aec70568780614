"""Closed-loop quality reports for every policy kind x precision: each kind trained briefly on a real gymnasium env,
exported as float32, float16, dynamic and int8 TFLite, and each artifact reported by `kppo.exporter.report` (the
float policy and the artifact in LiteRT over the same 20 seeded deterministic episodes, 95% intervals, the actions'
agreement on the artifact's states, size, TFLite Micro's arena and the median invoke). The TFLite Micro int8 row is
the int8 artifact playing the same episodes in TFLite Micro (`kppo.exporter.micro_loop`): its return, its
agreement with the float policy, its arena and its invoke on this host (reference kernels).

    python benchmarks/export_report.py [--kinds mlp gsde ...] [--episodes 20] [--out bench_out/export_report]

`--train-export RUN_DIR` measures instead what the report adds to the export at the end of `kppo train` (on the
run `kppo train --out RUN_DIR` wrote): `kppo.export` and `kppo.exporter.deploy.export_checked` of its agent, held
in memory as the command holds its result, alternately, four times each; the medians of the last three.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import kppo
from kppo.exporter.artifact import resolve_source
from kppo.exporter.report import make_report

import harness  # benchmarks/ is sys.path[0] for a script

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = (None, "float16", "dynamic", "int8")


class Targets(gym.Env):
    """Box(0, 1, (6,)) observations; MultiDiscrete([3, 4]) actions; reward -|a - the target the first two
    observations name|, 20 steps an episode."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (6,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 4])

    def _obs(self):
        self.obs = self.np_random.random(6).astype(np.float32)
        return self.obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        target = np.minimum((self.obs[:2] * [3, 4]).astype(int), [2, 3])
        reward = -float(np.abs(np.asarray(action) - target).sum())
        self.t += 1
        return self._obs(), reward, False, self.t >= 20, {}


class Reach(gym.Env):
    """A Dict observation {"position": Box(2), "goal": Box(2)}; Discrete(5) moves (stay, +-x, +-y by 0.1); reward
    minus the distance to the goal, 30 steps an episode."""

    MOVES = np.float32([[0, 0], [0.1, 0], [-0.1, 0], [0, 0.1], [0, -0.1]])

    def __init__(self):
        box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"position": box, "goal": box})
        self.action_space = gym.spaces.Discrete(5)

    def _obs(self):
        return {"position": self.position.copy(), "goal": self.goal.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.position = np.clip(self.position + self.MOVES[int(action)], -1, 1).astype(np.float32)
        self.t += 1
        return self._obs(), -float(np.linalg.norm(self.position - self.goal)), False, self.t >= 30, {}


def _bench(name: str):
    """Another benchmark script's module (its settings and envs)."""
    spec = importlib.util.spec_from_file_location(f"_kppo_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _quadrants():
    image = _bench("image_export")
    shape, kind, objects, _ = image.TASKS["minatar"]
    return lambda: image.Quadrants(shape, kind, objects)


SMALL = dict(n_steps=64, batch_size=128, n_epochs=4, seed=0)


def kinds():
    """kind -> (what it is, how to train it, the report's env)."""
    taxi = _bench("action_masks")
    quadrants = _quadrants()
    return {
        "mlp": (
            "MLP (CartPole-v1, PPO MlpPolicy, 50k steps)",
            lambda: kppo.PPO("MlpPolicy", kppo.make_vec_env("CartPole-v1", n_envs=8, seed=0), **SMALL).learn(50_000),
            "CartPole-v1",
        ),
        "gsde": (
            "gSDE (Pendulum-v1, PPO use_sde, 30k steps)",
            lambda: kppo.PPO(
                "MlpPolicy", kppo.make_vec_env("Pendulum-v1", n_envs=8, seed=0), use_sde=True, **SMALL
            ).learn(30_000),
            "Pendulum-v1",
        ),
        "cnn": (
            "CNN uint8 (10x10x4 frames, PPO CnnPolicy, 20k steps)",
            lambda: kppo.PPO("CnnPolicy", kppo.make_vec_env(quadrants, n_envs=8, seed=0), **SMALL).learn(20_000),
            quadrants,
        ),
        "lstm": (
            "LSTM (CartPole-v1, RecurrentPPO MlpLstmPolicy 32, 30k steps)",
            lambda: kppo.RecurrentPPO(
                "MlpLstmPolicy",
                kppo.make_vec_env("CartPole-v1", n_envs=8, seed=0),
                policy_kwargs=dict(lstm_hidden_size=32),
                **SMALL,
            ).learn(30_000),
            "CartPole-v1",
        ),
        "masked": (
            f"masked ({taxi.ENV_ID}, MaskablePPO, 100k steps)",
            lambda: kppo.MaskablePPO(
                "MlpPolicy", kppo.make_vec_env(taxi.ENV_ID, n_envs=8, seed=0), seed=0, **taxi.PPO_ARGS
            ).learn(100_000),
            taxi.ENV_ID,
        ),
        "multidiscrete": (
            "MultiDiscrete([3, 4]) (a target task, PPO, 30k steps)",
            lambda: kppo.PPO("MlpPolicy", kppo.make_vec_env(Targets, n_envs=8, seed=0), **SMALL).learn(30_000),
            Targets,
        ),
        "dict": (
            "Dict observation (a reach task, PPO MultiInputPolicy, 30k steps)",
            lambda: kppo.PPO("MultiInputPolicy", kppo.make_vec_env(Reach, n_envs=8, seed=0), **SMALL).learn(30_000),
            Reach,
        ),
    }


def run_kind(name: str, label: str, train, env, episodes: int, out: Path) -> list[dict]:
    start = time.perf_counter()
    model = train()
    print(f"{name}: trained in {time.perf_counter() - start:.0f} s", flush=True)
    policy = resolve_source(model)[0]
    rows = []
    for quantize in PRECISIONS:
        calibration = {"calibration_env": env} if quantize == "int8" else {}
        exported = kppo.export(model, out / f"{name}_{quantize or 'float32'}.tflite", quantize=quantize, **calibration)
        report = make_report(exported.path, policy, exported.metadata, env, episodes)
        report["parity_max_error"] = exported.metadata["parity"]["max_error"]
        rows.append({"kind": name, "label": label, "precision": quantize or "float32", "report": report})
        print(f"  {quantize or 'float32'}: {report['closed_loop']['artifact']['mean']:.2f}", flush=True)
    rows.append({"kind": name, "label": label, "precision": "TFLM int8", "report": rows[-1]["report"]})
    return rows


def _agreement(loop: dict) -> str:
    agreement = loop["agreement"]
    if "equal" in agreement:
        return f"{agreement['equal']:.1%} equal"
    return f"max err {agreement['max_error']:.2%}"


def cells(row: dict) -> list[str]:
    report = row["report"]
    loop = report["closed_loop"]
    f, a = loop["float"], loop["artifact"]
    change = (a["mean"] - f["mean"]) / abs(f["mean"]) if f["mean"] else 0.0
    micro = report["tflite_micro"]
    arena = "rejected" if micro["arena_used_bytes"] is None else f"{micro['arena_used_bytes']:,}"
    if row["precision"] == "TFLM int8":
        own = micro.get("closed_loop") or {}
        if micro["arena_used_bytes"] is None or "artifact" not in own:
            return [row["kind"], "TFLM int8", "", "", "", micro.get("error", own.get("error", "")), "", "", ""]
        m = own["artifact"]
        change = (m["mean"] - f["mean"]) / abs(f["mean"]) if f["mean"] else 0.0
        return [
            row["kind"],
            "TFLM int8",
            f"{f['mean']:.1f} ± {f['half_width']:.1f}",
            f"{m['mean']:.1f} ± {m['half_width']:.1f}",
            f"{change:+.1%}" + (" degraded" if own["degraded"] else ""),
            _agreement(own),
            "",
            arena,
            f"{micro['invoke_us']:.1f}",
        ]
    return [
        row["kind"],
        row["precision"],
        f"{f['mean']:.1f} ± {f['half_width']:.1f}",
        f"{a['mean']:.1f} ± {a['half_width']:.1f}",
        f"{change:+.1%}" + (" degraded" if loop["degraded"] else ""),
        _agreement(loop),
        f"{report['size_bytes']:,}",
        arena,
        f"{report['latency']['median_invoke_us']:.1f}",
    ]


def train_export(run: Path, out: Path) -> None:
    from kppo.training.agents import load_agent
    from kppo.exporter.deploy import export_checked

    source = load_agent(run / "agent")
    plain, checked = [], []
    for _ in range(4):
        start = time.perf_counter()
        kppo.export(source, out / "plain.tflite")
        plain.append(time.perf_counter() - start)
        start = time.perf_counter()
        export_checked(source, out / "checked.tflite", export_fn=kppo.export, micro_loop=False)
        checked.append(time.perf_counter() - start)
    cells = [
        ["kppo.export", f"{np.median(plain[1:]):.2f}", ""],
        [
            "export_checked (with the report)",
            f"{np.median(checked[1:]):.2f}",
            f"{np.median(checked[1:]) - np.median(plain[1:]):+.2f}",
        ],
    ]
    print(f"\n{harness.machine_header(None, 'ai-edge-litert', 'tflite-micro')}\n")
    print(harness.markdown_table(["export at the end of kppo train", "median s", "added s"], cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=None)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", default="bench_out/export_report")
    parser.add_argument("--train-export", metavar="RUN_DIR", help="time the report at the end of kppo train")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.train_export:
        train_export(Path(args.train_export), out)
        return
    table = kinds()
    rows = []
    for name in args.kinds or list(table):
        label, train, env = table[name]
        rows += run_kind(name, label, train, env, args.episodes, out)
        (out / "rows.json").write_text(json.dumps(rows, indent=1, default=str))
    header = ["kind", "precision", "float return (95% CI)", "artifact return (95% CI)", "change", "actions"]
    header += ["size B", "TFLM arena B", "invoke µs"]
    print(f"\n{harness.machine_header(None, 'ai-edge-litert', 'tflite-micro')}\n")
    print("\n".join(f"- {name}: {table[name][0]}" for name in (args.kinds or list(table))))
    print()
    print(harness.markdown_table(header, [cells(row) for row in rows]))


if __name__ == "__main__":
    main()
