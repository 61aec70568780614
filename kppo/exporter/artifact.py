"""Export a trained policy as a standalone artifact: SavedModel, TFLite (LiteRT) or ONNX (`kppo.exporter.onnx`), with
observation normalization and action squashing/scaling baked in, checked for parity against `Policy.get_action` when
it is written.

The artifact's endpoint `action(obs)` takes raw flat observations in env units ([batch, obs_dim] float32; Dict
observations flattened in the Dict's key order; Discrete, MultiDiscrete and MultiBinary parts as their integers,
int32 when there is no Box part, which the artifact one-hot encodes: `Policy.input_row`, `Policy.encode_graph`)
and returns the deterministic action in env units:
clip((obs - mean) / sqrt(var + 1e-8), -10, 10) -> actor -> mean (Box) / argmax (discrete) -> tanh or clip ->
low + (a + 1) / 2 * (high - low). Box: float32 [batch, act_dim] (a Box of any shape flattened in C order,
act_dim = prod(shape): reshape to the metadata's output.env_shape, cast to env_dtype); Discrete: int32 [batch];
MultiDiscrete and MultiBinary: int32 [batch, n]. A policy trained with action masks (`Config.action_masks`) exports
`action(obs, action_mask)`: float32 [batch, mask_size], 1 = allowed; the argmax is taken over the allowed actions
(their logits minus 1e8 elsewhere). A SavedModel also serves `value(obs)`. int8 quantizes the network body only, on
standardized inputs, calibrated on the policy's own episodes; the input encoding, normalization and the action
computation stay float32 (`kppo.exporter.convert`).

An image policy (an image Box, `kppo.gym_envs.spaces.is_image_space`) takes the images themselves: uint8
[batch, H, W, C], or [batch, C, H, W] for a CHW space (`Policy.input_shape`; TFLite: quantization scale 1, zero
point 0, the real value being the byte), so a camera's bytes go straight in; the cast, / 255 and the CHW -> HWC
transpose are inside. int8 quantizes it from that input on (QUANTIZE, exact for bytes; the CNN in int8, the action
computation float32). A Dict observation space holding an image takes one input per key (`kppo.exporter.inputs`:
`obs_<key>`, the image's bytes uint8, a Box key float32, an integer key int32), joined inside into the flat row.

Keras 3 models must be exported through `keras.export.ExportArchive` (a Keras model inside a plain `tf.Module`
converts to a TFLite file without weights that outputs NaN, silently; docs/explanation/design.md, "TensorFlow
facts") and every artifact is run by the real LiteRT interpreter before `export` returns.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import keras
import numpy as np

from kppo.agent import checkpoint
from kppo._tf import tf
from kppo.core.errors import system_reason
from kppo.core.files import atomic_file
from kppo.exporter.calibration import policy_env, record_observations
from kppo.exporter.convert import convert
from kppo.exporter.inputs import ArtifactInput, artifact_inputs, input_metadata, per_key, split_rows
from kppo.exporter.parity import (
    PARITY_TOLERANCE,
    ParityError,
    calibration_observations,
    check_parity,
    mask_parts,
    measure_parity,
    measure_recurrent_parity,
    parity_masks,
    parity_observations,
)
from kppo.exporter.endpoint import action_endpoint
from kppo.exporter.onnx import OPSET as ONNX_OPSET
from kppo.exporter.onnx import OUTPUT_NAMES as ONNX_OUTPUTS
from kppo.exporter.onnx import OnnxRunner, onnx_versions, require_onnx, to_onnx, with_metadata
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS, TFLiteRunner
from kppo.agent.policy import Policy
from kppo.gym_envs.spaces import is_channels_first
from kppo.training.agents import load_agent
from kppo.version import __version__

FORMATS = ("tflite", "saved_model", "onnx")
QUANTIZATIONS = (None, "float16", "dynamic", "int8")
CALIBRATION_STEPS = 2000  # int8: observations recorded from the policy's own episodes


class Exported(NamedTuple):
    path: Path
    metadata_path: Path
    metadata: dict[str, Any]


# ---------------------------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------------------------


def resolve_source(source: Any) -> tuple[Policy, Any, dict | None]:
    """(policy, critic or None, training config dict or None) of a `PPOResult` or `kppo.PPO` (anything with
    `policy`, `agent` and `config`), a `Policy`, or an agent directory written by `save`."""
    if isinstance(source, Policy):
        return source, None, None
    if all(hasattr(source, name) for name in ("policy", "agent", "config")):
        policy = getattr(source, "kppo_policy", None) or source.policy  # kppo.PPO's `policy` is SB3's surface
        return policy, source.agent.critic, source.config.to_dict()
    if isinstance(source, (str, Path)):
        saved = load_agent(source)
        return saved.policy, saved.agent.critic, saved.config.to_dict()
    raise ValueError(f"source: expected a PPOResult, Policy, kppo.PPO or agent directory, got {type(source).__name__}")


# ---------------------------------------------------------------------------------------------------------------
# Building artifacts
# ---------------------------------------------------------------------------------------------------------------


def _write_saved_model(policy: Policy, critic, directory: Path, batch_size: int | None, int8_rows=None) -> None:
    """The SavedModel of `action_endpoint` (and a `value` endpoint); `int8_rows`: the SavedModel is converted to int8
    (calibrated on these rows)."""
    endpoint = action_endpoint(policy, batch_size, int8_rows)
    archive = keras.export.ExportArchive()
    archive.track(endpoint.actor)
    if policy.lstm is not None:
        archive.track(policy.lstm)
    archive.add_endpoint(name="action", fn=endpoint.fn, input_signature=endpoint.spec)
    if critic is not None and policy.lstm is None:  # a recurrent critic needs its own memory: no value endpoint
        archive.track(critic)

        def value(*obs):
            return critic(policy.normalize(policy.encode_graph(endpoint.rows(obs))))

        archive.add_endpoint(name="value", fn=value, input_signature=endpoint.spec[: len(endpoint.inputs)])
    archive.write_out(str(directory), verbose=False)


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
    calibration_env: Any = None,
    calibrate_on_statistics: bool = False,
) -> Exported:
    """Writes `path` (a .tflite or .onnx file, or a SavedModel directory) and `<path>.metadata.json` beside it (for a
    file with its SHA-256, `sha256`: the kit and `TFLiteRunner` refuse a damaged file, or the metadata of another).

    Args:
        source: a `PPOResult`, a `Policy`, a `kppo.PPO` model or an agent directory written by `save`.
        format: "tflite", "saved_model" or "onnx" (the extra `kppo[onnx]`: the same `action` function converted by
            tf2onnx, checked with onnxruntime, the metadata also in the model's `metadata_props`).
        quantize: TFLite only: None (float32), "float16", "dynamic" (weights int8) or "int8" (full integer, float
            interface; calibrated on `representative_obs`, else on the policy's own observations in
            `calibration_env` or the training config's env; refused without either, unless
            `calibrate_on_statistics`).
        batch_size: fixed batch dimension of the input (1 for embedded targets), or None for a dynamic batch.
        representative_obs: recorded input rows [N, *input_shape] (`Policy.input_row`; for a Box the flat
            observation, for an image Box the uint8 images): used first for parity and int8 calibration.
        parity_obs: how many observations the artifact is checked on (at least 1,000).
        calibration_env: int8 without `representative_obs`: a gymnasium id, `Env` or factory in which the policy runs
            `CALIBRATION_STEPS` steps (`record_observations`) for calibration and parity. Defaults to the training
            config's `env` when that makes an env with the policy's spaces.
        calibrate_on_statistics: int8 with neither `representative_obs` nor an env: calibrate on samples drawn
            from the normalization statistics (an explicit opt-in: states the policy never visits can put the int8
            ranges far from the ones it meets). Defaults to `False`.

    Raises:
        ParityError: a float32 artifact differs from `Policy.get_action` by more than 1e-5 of the action range (or
            in any decisive discrete action), e.g. because its weights did not load.
        ValueError: int8 without calibration data (`representative_obs`, an env, or `calibrate_on_statistics`),
            or a `calibration_env` that cannot be made or has other spaces than the policy.
        ImportError: format="onnx" without the `kppo[onnx]` extra.
    """
    if format not in FORMATS:
        raise ValueError(f"format: expected one of {FORMATS}, got {format!r}")
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize: expected one of {QUANTIZATIONS}, got {quantize!r}")
    if quantize is not None and format != "tflite":
        raise ValueError(f"quantize: only for format='tflite', got {quantize!r} with format={format!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"batch_size: expected None or an integer >= 1, got {batch_size!r}")
    if format == "onnx":
        require_onnx()  # before any work: the one line naming the extra
    policy, critic, config = resolve_source(source)
    path = Path(path)
    recorded, calibration = representative_obs, "representative_obs"
    if quantize == "int8" and recorded is None:
        recorded, calibration = _calibration_rollouts(policy, config, calibration_env, seed, calibrate_on_statistics)
    obs = parity_observations(policy, max(int(parity_obs), 1000), seed, recorded)
    masks = parity_masks(policy, len(obs), seed)
    inputs = artifact_inputs(policy)
    calibration_rows = calibration_observations(policy, recorded, seed) if quantize == "int8" else None
    if format == "onnx":
        content = to_onnx(action_endpoint(policy, batch_size))
        onnx_runner = OnnxRunner(content, inputs)
        run, ops = (onnx_runner if policy.lstm is None else onnx_runner.step), onnx_runner.ops()
    else:
        run, ops = _write_tf_artifact(policy, critic, path, format, quantize, batch_size, calibration_rows)
    parity = (
        measure_parity(run, policy, obs, masks)
        if policy.lstm is None
        else measure_recurrent_parity(run, policy, obs, masks)
    )
    if quantize is None:
        check_parity(parity, format)
    metadata = _metadata(policy, inputs, config, format, quantize, batch_size, parity, len(obs), ops, path)
    if quantize == "int8":
        assert calibration_rows is not None  # made above for int8
        metadata["calibration"] = {"source": calibration, "observations": len(calibration_rows)}
    if format == "onnx":  # the metadata inside the model too; written once the check has passed
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as partial:
            partial.write_bytes(with_metadata(content, metadata))
    metadata.update(_file_facts(path))
    metadata_path = path.with_name(path.name + ".metadata.json")
    with atomic_file(metadata_path) as partial:
        partial.write_text(json.dumps(metadata, indent=2))
    return Exported(path, metadata_path, metadata)


def _calibration_rollouts(policy: Policy, config, calibration_env, seed: int, statistics: bool):
    """int8 without recorded observations: (rows, source) from `CALIBRATION_STEPS` steps of the policy's own episodes
    in `calibration_env` (else the training config's env), or (None, "normalization statistics") when the caller
    opted in to `statistics`; a one-line ValueError otherwise."""
    env = calibration_env if calibration_env is not None else (config or {}).get("env")
    made = None if env is None else policy_env(policy, env)
    if made is not None:
        rows = record_observations(policy, made, CALIBRATION_STEPS, seed)
        source = f"policy rollouts in {made.spec.id if made.spec else type(made.unwrapped).__name__}"
        if made is not env:
            made.close()
        return rows, source
    named = env if isinstance(env, str) else type(env).__name__
    if calibration_env is not None:
        raise ValueError(
            f"calibration_env: expected a gymnasium env with the policy's spaces ({policy.observation_space}, "
            f"{policy.action_space}), got {named!r} (not a registered id, or other spaces)"
        )
    if statistics:
        return None, "normalization statistics"
    raise ValueError(
        f"quantize='int8': expected calibration data: representative_obs (kppo export --calibrate-data FILE.npz) or "
        f"calibration_env (--calibrate-env ID), got neither and the training config's env {named!r} is no gymnasium "
        f"env with the policy's spaces (calibrate_on_statistics=True calibrates on the normalization statistics)"
    )


def _write_tf_artifact(policy: Policy, critic, path: Path, format, quantize, batch_size, calibration_rows):
    """Writes the SavedModel (format="saved_model") or its TFLite conversion at `path`: (run, TFLite ops), `run`
    the written artifact's runner for the parity check (`step` for a recurrent policy)."""
    inputs = artifact_inputs(policy)
    staging = Path(tempfile.mkdtemp(prefix="kppo_export_"))
    try:
        saved_model = staging / "saved_model"
        _write_saved_model(policy, critic, saved_model, batch_size, calibration_rows)
        if format == "saved_model":
            loaded = tf.saved_model.load(str(saved_model))
            run = saved_model_runner(loaded, batch_size, policy.action_masks, policy.lstm is not None, inputs)
            if path.exists():
                shutil.rmtree(path)
            shutil.copytree(saved_model, path)
            return run, []
        blob = convert(
            saved_model, quantize, calibration_rows, mask_parts(policy) if policy.action_masks else None, policy
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path) as partial:
            partial.write_bytes(blob)
        runner = TFLiteRunner(blob, inputs)
        return (runner if policy.lstm is None else runner.step), runner.ops()
    except tf.errors.OpError as err:  # the temporary SavedModel: a full disk, a file-size limit
        raise OSError(f"{path}: could not write it ({system_reason(err)}); what it held before is kept") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _file_facts(path: Path) -> dict:
    """The artifact's size, and for a file its SHA-256 (the kit and `TFLiteRunner` refuse a damaged file, or the
    metadata of another one)."""
    if path.is_file():
        content = path.read_bytes()
        return {"size_bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    return {"size_bytes": sum(p.stat().st_size for p in path.rglob("*") if p.is_file())}


def saved_model_runner(loaded, batch_size: int | None, masked: bool, recurrent: bool, inputs: list[ArtifactInput]):
    """The SavedModel's `action` on rows of inputs in chunks of `batch_size`: run(obs[, masks]), or for a recurrent
    artifact run(obs, h, c, masks) -> (actions, h, c); `obs`: the policy's input rows, split per Dict key for an
    artifact with one input per key (`inputs`)."""

    def call(obs, *rest):
        arrays = [*(split_rows(inputs, obs) if len(inputs) > 1 else [obs]), *rest]
        step = batch_size or len(obs)
        chunks = [loaded.action(*[tf.constant(x[i : i + step]) for x in arrays]) for i in range(0, len(obs), step)]
        if not recurrent:
            return np.concatenate([chunk.numpy() for chunk in chunks])
        return tuple(np.concatenate([chunk[name].numpy() for chunk in chunks]) for name in ("action", *STATE_INPUTS))

    def run(obs, masks=None):
        return call(obs, *([] if not masked else [np.asarray(masks, np.float32)]))

    def run_step(obs, h, c, masks=None):
        return call(obs, *([] if not masked else [np.asarray(masks, np.float32)]), h, c)

    return run_step if recurrent else run


def _divides(policy: Policy) -> bool:
    """The actor's features extractor divides images by 255 (`kppo.agent.extractors.Preprocessed`'s parts)."""
    parts = getattr(policy.extractor, "parts", None) or [(None, (), False)]
    return bool(parts[0][2])


def _image_input(policy: Policy) -> dict:
    """An image input's metadata: its layout (the env's) and what the artifact does with the bytes."""
    return {
        "layout": "CHW" if is_channels_first(policy.input_shape) else "HWC",
        "meaning": "the image's raw bytes (0-255) in the env's layout (uint8, quantization scale 1, zero point 0); the "
        "artifact reads them as float32 0-255"
        + (", divides them by 255" if _divides(policy) else "")
        + (" and transposes them to HWC" if is_channels_first(policy.input_shape) else ""),
    }


def _metadata(
    policy: Policy, inputs: list[ArtifactInput], config, format, quantize, batch_size, parity, count, ops, path: Path
) -> dict:
    act = policy.action_space
    out_dtype = "float32" if isinstance(act, gym.spaces.Box) else "int32"
    out_shape = [batch_size] + ([int(np.prod(act.shape))] if act.shape else [])
    return {
        "artifact": path.name,
        "format": format,
        "quantization": quantize or "float32",
        **(
            {
                "input": {
                    "name": "obs",
                    "shape": [batch_size, *policy.input_shape],
                    "dtype": str(policy.input_dtype),
                    **(_image_input(policy) if policy.image else {}),
                }
            }
            if not per_key(policy)
            else {}
        ),
        "inputs": input_metadata(inputs, batch_size),
        "output": {
            "name": "action",
            "shape": out_shape,
            "dtype": out_dtype,
            **({"env_shape": list(act.shape), "env_dtype": str(act.dtype)} if isinstance(act, gym.spaces.Box) else {}),
        },
        **(
            {
                "state": {
                    "names": list(STATE_INPUTS),
                    **({"output_names": [ONNX_OUTPUTS[name] for name in STATE_INPUTS]} if format == "onnx" else {}),
                    "shape": [batch_size, policy.lstm.state_size],
                    "dtype": "float32",
                    "meaning": "the LSTM's (h, c): zeros at an episode's start, then the previous call's outputs",
                }
            }
            if policy.lstm is not None
            else {}
        ),
        **(
            {
                "action_mask": {
                    "name": MASK_INPUT,
                    "shape": [batch_size, policy.dist.mask_size],
                    "dtype": "float32",
                    "meaning": "1 = allowed, 0 = masked; MultiDiscrete: the dimensions' masks concatenated",
                }
            }
            if policy.action_masks
            else {}
        ),
        "observation_space": checkpoint.space_to_dict(policy.observation_space),
        "action_space": checkpoint.space_to_dict(act),
        "normalization": {
            "enabled": bool(policy.obs_scaling.enabled),
            "mean": np.asarray(policy.obs_scaling.mean).tolist(),
            "var": np.asarray(policy.obs_scaling.var).tolist(),
            "clip": policy.obs_scaling.clip,
            "epsilon": policy.obs_scaling.epsilon,
        },
        "action_scaling": {
            "squash": bool(getattr(policy.dist, "squash", False)),
            "rescale": bool(getattr(policy.dist, "rescale", True)),
        },
        **({"onnx_ops": ops, "onnx_opset": ONNX_OPSET} if format == "onnx" else {"tflite_ops": ops}),
        "parity": {**parity, "observations": count, "tolerance": PARITY_TOLERANCE},
        "versions": {"kppo": __version__, "tensorflow": tf.__version__, "keras": keras.__version__}
        | (onnx_versions() if format == "onnx" else {}),
        "training_config": config,
    }


__all__ = ["CALIBRATION_STEPS", "FORMATS", "QUANTIZATIONS", "Exported", "ParityError", "export", "resolve_source"]
