"""What a run directory holds besides the agent: metrics.csv, TensorBoard events, learning_curve.png, summary.json."""

from __future__ import annotations

import csv
import json
import platform
from pathlib import Path
from typing import Any

import numpy as np

from kppo._tf import tf
from kppo.core.errors import system_reason
from kppo.core.files import atomic_dir, atomic_file
from kppo.version import __version__


def write_metrics_csv(path: Path, metrics: dict[str, np.ndarray]) -> None:
    """One row per evaluation round, one column per metric (kppo.METRICS plus hook metrics)."""
    names = list(metrics)
    with atomic_file(path) as partial, open(partial, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        for row in zip(*(np.asarray(metrics[n]).reshape(len(metrics[n]), -1)[:, 0] for n in names)):
            writer.writerow([float(v) for v in row])


def write_tensorboard(directory: Path, metrics: dict[str, np.ndarray]) -> None:
    """Every round's scalars in one events file; the folder is replaced as a whole, so a rerun (a resume) never adds
    a second copy of a step."""
    steps = np.asarray(metrics["train/total_steps"]).astype(np.int64)
    with atomic_dir(directory) as staging:
        try:
            writer = tf.summary.create_file_writer(str(staging))
            with writer.as_default():
                for name, values in metrics.items():
                    values = np.asarray(values)
                    if values.ndim == 1 and np.issubdtype(values.dtype, np.number):
                        for step, value in zip(steps, values):
                            tf.summary.scalar(name, float(value), step=int(step))
            writer.close()
        except tf.errors.OpError as err:
            raise OSError(system_reason(err)) from None


def plot_learning_curve(path: Path, metrics: dict[str, np.ndarray], title: str) -> None:
    """Evaluation return (mean +- std) and training episode return against environment steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.asarray(metrics["train/total_steps"])
    mean, std = np.asarray(metrics["eval/mean_returns"]), np.asarray(metrics["eval/std_returns"])
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    ax.plot(steps, mean, label="eval (deterministic)", color="tab:blue")
    ax.fill_between(steps, mean - std, mean + std, color="tab:blue", alpha=0.2)
    ax.plot(steps, metrics["rollout/ep_rew_mean"], label="train episodes", color="tab:orange", alpha=0.8)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        with atomic_file(path) as partial:
            fig.savefig(partial, format="png")
    finally:
        plt.close(fig)


def write_summary(path: Path, result: Any, extra: dict | None = None) -> dict:
    import gymnasium
    import keras

    m = result.metrics
    summary = {
        "env": result.config.env,
        "seed": result.config.seed,
        "total_steps": int(m["train/total_steps"][-1]),
        "final_eval_mean_return": float(m["eval/mean_returns"][-1]),
        "final_eval_std_return": float(m["eval/std_returns"][-1]),
        "best_eval_mean_return": float(np.max(m["eval/mean_returns"])),
        "final_train_return": float(m["rollout/ep_rew_mean"][-1]),
        "steps_per_s": float(m["train/total_steps"][-1] / max(result.timings["total_s"], 1e-9)),
        **{f"wall_{k}": float(v) for k, v in result.timings.items()},
        "versions": {
            "kppo": __version__,
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "gymnasium": gymnasium.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        **(extra or {}),
    }
    with atomic_file(path) as partial:
        partial.write_text(json.dumps(summary, indent=2))
    return summary
