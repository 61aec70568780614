"""The deployment kit in export/ runs artifacts without TensorFlow and reproduces the Python policy's episodes."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import kppo

ROOT = Path(__file__).resolve().parents[1]
BLOCK_TF = (
    "import sys\n"
    "for name in ('tensorflow', 'keras', 'tf_keras', 'tensorflow_probability', 'kppo'):\n"
    "    sys.modules[name] = None  # any import of these now raises ImportError\n"
)


def _python_returns(policy, env_id, seeds):
    env = gym.make(env_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action = policy.get_action(obs)
            obs, reward, terminated, truncated, _ = env.step(int(action) if action.ndim == 0 else action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return returns


def _kit(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", BLOCK_TF + code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env_id, changes", [("CartPole-v1", {}), ("Pendulum-v1", {"squash": True,
                                                                                   "normalize_obs": True})])
def test_kit_reproduces_the_python_policy_without_tensorflow(env_id, changes, tmp_path):
    config = kppo.Config(num_envs=8, num_steps=64, total_timesteps=8 * 64 * 8, eval_freq=1, num_eval_envs=2,
                         env_backend="gymnasium" if env_id == "CartPole-v1" else "auto", **changes)
    result = kppo.train(env_id, config, seed=0)
    exported = kppo.export(result, tmp_path / "policy.tflite")
    seeds = [11, 12, 13]
    want = _python_returns(result.policy, env_id, seeds)
    got = _kit(
        "import json\n"
        "try:\n    import tensorflow\n    blocked = False\nexcept ImportError:\n    blocked = True\n"
        "from export.evaluate import run_episodes\nfrom export.runtime import Controller\n"
        f"returns = [run_episodes(Controller({str(exported.path)!r}), {env_id!r}, 1, s)[0] for s in {seeds}]\n"
        "print(json.dumps({'blocked': blocked, 'tf_loaded': 'tensorflow' in sys.modules and sys.modules['tensorflow'] "
        "is not None, 'returns': returns}))\n"
    )
    assert got["blocked"] and not got["tf_loaded"]
    np.testing.assert_allclose(got["returns"], want, rtol=0.01)


def test_latency_and_controller_errors(tmp_path):
    result = kppo.train("Pendulum-v1", kppo.Config(num_envs=4, num_steps=16, total_timesteps=128, eval_freq=1))
    exported = kppo.export(result, tmp_path / "p.tflite")
    got = _kit(
        "import json\nfrom export.latency import measure\nfrom export.runtime import Controller\n"
        f"c = Controller({str(exported.path)!r})\n"
        "r = measure(c, 200)\n"
        "try:\n    c.act([1.0, 2.0])\n    err = ''\nexcept ValueError as e:\n    err = str(e)\n"
        "print(json.dumps({**r, 'err': err}))\n"
    )
    assert 0 < got["invoke_us"] < 10_000 and got["act_us"] >= got["invoke_us"] * 0.5
    assert got["err"] == "obs: expected 3 values once flattened, got 2"


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_tflite_micro_runs_float32_and_int8_artifacts(quantize, tmp_path):
    result = kppo.train("Pendulum-v1", kppo.Config(num_envs=4, num_steps=16, total_timesteps=128, eval_freq=1,
                                                   squash=True, normalize_obs=True))
    exported = kppo.export(result, tmp_path / "p.tflite", quantize=quantize)
    got = _kit(f"import json\nfrom export.micro_check import check\nprint(json.dumps(check({str(exported.path)!r}, 100)))\n")
    assert 0 < got["arena_bytes"] <= 16 * 1024
    assert got["max_abs_error_vs_litert"] <= 1e-5  # same kernels' arithmetic up to float rounding
