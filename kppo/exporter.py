"""Export a trained policy as a standalone artifact: SavedModel or TFLite (LiteRT), with observation normalization
and action squashing/scaling baked in, checked for parity against `Policy.get_action` when it is written.

The artifact's endpoint `action(obs)` takes raw flat observations in env units ([batch, obs_dim] float32; Dict
observations flattened in the Dict's key order) and returns the deterministic action in env units:
clip((obs - mean) / sqrt(var + 1e-8), -10, 10) -> actor -> mean (Box) / argmax (discrete) -> tanh or clip ->
low + (a + 1) / 2 * (high - low). Box: float32 [batch, act_dim]; Discrete: int32 [batch]; MultiDiscrete and
MultiBinary: int32 [batch, n]. A SavedModel also serves `value(obs)`.

Keras 3 models must be exported through `keras.export.ExportArchive` (a Keras model inside a plain `tf.Module`
converts to a TFLite file without weights that outputs NaN, silently; see DESIGN.md) and every artifact is run by the
real LiteRT interpreter before `export` returns.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import keras
import numpy as np

from kppo import checkpoint
from kppo._tf import tf
from kppo.agent import load_agent
from kppo.policy import Policy
from kppo.version import __version__

FORMATS = ("tflite", "saved_model")
QUANTIZATIONS = (None, "float16", "dynamic", "int8")
PARITY_TOLERANCE = 1e-5  # float32 artifacts: max |error| / (high - low) for Box actions


class Exported(NamedTuple):
    path: Path
    metadata_path: Path
    metadata: dict[str, Any]


class ParityError(ValueError):
    """The artifact does not reproduce `Policy.get_action`."""


# ---------------------------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------------------------


def resolve_source(source: Any) -> tuple[Policy, Any, dict | None]:
    """(policy, critic or None, training config dict or None) of a `PPOResult` or `kppo.PPO` (anything with
    `policy`, `agent` and `config`), a `Policy`, or an agent directory written by `save`."""
    if isinstance(source, Policy):
        return source, None, None
    if all(hasattr(source, name) for name in ("policy", "agent", "config")):
        return source.policy, source.agent.critic, source.config.to_dict()
    if isinstance(source, (str, Path)):
        saved = load_agent(source)
        return saved.policy, saved.agent.critic, saved.config.to_dict()
    raise ValueError(f"source: expected a PPOResult, Policy, kppo.PPO or agent directory, got {type(source).__name__}")


def _obs_dim(policy: Policy) -> int:
    return int(policy._stats.mean.shape[0])


# ---------------------------------------------------------------------------------------------------------------
# Building artifacts
# ---------------------------------------------------------------------------------------------------------------


def _write_saved_model(policy: Policy, critic, directory: Path, batch_size: int | None) -> None:
    spec = [tf.TensorSpec([batch_size, _obs_dim(policy)], tf.float32, name="obs")]

    def action(obs):
        return policy.dist.to_env(policy.dist.mode(policy.actor(policy.normalize(obs))))

    archive = keras.export.ExportArchive()
    archive.track(policy.actor)
    archive.add_endpoint(name="action", fn=action, input_signature=spec)
    if critic is not None:
        archive.track(critic)
        archive.add_endpoint(name="value", fn=lambda obs: critic(policy.normalize(obs)), input_signature=spec)
    archive.write_out(str(directory), verbose=False)


def _convert(saved_model: Path, quantize: str | None, representative: np.ndarray) -> bytes:
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model), signature_keys=["action"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # builtin ops only, no select TF ops
    if quantize == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif quantize == "dynamic":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]

        def dataset():
            for row in representative[:500]:
                yield [row[None].astype(np.float32)]

        converter.representative_dataset = dataset
    return converter.convert()


# ---------------------------------------------------------------------------------------------------------------
# Running artifacts and parity
# ---------------------------------------------------------------------------------------------------------------


class TFLiteRunner:
    """Runs the `action` signature of a .tflite file with ai_edge_litert, any batch size (fixed-batch models are
    called row by row)."""

    def __init__(self, model: bytes | str | Path):
        from ai_edge_litert.interpreter import Interpreter

        content = model if isinstance(model, bytes) else Path(model).read_bytes()
        self.content = content
        self.interpreter = Interpreter(model_content=content)
        self.interpreter.allocate_tensors()
        self.runner = self.interpreter.get_signature_runner("action")
        details = self.runner.get_input_details()
        self.input_name = next(iter(details))
        self.fixed_batch = int(details[self.input_name]["shape"][0])

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        if self.fixed_batch == 1 or self.fixed_batch != obs.shape[0]:
            return np.concatenate([self._run(row[None]) for row in obs])
        return self._run(obs)

    def _run(self, obs: np.ndarray) -> np.ndarray:
        out = self.runner(**{self.input_name: obs})
        return next(iter(out.values()))

    def ops(self) -> list[str]:
        """Names of the builtin operators in the model (what a TFLite Micro op resolver must register)."""
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        plain = Interpreter(
            model_content=self.content, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        plain.allocate_tensors()
        return sorted({op["op_name"] for op in plain._get_ops_details()})


def parity_observations(policy: Policy, count: int, seed: int = 0, recorded: np.ndarray | None = None) -> np.ndarray:
    """Observations to check an artifact on: recorded ones first, then samples around the normalization statistics
    (70% within 3 std, 30% at 10-15 std, i.e. in the +-10 clip region), float32 [count, obs_dim]."""
    rng = np.random.default_rng(seed)
    dim = _obs_dim(policy)
    parts = [] if recorded is None else [np.asarray(recorded, np.float32).reshape(-1, dim)[:count]]
    missing = count - sum(len(p) for p in parts)
    if missing > 0:
        mean = np.asarray(policy.obs_scaling.mean, np.float32)
        std = np.sqrt(np.asarray(policy.obs_scaling.var, np.float32) + 1e-8)
        near = rng.normal(size=(missing, dim)) * 3.0
        far = rng.choice([-1.0, 1.0], size=(missing, dim)) * rng.uniform(10.0, 15.0, size=(missing, dim))
        z = np.where(rng.random((missing, 1)) < 0.7, near, far)
        parts.append((mean + std * z).astype(np.float32))
    return np.concatenate(parts)


def _calibration_observations(policy: Policy, recorded: np.ndarray | None, seed: int) -> np.ndarray:
    """int8 calibration data: recorded observations, else samples within the normalization statistics' bulk
    (mean +- std * N(0, 1)); the far, clipped samples of the parity set would waste the int8 input range."""
    if recorded is not None:
        return np.asarray(recorded, np.float32).reshape(-1, _obs_dim(policy))
    rng = np.random.default_rng(seed + 1)
    mean = np.asarray(policy.obs_scaling.mean, np.float32)
    std = np.sqrt(np.asarray(policy.obs_scaling.var, np.float32) + 1e-8)
    return (mean + std * rng.normal(size=(500, len(mean)))).astype(np.float32)


def measure_parity(run, policy: Policy, obs: np.ndarray) -> dict[str, float]:
    """Artifact vs `Policy.get_action` on `obs`: for Box actions the error relative to the action range; for
    discrete actions the fraction of differing actions among observations whose top two logits differ by > 1e-4."""
    want = policy.get_action_flat(obs)
    got = np.asarray(run(obs)).reshape(want.shape)
    if not np.all(np.isfinite(got)):
        return {"max_error": float("inf"), "mean_error": float("inf"), "non_finite": float(np.mean(~np.isfinite(got)))}
    space = policy.action_space
    if isinstance(space, gym.spaces.Box):
        err = np.abs(got.astype(np.float64) - want) / (space.high - space.low)
        return {"max_error": float(err.max()), "mean_error": float(err.mean()), "non_finite": 0.0}
    logits = np.asarray(policy.actor(tf.constant(np.asarray(policy.normalize(obs)))))
    top2 = np.sort(logits, axis=-1)[..., -2:]
    decisive = (top2[..., 1] - top2[..., 0] > 1e-4).reshape(len(obs), -1).all(axis=1)
    wrong = (got != want).reshape(len(obs), -1).any(axis=1)
    rate = float(np.mean(wrong[decisive])) if decisive.any() else 0.0
    return {"max_error": rate, "mean_error": float(np.mean(wrong)), "non_finite": 0.0}


def check_parity(parity: dict[str, float], format: str = "tflite") -> None:
    """Raises `ParityError` unless a float32 artifact matched the policy (see `measure_parity`)."""
    if parity["non_finite"] or parity["max_error"] > PARITY_TOLERANCE:
        raise ParityError(
            f"export: the {format} artifact does not reproduce Policy.get_action (max error {parity['max_error']:.3g},"
            f" non-finite {parity['non_finite']:.0%}, tolerance {PARITY_TOLERANCE}); did its weights load?"
        )


# ---------------------------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------------------------


def export(
    source: Any,
    path: str | Path,
    format: str = "tflite",
    quantize: str | None = None,
    batch_size: int | None = 1,
    representative_obs: np.ndarray | None = None,
    parity_obs: int = 1000,
    seed: int = 0,
) -> Exported:
    """Writes `path` (a .tflite file, or a SavedModel directory) and `<path>.metadata.json` beside it.

    Args:
        source: a `PPOResult`, a `Policy`, a `kppo.PPO` model or an agent directory written by `save`.
        format: "tflite" or "saved_model".
        quantize: TFLite only: None (float32), "float16", "dynamic" (weights int8) or "int8" (full integer, float
            interface; calibrated on `representative_obs` or the parity observations).
        batch_size: fixed batch dimension of the input (1 for embedded targets), or None for a dynamic batch.
        representative_obs: recorded raw flat observations [N, obs_dim]: used first for parity and int8 calibration.
        parity_obs: how many observations the artifact is checked on (at least 1,000).

    Raises:
        ParityError: a float32 artifact differs from `Policy.get_action` by more than 1e-5 of the action range (or
            in any decisive discrete action), e.g. because its weights did not load.
    """
    if format not in FORMATS:
        raise ValueError(f"format: expected one of {FORMATS}, got {format!r}")
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize: expected one of {QUANTIZATIONS}, got {quantize!r}")
    if quantize is not None and format != "tflite":
        raise ValueError(f"quantize: only for format='tflite', got {quantize!r} with format={format!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"batch_size: expected None or an integer >= 1, got {batch_size!r}")
    policy, critic, config = resolve_source(source)
    path = Path(path)
    obs = parity_observations(policy, max(int(parity_obs), 1000), seed, representative_obs)
    staging = Path(tempfile.mkdtemp(prefix="kppo_export_"))
    try:
        saved_model = staging / "saved_model"
        _write_saved_model(policy, critic, saved_model, batch_size)
        if format == "saved_model":
            loaded = tf.saved_model.load(str(saved_model))
            run = _saved_model_runner(loaded, batch_size)
            ops: list[str] = []
            if path.exists():
                shutil.rmtree(path)
            shutil.copytree(saved_model, path)
        else:
            blob = _convert(saved_model, quantize, _calibration_observations(policy, representative_obs, seed))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(blob)
            runner = TFLiteRunner(blob)
            run, ops = runner, runner.ops()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    parity = measure_parity(run, policy, obs)
    if quantize is None:
        check_parity(parity, format)
    metadata = _metadata(policy, config, format, quantize, batch_size, parity, len(obs), ops, path)
    metadata_path = path.with_name(path.name + ".metadata.json")
    metadata_path.write_text(json.dumps(metadata, indent=2))
    return Exported(path, metadata_path, metadata)


def _saved_model_runner(loaded, batch_size: int | None):
    def run(obs):
        if batch_size is None:
            return loaded.action(tf.constant(obs)).numpy()
        rows = [loaded.action(tf.constant(obs[i:i + batch_size])).numpy() for i in range(0, len(obs), batch_size)]
        return np.concatenate(rows)

    return run


def _metadata(policy: Policy, config, format, quantize, batch_size, parity, count, ops, path: Path) -> dict:
    act = policy.action_space
    out_dtype = "float32" if isinstance(act, gym.spaces.Box) else "int32"
    out_shape = [batch_size] + ([int(np.prod(act.shape))] if act.shape else [])
    return {
        "artifact": path.name,
        "format": format,
        "quantization": quantize or "float32",
        "input": {"name": "obs", "shape": [batch_size, _obs_dim(policy)], "dtype": "float32"},
        "output": {"name": "action", "shape": out_shape, "dtype": out_dtype},
        "observation_space": checkpoint.space_to_dict(policy.observation_space),
        "action_space": checkpoint.space_to_dict(act),
        "normalization": {
            "enabled": bool(policy.obs_scaling.enabled),
            "mean": np.asarray(policy.obs_scaling.mean).tolist(),
            "var": np.asarray(policy.obs_scaling.var).tolist(),
            "clip": policy.obs_scaling.clip,
            "epsilon": policy.obs_scaling.epsilon,
        },
        "action_scaling": {"squash": bool(getattr(policy.dist, "squash", False))},
        "tflite_ops": ops,
        "parity": {**parity, "observations": count, "tolerance": PARITY_TOLERANCE},
        "versions": {"kppo": __version__, "tensorflow": tf.__version__, "keras": keras.__version__},
        "training_config": config,
        "size_bytes": path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file()),
    }
