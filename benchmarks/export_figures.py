"""Export figures: artifact size per quantization, single-observation latency, TFLite Micro arena,
and the closed-loop return change of quantized artifacts on Pendulum-v1 (trained with configs/pendulum.yaml), or
(--task taxi) of a masked policy on Taxi-v4 (kppo.MaskablePPO, benchmarks/action_masks.py's setting, 500,000 steps;
its artifacts take the action mask, which the closed loop reads from gymnasium's info["action_mask"]), or
(--task cartpole_lstm) of a recurrent policy on CartPole-v1 (kppo.RecurrentPPO, LSTM 64, RL-Zoo's CartPoleNoVel
setting, 100,000 steps; the kit carries its state).

    python benchmarks/export_figures.py [--task pendulum|taxi|cartpole_lstm] [--episodes 20] [--out bench_out/export]
"""

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import harness  # benchmarks/ is sys.path[0] for a script
import kppo

ROOT = Path(__file__).resolve().parents[1]
KIT = """
import json, sys
for name in ("tensorflow", "kppo"):
    sys.modules[name] = None
from kppo_runtime.evaluate import run_episodes
from kppo_runtime.latency import measure
from kppo_runtime.micro_check import check
from kppo_runtime.runtime import Controller
path, episodes, micro, env_id = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
c = Controller(path)
out = {"returns": run_episodes(c, env_id, episodes, 1000), **measure(c, 5000)}
if micro:
    out.update(check(path, 300))
print(json.dumps(out))
"""


def _masked_taxi():
    """kppo.MaskablePPO on Taxi-v4 with benchmarks/action_masks.py's setting (masks from info["action_mask"])."""
    import gymnasium as gym

    spec = importlib.util.spec_from_file_location("_kppo_bench_action_masks", ROOT / "benchmarks" / "action_masks.py")
    setting = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setting)
    vec_env = kppo.make_vec_env(lambda: gym.make(setting.ENV_ID), n_envs=setting.N_ENVS, seed=0)
    model = kppo.MaskablePPO("MlpPolicy", vec_env, seed=0, **setting.PPO_ARGS)
    model.learn(500_000)
    print(f"trained: eval {kppo.evaluate_policy(model, setting.ENV_ID, n_eval_episodes=20)[0]:.1f}")
    return model


def _recurrent_cartpole():
    """kppo.RecurrentPPO on CartPole-v1 with RL-Zoo's CartPoleNoVel setting (benchmarks/recurrent.py)."""
    spec = importlib.util.spec_from_file_location("_kppo_bench_recurrent", ROOT / "benchmarks" / "recurrent.py")
    setting = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setting)
    task = setting.TASKS["cartpole_novel"]
    venv = kppo.VecNormalize(
        kppo.make_vec_env("CartPole-v1", n_envs=task["n_envs"], seed=0),
        norm_obs=True,
        norm_reward=False,
        gamma=task["ppo"]["gamma"],
    )
    model = kppo.RecurrentPPO(
        "MlpLstmPolicy",
        venv,
        seed=0,
        **task["ppo"],
        **setting._schedules(task),
        policy_kwargs=dict(
            ortho_init=False, activation_fn="relu", lstm_hidden_size=64, net_arch=dict(pi=[64], vf=[64])
        ),
    )
    model.learn(task["timesteps"])
    print(f"trained: eval {kppo.evaluate_policy(model, 'CartPole-v1', n_eval_episodes=20)[0]:.1f}")
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("pendulum", "taxi", "cartpole_lstm"), default="pendulum")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", default="bench_out/export")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.task == "taxi":
        source, env_id, quantizations = _masked_taxi(), "Taxi-v4", (None, "int8")
    elif args.task == "cartpole_lstm":
        source, env_id, quantizations = _recurrent_cartpole(), "CartPole-v1", (None, "int8")
    else:
        source = kppo.train(config=kppo.Config.from_yaml(ROOT / "configs" / "pendulum.yaml"), seed=0)
        print(f"trained: eval {source.metrics['eval/mean_returns'][-1]:.1f}")
        env_id, quantizations = "Pendulum-v1", (None, "float16", "dynamic", "int8")
    rows = []
    for quantize in quantizations:
        exported = kppo.export(
            source, out / f"{args.task}_{quantize or 'float32'}.tflite", quantize=quantize, calibration_env=env_id
        )
        micro = quantize in (None, "int8")
        run = subprocess.run(
            [sys.executable, "-c", KIT, str(exported.path), str(args.episodes), str(int(micro)), env_id],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        kit = json.loads(run.stdout.strip().splitlines()[-1])
        rows.append((quantize or "float32", exported.metadata, kit))
    base = np.mean(rows[0][2]["returns"])
    cells = []
    for name, meta, kit in rows:
        mean = np.mean(kit["returns"])
        arena = kit.get("arena_bytes", "n/a (TFLM rejects)") if name != "float16" else "n/a"
        change = f"{100 * (mean - base) / abs(base):+.1f}%"
        error = f"{meta['parity']['max_error']:.2e}"
        cells.append([name, f"{meta['size_bytes']:,}", error, f"{kit['invoke_us']:.1f}", arena, f"{mean:.1f}", change])
    header = ["quantization", "size bytes", "parity max error (rel. to range)", "median invoke us", "TFLM arena bytes"]
    header += [f"closed-loop return ({args.episodes} ep.)", "change vs float32"]
    print(f"\n{harness.machine_header(None, 'ai-edge-litert')}\n")
    print(harness.markdown_table(header, cells))


if __name__ == "__main__":
    main()
