"""TFLite conversion of an artifact's SavedModel: float32, float16, dynamic-range and int8 (`convert`), the float32
ops around an int8 network body (`float_nodes`), and an image's uint8 input as TFLite Micro reads it (`uint8_input`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.exporter.inputs import artifact_inputs, per_key, split_rows
from kppo.exporter.parity import example_masks, recurrent_states
from kppo.exporter.runner import MASK_INPUT, STATE_INPUTS

BODY_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")  # int8: the network body, from the first to the last


def quantized_image_input(policy: Policy | None) -> bool:
    """int8 quantizes an image policy from its input on: uint8 bytes (scale 1, zero point 0) -> QUANTIZE to int8 ->
    / 255 (an exact int8 MUL) -> CNN (`quantized_uint8_input`), with no float32 copy of the image (TFLite Micro's
    arena for NatureCNN: 65 KB instead of 234 KB). Not with observation normalization, whose per-pixel arithmetic
    stays float32 as for other observations."""
    return policy is not None and policy.image and not policy.obs_scaling.enabled


def float_nodes(calibrated: bytes, front: bool = True) -> list[str]:
    """Output tensors of the ops before the first `BODY_OPS` op (when `front`) and after the last FULLY_CONNECTED:
    input encoding, normalization or standardization, an image's cast, / 255 and layout; argmax, tanh/clip and
    rescaling; and whatever computes with an action mask."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=calibrated)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()
    dense = [i for i, op in enumerate(ops) if op["op_name"] == "FULLY_CONNECTED"]
    first = next(i for i, op in enumerate(ops) if op["op_name"] in BODY_OPS) if front else 0
    tainted = {d["index"] for d in interpreter.get_input_details() if MASK_INPUT in d["name"]}
    for op in ops:  # the action mask's arithmetic stays float32 wherever the converter placed it
        if tainted.intersection(op["inputs"]):
            tainted.update(op["outputs"])
    outside = ops[:first] + ops[dense[-1] + 1 :]
    return sorted({names[t] for op in outside for t in op["outputs"]} | {names[t] for t in tainted if t in names})


def convert(
    saved_model: Path,
    quantize: str | None,
    representative: np.ndarray | None,
    mask_sizes: list[int] | None = None,
    policy: Policy | None = None,
) -> bytes:
    """TFLite bytes. An image policy's input is uint8 in every artifact: read by DEQUANTIZE (scale 1) in float
    ones (`uint8_input`), by QUANTIZE in int8 ones (`quantized_image_input`: `saved_model` then takes the bytes as
    float32 values 0-255, its calibration rows hold a 0 and a 255 (`parity.calibration_observations`), and
    `quantized_uint8_input` makes the input uint8).

    int8 quantizes the network body only (`float_nodes` stay float32, TFLite Micro runs both): its input is the
    standardized observation (an image: from its uint8 input on) and actions come from dequantized outputs.
    `mask_sizes`: a masked artifact's mask parts (calibrated with random masks: `parity.example_masks`). A recurrent
    `policy` is calibrated with the states it reaches on the representative rows (`parity.recurrent_states`).

    Raises:
        ValueError: an image's int8 input is not read by a QUANTIZE of scale 1 (`quantized_uint8_input`)."""
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model), signature_keys=["action"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # builtin ops only, no select TF ops
    if quantize in ("float16", "dynamic", "int8"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if quantize != "int8":
        return uint8_input(converter.convert())
    assert representative is not None  # int8: `export` passes its calibration rows
    rows = representative[np.linspace(0, len(representative) - 1, min(len(representative), 1000)).astype(int)]
    image = quantized_image_input(policy)
    if image:
        rows = rows.astype(np.float32)  # what `saved_model` takes for them

    masks = None if mask_sizes is None else example_masks(mask_sizes, len(rows), np.random.default_rng(0))
    states = None if policy is None or policy.lstm is None else recurrent_states(policy, rows)

    keys = artifact_inputs(policy) if policy is not None and per_key(policy) else None  # one input per Dict key

    def dataset():
        for i, row in enumerate(rows):  # spread over all recorded episodes
            if masks is None and states is None and keys is None:
                yield [row[None]]
                continue
            obs = {"obs": row[None]} if keys is None else dict(zip((k.name for k in keys), split_rows(keys, row[None])))
            inputs = {**obs, **({} if masks is None else {MASK_INPUT: masks[i : i + 1]})}
            yield {**inputs, **({} if states is None else dict(zip(STATE_INPUTS, (s[i : i + 1] for s in states))))}

    converter.representative_dataset = dataset
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the debugger's own tf.lite.Interpreter deprecation notice
        debugger = tf.lite.experimental.QuantizationDebugger(converter=converter, debug_dataset=dataset)
        nodes = float_nodes(debugger.calibrated_model, front=not image)
        debugger.options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=nodes)
        blob = debugger.get_nondebug_quantized_model()
    return quantized_uint8_input(blob) if image else uint8_input(blob)


def _edit(blob: bytes, change) -> bytes:
    """`blob` after `change(model, schema)` edited its flatbuffer object in place (returning True), else as it is."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(blob))
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model)) if change(model, schema) else blob


def _bytes_quantization(schema):
    quantization = schema.QuantizationParametersT()
    quantization.scale, quantization.zeroPoint = [1.0], [0]  # real value = the byte
    return quantization


def uint8_input(blob: bytes) -> bytes:
    """`blob` with each uint8 model input read by DEQUANTIZE (the input quantized with scale 1, zero point 0)
    instead of the converter's CAST to float32: the same values (the bytes as 0.0-255.0), but TFLite Micro's CAST
    takes no uint8 ("Input type UINT8 (3) not supported") and its DEQUANTIZE does. Models without such a CAST are
    returned as they are."""

    def change(model, schema) -> bool:
        builtin = schema.BuiltinOperator
        code_of = [max(code.builtinCode, code.deprecatedBuiltinCode) for code in model.operatorCodes]
        changed = False
        for graph in model.subgraphs:
            for op in graph.operators:
                if code_of[op.opcodeIndex] != builtin.CAST or op.inputs[0] not in list(graph.inputs):
                    continue
                tensor = graph.tensors[op.inputs[0]]
                if tensor.type != schema.TensorType.UINT8:
                    continue
                if builtin.DEQUANTIZE not in code_of:
                    code = schema.OperatorCodeT()
                    code.builtinCode = code.deprecatedBuiltinCode = builtin.DEQUANTIZE
                    code.version = 1  # DEQUANTIZE version 1: uint8 input
                    model.operatorCodes.append(code)
                    code_of.append(builtin.DEQUANTIZE)
                op.opcodeIndex = code_of.index(builtin.DEQUANTIZE)
                op.builtinOptionsType, op.builtinOptions = schema.BuiltinOptions.NONE, None
                tensor.quantization = _bytes_quantization(schema)
                changed = True
        return changed

    return _edit(blob, change)


def quantized_uint8_input(blob: bytes, name: str = "obs") -> bytes:
    """An int8 image artifact with its input `name` as uint8 bytes (scale 1, zero point 0): converted from a float32
    input (the bytes as 0.0-255.0) whose QUANTIZE to int8 has scale 1 and zero point -128 (the calibrated range
    exactly [0, 255]), that QUANTIZE now requantizes uint8 to int8 (the byte - 128: exact), for LiteRT and TFLite
    Micro alike. Other inputs (an action mask) stay float32. The converter's own `inference_input_type=tf.uint8`
    would turn every input to uint8, the mask too, and cannot keep float32 action ops (`float_nodes`).

    Raises:
        ValueError: the input is not read by such a QUANTIZE (its calibration images did not span 0-255)."""

    def change(model, schema) -> bool:
        code_of = [max(code.builtinCode, code.deprecatedBuiltinCode) for code in model.operatorCodes]
        for signature in model.signatureDefs:
            graph = model.subgraphs[signature.subgraphIndex]
            entry = next(item for item in signature.inputs if item.name.decode() == name)
            tensor = graph.tensors[entry.tensorIndex]
            readers = [op for op in graph.operators if entry.tensorIndex in list(op.inputs)]
            got = [
                (schema_name(schema, code_of[op.opcodeIndex]), *_scale_zero(graph.tensors[op.outputs[0]]))
                for op in readers
            ]
            if tensor.type != schema.TensorType.FLOAT32 or any(
                g[0] != "QUANTIZE" or abs(g[1] - 1.0) > 1e-6 or g[2] != -128 for g in got
            ):
                raise ValueError(
                    f"export: expected the int8 image input {name!r} read by QUANTIZE with scale 1 and zero point "
                    f"-128 (calibration images spanning 0-255), got {got}"
                )
            tensor.type, tensor.quantization = schema.TensorType.UINT8, _bytes_quantization(schema)
        return True

    return _edit(blob, change)


def schema_name(schema, code: int) -> str:
    """The name of builtin operator `code`."""
    return next(k for k, v in vars(schema.BuiltinOperator).items() if v == code)


def _scale_zero(tensor) -> tuple[float, int]:
    quantization = tensor.quantization
    if quantization is None or quantization.scale is None or not len(quantization.scale):
        return 0.0, 0
    return float(quantization.scale[0]), int(quantization.zeroPoint[0])
