"""A training process for tests/replicated/test_checkpoint.py; prints one JSON line.

    python tests/replicated/worker.py cluster CHECKPOINT_DIR multi_worker|mirrored new|resume
        CartPole, 4 iterations: a MultiWorkerMirroredStrategy worker (cluster from TF_CONFIG), or a fresh process on
        2 logical CPUs (mirrored) that resumes the chief's checkpoint.
    python tests/replicated/worker.py resume CHECKPOINT_DIR
        Pendulum on 2 logical CPUs (mirrored), resumed from a run stopped after 4 of 6 iterations.

Importable without side effects: the tests use its configs and digests.
"""

import hashlib
import json
import sys

import numpy as np

import kppo

DEVICES = ["/cpu:0", "/cpu:1"]


def cluster_config(distribute: str) -> kppo.Config:
    return kppo.Config(
        distribute=distribute,
        num_envs=8,
        num_steps=16,
        total_timesteps=8 * 16 * 4,
        eval_freq=2,
        num_eval_envs=4,
        num_hidden_units=16,
        num_epochs=2,
        num_minibatches=2,
        iterations_per_call=1,
        normalize_obs=True,
        normalize_reward=True,
        devices=DEVICES if distribute == "mirrored" else None,
    )


def cluster_digest(result) -> str:
    arrays = [v.numpy() for v in result.agent.variables + result.agent.optimizer.variables]
    return hashlib.sha256(b"".join(a.tobytes() for a in arrays)).hexdigest()


def resume_config() -> kppo.Config:
    return kppo.Config(
        distribute="mirrored",
        devices=DEVICES,
        num_envs=8,
        num_steps=16,
        total_timesteps=8 * 16 * 6,
        eval_freq=2,
        num_eval_envs=4,
        num_hidden_units=16,
        num_epochs=2,
        num_minibatches=2,
        iterations_per_call=1,
        normalize_obs=True,
        normalize_reward=True,
    )


def resume_digest(result) -> str:
    from kppo._tf import tf

    arrays = [v.numpy() for v in result.agent.variables + result.agent.optimizer.variables]
    arrays += [np.asarray(x) for x in tf.nest.flatten(result.runner_state)]
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


def _two_logical_cpus() -> None:
    from kppo._tf import tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def main(argv: list[str]) -> dict:
    job, checkpoint_dir, *rest = argv
    if job == "cluster":
        distribute, mode = rest
        if distribute == "mirrored":
            _two_logical_cpus()
        result = kppo.train(
            "CartPole-v1", cluster_config(distribute), seed=0, checkpoint_dir=checkpoint_dir, resume=mode == "resume"
        )
        return {
            "digest": cluster_digest(result),
            "iteration": int(result.runner_state.iteration),
            "count": float(result.runner_state.rollout.obs_stats.count),
        }
    if job == "resume":
        _two_logical_cpus()
        result = kppo.train("Pendulum-v1", resume_config(), seed=0, checkpoint_dir=checkpoint_dir, resume=True)
        return {"digest": resume_digest(result), "iteration": int(result.runner_state.iteration)}
    raise SystemExit(f"worker.py: unknown job {job!r}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
