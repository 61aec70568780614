"""ONNX artifacts: the artifact's `action` function (`kppo.exporter.endpoint`, the one the SavedModel and TFLite
hold) converted by tf2onnx (`to_onnx`), the artifact's metadata in the model's `metadata_props` (`with_metadata`,
`onnx_metadata`), and onnxruntime running it (`OnnxRunner`) for the parity check `kppo.export` makes before it writes
the file. tf2onnx, onnx and onnxruntime are the optional extra `kppo[onnx]` (`require_onnx`)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from kppo._tf import tf
from kppo.exporter.endpoint import Endpoint
from kppo.exporter.inputs import ArtifactInput, split_rows
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS

OPSET = 17  # an opset every onnxruntime of the last years runs (tf2onnx tests 14-18)
ONNX_EXTRA = "pip install kppo[onnx]"
OUTPUT_NAMES = {name: f"next_{name}" for name in STATE_INPUTS}  # a recurrent artifact's new state
NOT_IN_PROPS = ("sha256", "size_bytes")  # facts of the file itself: only in the metadata file beside it


class MissingExtraError(ImportError, ValueError):
    """tf2onnx, onnx or onnxruntime is not installed: an ImportError, and a ValueError so that the CLI says it in one
    line as it says bad input."""


def require_onnx() -> None:
    """Raises a one-line `MissingExtraError` naming `pip install kppo[onnx]` when tf2onnx, onnx or onnxruntime is
    missing."""
    missing = []
    for name in ("tf2onnx", "onnx", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise MissingExtraError(f"format='onnx': needs {', '.join(missing)} (the optional extra): {ONNX_EXTRA}")


def onnx_versions() -> dict[str, str]:
    """The versions of the converter and runtime an ONNX artifact was made and checked with (its metadata's)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("tf2onnx", "onnx", "onnxruntime")}


def unsupported_nodes(model: Any) -> list[str]:
    """The op types of `model`'s nodes (an onnx ModelProto) that no ONNX opset defines: TensorFlow ops tf2onnx left
    as they were because it has no conversion for them (it carries on past them)."""
    import onnx

    return sorted({node.op_type for node in model.graph.node if not onnx.defs.has(node.op_type, node.domain)})


def to_onnx(endpoint: Endpoint) -> bytes:
    """The ONNX model (bytes, opset `OPSET`) of `endpoint`'s function traced on its input signature: inputs named as
    the TFLite artifact's (`obs` or `obs_<key>`, `action_mask`, `state_h`, `state_c`), outputs `action` (and
    `next_state_h`, `next_state_c` for a recurrent policy: an ONNX value has one name, so an output cannot share
    its input's).

    The traced function is frozen (its variables and captured constants as initializers) by tf2onnx's loader and
    converted with the real inputs only: `tf2onnx.convert.from_function` would list the captured constants as
    inputs too.

    Raises:
        ImportError: the `kppo[onnx]` extra is not installed (`require_onnx`).
        ValueError: the graph holds a TensorFlow op that ONNX cannot express (one line naming it and what to do)."""
    require_onnx()
    import tf2onnx

    concrete = tf.function(endpoint.fn, input_signature=endpoint.spec).get_concrete_function()
    inputs = [tensor.name for tensor in concrete.inputs[: len(endpoint.spec)]]  # captures come after them
    structured = concrete.structured_outputs
    named = dict(structured) if isinstance(structured, dict) else {"action": structured}
    outputs = [named[key].name for key in ("action", *STATE_INPUTS) if key in named]  # the TFLite outputs' order
    rename = {name: spec.name for name, spec in zip(inputs, endpoint.spec)}
    rename.update({named[key].name: OUTPUT_NAMES.get(key, key) for key in named})
    with _quiet_tf2onnx():
        frozen = tf2onnx.tf_loader.from_function(concrete, inputs, outputs)
        model, _ = tf2onnx.convert.from_graph_def(
            frozen, input_names=inputs, output_names=outputs, opset=OPSET, tensors_to_rename=rename
        )
    missing = unsupported_nodes(model)
    if missing:
        raise ValueError(
            f"format='onnx': tf2onnx has no ONNX form (opset {OPSET}) for the TensorFlow op(s) {missing} in this "
            f"policy's graph; export format='tflite' or 'saved_model', or replace the layer that uses them"
        )
    return model.SerializeToString()


class _quiet_tf2onnx:
    """tf2onnx's INFO lines (one per conversion step) and TensorFlow's notices about the TF1 graph functions its
    loader calls off while it converts; errors still show."""

    def __enter__(self):
        import logging

        self.loggers = [logging.getLogger("tf2onnx"), tf.get_logger()]
        self.levels = [logger.level for logger in self.loggers]
        for logger in self.loggers:
            logger.setLevel(logging.ERROR)

    def __exit__(self, *exc):
        for logger, level in zip(self.loggers, self.levels):
            logger.setLevel(level)


def with_metadata(content: bytes, metadata: dict) -> bytes:
    """`content` (an ONNX model) with `metadata` in its `metadata_props`: one entry per top-level key, its value as
    JSON text (`onnx_metadata` reads them back), all but the file's own size and SHA-256 (`NOT_IN_PROPS`), which
    only the metadata file beside it can hold."""
    import onnx

    model = onnx.load_from_string(content)
    del model.metadata_props[:]
    props = {key: json.dumps(value) for key, value in metadata.items() if key not in NOT_IN_PROPS}
    onnx.helper.set_model_props(model, props)
    return model.SerializeToString()


def onnx_metadata(content: bytes) -> dict:
    """The metadata an ONNX artifact holds in its `metadata_props` (`with_metadata`), as JSON values."""
    import onnx

    return {prop.key: json.loads(prop.value) for prop in onnx.load_from_string(content).metadata_props}


class OnnxRunner:
    """Runs an ONNX artifact with onnxruntime (CPU), any number of rows, as `TFLiteRunner` runs a .tflite file:
    `runner(obs[, masks])` -> actions, a recurrent artifact's `runner.step(obs, h, c[, masks])` -> (actions, h, c).
    `obs`: the policy's input rows (split per Dict key for an artifact with one input per key, `inputs`); a fixed
    batch is run in chunks of it, the last one padded with its last row."""

    def __init__(self, content: bytes, inputs: list[ArtifactInput]):
        require_onnx()
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1  # a controller's single observation
        try:
            self.session = onnxruntime.InferenceSession(content, options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime's own exception classes (InvalidGraph, Fail, ...), several lines
            raise ValueError(f"onnx: onnxruntime could not load the model: {' '.join(str(error).split())}") from None
        self.content, self.inputs = content, inputs
        details = {item.name: item for item in self.session.get_inputs()}
        self.masked = MASK_INPUT in details
        first = details[inputs[0].name].shape[0]
        self.fixed_batch = first if isinstance(first, int) else None
        self.outputs = [item.name for item in self.session.get_outputs()]

    def _run(self, arrays: list[np.ndarray], names: list[str]) -> list[np.ndarray]:
        rows, step = len(arrays[0]), self.fixed_batch or len(arrays[0])
        chunks = []
        for i in range(0, rows, step):
            part = [x[i : i + step] for x in arrays]
            pad = step - len(part[0])
            part = [np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) if pad else x for x in part]
            chunks.append([y[: step - pad] for y in self.session.run(self.outputs, dict(zip(names, part)))])
        return [np.concatenate(column) for column in zip(*chunks)]

    def _arrays(self, obs, masks) -> tuple[list[np.ndarray], list[str]]:
        arrays = split_rows(self.inputs, np.asarray(obs))
        names = [item.name for item in self.inputs]
        if self.masked:
            if masks is None:
                raise ValueError("masks: expected a mask per row for this artifact, got None")
            arrays.append(np.asarray(masks, np.float32))
            names.append(MASK_INPUT)
        return arrays, names

    def __call__(self, obs, masks=None) -> np.ndarray:
        arrays, names = self._arrays(obs, masks)
        return self._run(arrays, names)[self.outputs.index("action")]

    def step(self, obs, h, c, masks=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        arrays, names = self._arrays(obs, masks)
        arrays += [np.asarray(h, np.float32), np.asarray(c, np.float32)]
        names += list(STATE_INPUTS)
        out = dict(zip(self.outputs, self._run(arrays, names)))
        return out["action"], out[OUTPUT_NAMES[STATE_INPUTS[0]]], out[OUTPUT_NAMES[STATE_INPUTS[1]]]

    def ops(self) -> list[str]:
        """The ONNX operator types of the model (`domain.op` for an op outside the default domain)."""
        import onnx

        graph = onnx.load_from_string(self.content).graph
        return sorted(
            {node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}" for node in graph.node}
        )
