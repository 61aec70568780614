#!/usr/bin/env python
"""int8 in the closed loop: a Breakout-MinAtar agent trained on the TF-native env (`benchmarks/minatar_cnn.py
--save`) exported to TFLite float32 and full int8 with a uint8 frame input, each playing full episodes of the
`minatar` package's Breakout in gymnax mode (no sticky actions, episodes cut at 1,000 steps), actions argmax.

    .venv/bin/python benchmarks/minatar_int8_loop.py --agent benchmarks/results/minatar/agents/seed0 \\
        --episodes 128 --out /tmp/minatar_int8 --json benchmarks/results/minatar/int8_loop.json

Two conditions: gymnax mode (what the agent was trained on; only the ball's start, one of two, is random, so each
argmax player plays at most two distinct episodes) and minatar's own sticky actions (probability 0.1: episodes that
differ, each player seeing the same draws). Three players on the same episodes (env seeds 100,000 + i): the Python
policy on MinAtar's float grids (as trained),
the float32 artifact and the int8 artifact on the grid's bytes (0 or 255); `--sampled` adds the Python policy
drawing its actions (a diagnostic, not an artifact's behaviour). Returns: mean with the bootstrap 95%
interval (`benchmarks.stats.bootstrap_mean_ci`); the int8 / float32 ratio with a paired bootstrap interval (the same
episodes resampled for both). The artifacts are exported from a uint8 twin of the policy: the same actor weights
behind a uint8 image input that kppo divides by 255, so the network sees the same 0/1 grid; the twin's actions are
checked equal to the policy's on on-policy frames. int8 is calibrated on 2,000 frames of the policy's own episodes
(env seeds 0, 1, ...: `kppo.export(..., calibration_env=...)`), played with sticky actions (`--frames-sticky`, 0.1:
in gymnax mode they would be two episodes repeated). On 1,000 other on-policy frames (seeds 10,000 + i, likewise)
TensorFlow Lite for Microcontrollers (`kppo_runtime.micro_check.run_isolated`) is compared with LiteRT's int8
actions; sizes, LiteRT microseconds per frame and TFLite Micro's arena come from the export kit in a process
without TensorFlow (as `benchmarks/image_export.py`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
MAX_EPISODE_STEPS = 1000  # gymnax's Breakout-MinAtar
EVAL_SEED, FRAMES_SEED = 100_000, 10_000
CONDITIONS = {"gymnax": 0.0, "sticky_0.1": 0.1}  # closed-loop conditions: minatar's sticky-action probability
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


class BreakoutBytes(gym.Env):
    """The `minatar` package's Breakout as gymnax plays it (no sticky actions, cut at 1,000 steps), minimal action
    set (no-op, left, right), observations MinAtar's boolean grid as uint8 bytes (0 or 255) or as float32 (0 or 1,
    what the TF-native env gives; `floats=True`). `sticky`: minatar's sticky-action probability (its own default
    0.1), for episodes that differ: in gymnax mode only the ball's start (one of two) is random, so a deterministic
    policy plays one of two episodes."""

    def __init__(self, floats: bool = False, sticky: float = 0.0):
        import minatar

        self.game = minatar.Environment("breakout", sticky_action_prob=sticky)
        self.actions = self.game.minimal_action_set()
        self.floats = floats
        self.observation_space = (
            gym.spaces.Box(0.0, 1.0, (10, 10, 4), np.float32)
            if floats
            else gym.spaces.Box(0, 255, (10, 10, 4), np.uint8)
        )
        self.action_space = gym.spaces.Discrete(len(self.actions))

    def _obs(self) -> np.ndarray:
        grid = self.game.state()
        return grid.astype(np.float32) if self.floats else grid.astype(np.uint8) * np.uint8(255)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.game.seed(int(self.np_random.integers(2**31)) if seed is None else seed)
        self.game.reset()
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward, terminal = self.game.act(self.actions[int(action)])
        self.t += 1
        return self._obs(), float(reward), bool(terminal), self.t >= MAX_EPISODE_STEPS and not terminal, {}


def load_trained(path: Path):
    """The trained agent's policy (float grids, as trained). Agents whose observation statistics were saved in the
    frame's shape (kppo's TF-native image runs keep them so; `load_agent` restores [obs_dim]) are restored in it."""
    from kppo.agent import checkpoint
    from kppo.agent.agent import make_agent, make_policy
    from kppo.training.agents import load_agent, read_metadata
    from kppo.training.runners.settings import agent_spec
    from kppo.gym_envs.spaces import flat_dim

    try:
        saved = load_agent(path)
        return saved.config, saved.agent, saved.policy
    except ValueError as err:
        if "incompatible tensor" not in str(err):
            raise
    config, _, obs_space, act_space = read_metadata(path)
    agent = make_agent(agent_spec(config), flat_dim(obs_space), act_space, observation_space=obs_space)
    obs_stats, _ = checkpoint.restore(path, agent, list(obs_space.shape or ()))
    policy = make_policy(agent, obs_stats, agent_spec(config), obs_space, act_space)
    return config, agent, policy


def byte_twin(config, agent, policy):
    """The same actor behind a uint8 image input (Box(0, 255, (10, 10, 4), uint8), divided by 255 in the network)."""
    from kppo._tf import tf
    from kppo.agent.agent import make_agent, make_policy
    from kppo.core.types import Moments
    from kppo.training.runners.settings import agent_spec

    space = BreakoutBytes().observation_space
    dim = int(np.prod(space.shape))
    twin = make_agent(
        agent_spec(config.replace(normalize_images=True)), dim, policy.action_space, observation_space=space
    )
    twin.actor.set_weights(agent.actor.get_weights())
    scaling = policy.obs_scaling  # unused without normalize_obs; carried over flat, as `load_agent` reads them
    stats = Moments(
        tf.reshape(tf.constant(scaling.mean, tf.float32), [dim]),
        tf.reshape(tf.constant(scaling.var, tf.float32), [dim]),
        tf.constant(1.0),
    )
    return make_policy(twin, stats, agent_spec(config), space, policy.action_space)


def play(
    act: Callable[[np.ndarray], np.ndarray], episodes: int, floats: bool, sticky: float
) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of `episodes` episodes (env seeds EVAL_SEED + i), all envs stepped in lockstep, `act`
    mapping the active envs' observations [n, 10, 10, 4] to their actions [n]."""
    envs = [BreakoutBytes(floats, sticky) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=EVAL_SEED + i)[0] for i, env in enumerate(envs)])
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    active = np.arange(episodes)
    while len(active):
        actions = np.asarray(act(obs[active])).reshape(-1)
        still = []
        for i, action in zip(active, actions):
            obs[i], reward, terminated, truncated, _ = envs[i].step(int(action))
            returns[i] += reward
            lengths[i] += 1
            if not (terminated or truncated):
                still.append(i)
        active = np.asarray(still, np.int64)
    return returns, lengths


def paired_ratio_ci(a: np.ndarray, b: np.ndarray, n: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(a) / mean(b), resampling the episodes (pairs) together."""
    idx = np.random.default_rng(seed).integers(0, len(a), size=(n, len(a)))
    ratios = a[idx].mean(axis=1) / np.maximum(b[idx].mean(axis=1), 1e-12)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", type=Path, required=True, help="an agent directory (minatar_cnn.py --save)")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--frames", type=int, default=1000, help="on-policy frames for the TFLite Micro check")
    parser.add_argument(
        "--frames-sticky", type=float, default=0.1, help="sticky-action probability of the calibration/check episodes"
    )
    parser.add_argument("--out", type=Path, default=Path("bench_out/minatar_int8"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--sampled", action="store_true", help="also play the Python policy with sampled actions")
    args = parser.parse_args()

    import kppo
    import harness  # benchmarks/ is sys.path[0] for a script
    from benchmarks.stats import bootstrap_mean_ci
    from kppo.exporter.calibration import record_observations
    from kppo.exporter.runner import TFLiteRunner
    from kppo_runtime.micro_check import run_isolated

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    config, agent, policy = load_trained(args.agent)
    twin = byte_twin(config, agent, policy)

    # on-policy frames (the policy's own episodes, with sticky actions so that they differ), as bytes and as floats
    def frames_env() -> BreakoutBytes:
        return BreakoutBytes(sticky=args.frames_sticky)

    frames = record_observations(twin, frames_env, args.frames, seed=FRAMES_SEED)
    assert frames is not None
    distinct = len(np.unique(frames.reshape(len(frames), -1), axis=0))
    twin_actions, policy_actions = twin.get_action(frames), policy.get_action(frames.astype(np.float32) / 255.0)
    twin_equal = float(np.mean(twin_actions == policy_actions))

    artifacts, report = {}, {}
    for quantize in (None, "int8"):
        name = quantize or "float32"
        exported = kppo.export(
            twin, args.out / f"breakout_{name}.tflite", quantize=quantize, calibration_env=frames_env
        )
        artifacts[name] = exported
        kit = subprocess.run(
            [sys.executable, "-c", KIT, str(exported.path), "300"], cwd=ROOT, capture_output=True, text=True
        )
        figures = json.loads(kit.stdout.strip().splitlines()[-1]) if kit.returncode == 0 else {"error": kit.stderr}
        runner = TFLiteRunner(exported.path)
        litert = runner(frames)
        micro, reason = run_isolated(
            exported.path.read_bytes(), max(10 * exported.metadata["size_bytes"], 65536), frames
        )
        report[name] = {
            "size_bytes": exported.metadata["size_bytes"],
            "calibration": exported.metadata.get("calibration"),
            "actions_equal_python_policy": float(np.mean(litert == twin_actions)),
            "micro_equal_litert": None if micro is None else float(np.mean(micro.reshape(-1) == litert)),
            "micro_error": reason or None,
            **{k: v for k, v in figures.items() if k != "observations"},
        }
        print(json.dumps({name: report[name]}), flush=True)

    players: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]] = {
        "python": (lambda obs: policy.get_action(obs), True),
        "float32": (TFLiteRunner(artifacts["float32"].path), False),
        "int8": (TFLiteRunner(artifacts["int8"].path), False),
    }
    if args.sampled:  # a diagnostic: the policy's own distribution instead of its argmax
        rng = np.random.default_rng(0)
        players["python_sampled"] = (lambda obs: policy.get_action(obs, rng=rng), True)
    loop: dict[str, dict] = {}
    for condition, sticky in CONDITIONS.items():
        loop[condition] = {}
        for name, (act, floats) in players.items():
            start = time.perf_counter()
            returns, lengths = play(act, args.episodes, floats, sticky)
            low, high = bootstrap_mean_ci(returns)
            loop[condition][name] = {
                "returns": returns.tolist(),
                "mean": float(returns.mean()),
                "ci95": [low, high],
                "distinct_returns": sorted({float(r) for r in returns})[:10],
                "mean_length": float(lengths.mean()),
                "truncated": int(np.sum(lengths >= MAX_EPISODE_STEPS)),
                "wall_s": round(time.perf_counter() - start, 1),
            }
            shown = {k: v for k, v in loop[condition][name].items() if k != "returns"}
            print(json.dumps({condition: {name: shown}}), flush=True)
        int8, f32 = (np.asarray(loop[condition][name]["returns"]) for name in ("int8", "float32"))
        loop[condition]["int8_over_float32"] = float(int8.mean() / max(f32.mean(), 1e-12))
        loop[condition]["int8_over_float32_ci95"] = list(paired_ratio_ci(int8, f32))
        loop[condition]["episodes_same_return_int8_float32"] = float(np.mean(int8 == f32))
    summary = {
        **harness.machine(),
        "agent": str(args.agent),
        "episodes": args.episodes,
        "frames": args.frames,
        "frames_sticky": args.frames_sticky,
        "distinct_frames": distinct,
        "twin_equal_policy": twin_equal,
        "artifacts": report,
        "closed_loop": loop,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    ratios = {c: {k: v for k, v in loop[c].items() if k.startswith(("int8_", "episodes_"))} for c in loop}
    print(harness.machine_header(None, "ai-edge-litert", "minatar"))
    print(json.dumps({**{k: v for k, v in summary.items() if k not in ("closed_loop", "artifacts")}, **ratios}))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
