"""Weight digests of five recorded runs, to show a refactor preserves behaviour: run before and after, compare.

    python benchmarks/digests.py                 # all five, one JSON line each
    python benchmarks/digests.py cartpole ppo    # some of them

Runs: the fixed CartPole setting (configs/cartpole.yaml, seed 0; the evaluation returns of every round too), a
gymnasium-path Pendulum run with gSDE and observation/reward normalization, a 2-replica TF-native CartPole run, a
2-replica gymnasium Pendulum run with target_kl, and a `kppo.PPO` run with SB3 schedules and target_kl. Each run
starts in a fresh process (the replicated ones need 2 logical CPUs configured before TensorFlow starts). Digests
are bit-level: compare them on one machine (other CPUs round differently).

harness: not used. The digests are the output, compared line by line before and after a change: no machine header
and no table go into it, and what this file computes stays exactly as it is.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("cartpole", "gym", "replicas", "replicas_gym", "ppo")
GYM = dict(
    verbose=0,
    env="Pendulum-v1",
    env_backend="gymnasium",
    total_timesteps=16 * 256 * 2,
    eval_freq=2,
    num_eval_envs=2,
    use_sde=True,
    sde_sample_freq=4,
    normalize_obs=True,
    normalize_reward=True,
    num_minibatches=8,
    num_epochs=2,
)


def digest(agent) -> str:
    h = hashlib.sha256()
    for variable in agent.actor.weights + agent.critic.weights:
        h.update(variable.numpy().tobytes())
    return h.hexdigest()[:16]


def run(name: str) -> dict:
    import kppo
    from kppo._tf import tf

    if name.startswith("replicas"):
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    cartpole = kppo.Config.from_yaml(ROOT / "configs" / "cartpole.yaml").replace(verbose=0)
    pendulum = kppo.Config.from_yaml(ROOT / "configs" / "pendulum.yaml").replace(**GYM)
    mirrored = dict(distribute="mirrored", devices=("/cpu:0", "/cpu:1"))
    if name == "ppo":
        model = kppo.PPO(
            "MlpPolicy",
            "Pendulum-v1",
            n_steps=256,
            batch_size=64,
            n_epochs=3,
            use_sde=True,
            seed=0,
            learning_rate=lambda p: 1e-3 * p,
            clip_range=lambda p: 0.2 * p,
            target_kl=0.05,
        )
        model.learn(1024)
        return {"run": name, "n_updates": model._n_updates, "digest": digest(model.agent)}
    config = {
        "cartpole": cartpole,
        "gym": pendulum,
        "replicas": cartpole.replace(**mirrored, total_timesteps=16 * 128 * 8, eval_freq=2),
        "replicas_gym": pendulum.replace(**mirrored, target_kl=0.02),
    }[name]
    result = kppo.train(config=config, seed=0)
    returns = [round(float(x), 4) for x in result.metrics["eval/mean_returns"]]
    return {"run": name, "eval": returns, "digest": digest(result.agent)}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--child":
        print(json.dumps(run(argv[1])), flush=True)
        return 0
    names = argv or list(RUNS)
    unknown = sorted(set(names) - set(RUNS))
    if unknown:
        print(f"digests: expected runs among {list(RUNS)}, got {unknown}", file=sys.stderr)
        return 2
    for name in names:
        out = subprocess.run([sys.executable, __file__, "--child", name], cwd=ROOT, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            return out.returncode
        print(out.stdout.strip().splitlines()[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
