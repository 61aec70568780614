"""Running exported artifacts: `TFLiteRunner` (LiteRT, any number of rows; the artifact's metadata file read and
checked against the model: `read_metadata`, `metadata_space`), and an artifact's input rows (`input_batch`). What an
artifact is checked on and how is `kppo.exporter.parity`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from kppo.agent.checkpoint import space_from_dict
from kppo.exporter.inputs import ArtifactInput, split_rows
from kppo.gym_envs.spaces import input_dim, integer_input, is_image_space, one_line, space_shape

INTEGER_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
MASK_INPUT = "action_mask"  # a masked artifact's second input: float32 [batch, mask_size], 1 = allowed
STATE_INPUTS = ("state_h", "state_c")  # a recurrent artifact's state inputs and outputs: float32 [batch, units]


TFLITE_IDENTIFIER = b"TFL3"  # a TFLite flatbuffer's file identifier, bytes 4-8
MAX_TENSOR_VALUES = 2**26  # the values of a tensor `TFLiteRunner` allocates (256 MB of float32)


@contextlib.contextmanager
def _loading(name: str):
    """LiteRT's refusals of a model (its verifier, kernels, signatures: several lines, no file name) as one
    ValueError line naming the file."""
    try:
        yield
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"{name}: expected a kppo artifact LiteRT can load, got: {_line(error)}") from None


def tensor_values(detail: dict) -> int:
    """The number of values of a tensor (LiteRT's tensor details)."""
    return int(np.prod(detail["shape"], dtype=np.int64))


def _line(error: BaseException) -> str:
    """An exception's message on one line (LiteRT's span several)."""
    return " ".join(str(error).split()) or type(error).__name__


class TFLiteRunner:
    """Runs the `action` signature of a .tflite file with ai_edge_litert, any number of rows (batch-1 and
    dynamic-batch models are called row by row, other fixed-batch ones in chunks of their batch); a masked artifact
    also takes the action masks. An artifact with one input per Dict key (`kppo.exporter.inputs`) takes the
    policy's flat input rows, split by `inputs`.

    A path whose metadata file (`<path>.metadata.json`) lies beside it is read with it (`read_metadata`: its
    `sha256` that of the file, its spaces those of the model's tensors): `metadata`, `observation_space` and
    `action_space` then describe the artifact (None otherwise). Every refusal is one ValueError line naming the file:
    not a TFLite flatbuffer, a model LiteRT cannot load or that is not a kppo artifact, a damaged or mismatched pair.
    """

    def __init__(self, model: bytes | str | Path, inputs: list[ArtifactInput] | None = None):
        from ai_edge_litert.interpreter import Interpreter

        name = "model" if isinstance(model, bytes) else Path(model).name
        content = model if isinstance(model, bytes) else Path(model).read_bytes()
        if len(content) < 8 or content[4:8] != TFLITE_IDENTIFIER:
            raise ValueError(
                f"{name}: expected a TFLite flatbuffer (file identifier {TFLITE_IDENTIFIER.decode()} at bytes 4-8), "
                f"got {len(content)} bytes starting {content[:8]!r}"
            )
        self.content = content
        self.name = name
        beside = None if isinstance(model, bytes) else Path(model).with_name(name + ".metadata.json")
        #: The metadata file beside the model's path (its checksum checked before LiteRT reads the model), or None.
        self.metadata: dict | None = read_metadata(beside, content) if beside and beside.is_file() else None
        with _loading(name):
            self.interpreter = Interpreter(model_content=content)
            largest = max((tensor_values(d) for d in self.interpreter.get_tensor_details()), default=0)
        if largest > MAX_TENSOR_VALUES:  # a damaged shape: LiteRT would allocate (and touch) it all, for seconds
            raise ValueError(
                f"{name}: expected tensors of at most {MAX_TENSOR_VALUES:,} values (a larger batch exports with "
                f"batch_size=None), got one of {largest:,}"
            )
        with _loading(name):  # the signature's tensor indices are not verified with the flatbuffer: reading raises
            self.interpreter.allocate_tensors()
            self.runner = self.interpreter.get_signature_runner("action")
            details, output_details = self.runner.get_input_details(), self.runner.get_output_details()
        names = [key for key in details if key != MASK_INPUT and key not in STATE_INPUTS]
        if len(names) > 1 and inputs is None:
            raise ValueError(
                f"inputs: expected the artifact inputs (kppo.exporter.inputs.artifact_inputs) for a model with "
                f"observation inputs {names}, got None"
            )
        shapes = {key: d["shape"].tolist() for key, d in details.items()}
        state = [shapes[key] for key in STATE_INPUTS if key in shapes]
        outputs = set(output_details)
        if (
            not names
            or any(len(shapes[key]) < 2 for key in names)
            or len(state) == 1
            or any(len(shape) != 2 for shape in state)
            or not outputs
            or (state and not {"action", *STATE_INPUTS} <= outputs)
        ):
            raise ValueError(
                f"{name}: expected a kppo artifact's inputs [batch, ...] and outputs, got inputs {shapes} and "
                f"outputs {sorted(outputs)}"
            )
        self.inputs = inputs if inputs is not None and len(inputs) > 1 else None
        self.input_names = names[:1] if self.inputs is None else [item.name for item in self.inputs]
        self.input_name = self.input_names[0]
        self.masked = MASK_INPUT in details
        self.units = int(details[STATE_INPUTS[0]]["shape"][1]) if STATE_INPUTS[0] in details else None
        self.fixed_batch = int(details[self.input_name]["shape"][0])
        if self.inputs is None:
            self.input_dtype = np.dtype(details[self.input_name]["dtype"])
            self.input_shape = tuple(int(d) for d in details[self.input_name]["shape"][1:])  # an image: (H, W, C)
        else:  # the flat input rows the per-key inputs are cut from
            self.input_dtype = np.dtype(np.float32)
            self.input_shape = (self.inputs[-1].columns.stop,)
        self.input_dim = int(np.prod(self.input_shape))
        self.observation_space: gym.spaces.Space | None = None
        self.action_space: gym.spaces.Space | None = None
        if self.metadata is not None:
            self.observation_space, self.action_space = _described_spaces(self, name + ".metadata.json")

    def _split(self, obs: np.ndarray) -> list[np.ndarray]:
        """Input rows -> one array per observation input."""
        if self.inputs is None:
            return [np.asarray(obs).astype(self.input_dtype)]
        return split_rows(self.inputs, obs)

    def step(self, obs: np.ndarray, h: np.ndarray, c: np.ndarray, masks: np.ndarray | None = None) -> tuple:
        """A recurrent artifact on one row at a time: (actions, h, c) for rows `obs` [N, input_dim] with states
        [N, units] (each row its own state)."""
        obs, out = input_batch(obs, self.input_shape, self.input_dtype), []
        for i in range(len(obs)):
            inputs = {
                **dict(zip(self.input_names, self._split(obs[i : i + 1]))),
                STATE_INPUTS[0]: h[i : i + 1],
                STATE_INPUTS[1]: c[i : i + 1],
            }
            if masks is not None:
                inputs[MASK_INPUT] = np.asarray(masks[i : i + 1], np.float32)
            result = self._invoke(**inputs)
            out.append((result["action"], result[STATE_INPUTS[0]], result[STATE_INPUTS[1]]))
        return tuple(np.concatenate(part) for part in zip(*out))

    def __call__(self, obs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        if self.units is not None:
            raise ValueError("obs: a recurrent artifact acts with its state; use step(obs, h, c)")
        obs = input_batch(obs, self.input_shape, self.input_dtype)
        if self.masked != (masks is not None):
            raise ValueError(
                f"masks: expected {'a mask per row' if self.masked else 'None'} for this artifact, got "
                f"{'None' if masks is None else 'masks'}"
            )
        if not len(obs):  # no rows: no actions (LiteRT is not called)
            output = next(iter(self.runner.get_output_details().values()))
            return np.zeros((0, *output["shape"][1:]), output["dtype"])
        names = self.input_names + ([] if masks is None else [MASK_INPUT])
        arrays = self._split(obs) + ([] if masks is None else [np.asarray(masks, np.float32)])
        if self.fixed_batch == 1:
            return np.concatenate([self._run(names, [x[i : i + 1] for x in arrays]) for i in range(len(obs))])
        # a fixed batch: chunks of it, the last one padded with its last row (an image model's reshapes are fixed)
        step, chunks = self.fixed_batch, []
        for i in range(0, len(obs), step):
            part = [x[i : i + step] for x in arrays]
            pad = step - len(part[0])
            part = [np.concatenate([x, np.repeat(x[-1:], pad, axis=0)]) if pad else x for x in part]
            chunks.append(self._run(names, part)[: step - pad])
        return np.concatenate(chunks)

    def _run(self, names: list[str], arrays: list[np.ndarray]) -> np.ndarray:
        return next(iter(self._invoke(**dict(zip(names, arrays))).values()))

    def _invoke(self, **inputs: np.ndarray) -> dict:
        """The `action` signature on `inputs`; a kernel that fails at run time (a damaged model whose shapes still
        load) is one ValueError line."""
        try:  # the inputs are checked (`input_batch`): LiteRT's errors here are the model's
            return self.runner(**inputs)
        except (ValueError, RuntimeError) as error:  # "Tensor data is null", a kernel failing at run time
            raise ValueError(f"{self.name}: LiteRT could not run it: {_line(error)}") from None

    def ops(self) -> list[str]:
        """Names of the builtin operators in the model (what a TFLite Micro op resolver must register)."""
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        plain = Interpreter(
            model_content=self.content, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        plain.allocate_tensors()
        return sorted({op["op_name"] for op in plain._get_ops_details()})


def input_batch(obs, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """`obs` as an artifact's input rows [N, *shape] of `dtype`; one-line errors for anything but numbers, another
    shape (LiteRT would resize the input and run on anyway), NaN or infinite values (the artifact would act on them
    without a sign), non-integers for an integer input and, for a uint8 (image) input, anything but integers in
    [0, 255] (a float image scaled to [0, 1] would be read as nearly black)."""
    try:
        obs = np.asarray(obs)
    except (ValueError, TypeError) as error:  # ragged lists, objects numpy cannot hold as one array
        raise ValueError(f"obs: expected input rows of numbers, got {type(obs).__name__} ({_line(error)})") from None
    if obs.dtype.kind not in "biuf":
        raise ValueError(f"obs: expected input rows of numbers (bool, integer or float), got dtype {obs.dtype}")
    if obs.ndim != len(shape) + 1 or obs.shape[1:] != tuple(shape):
        rows = "images" if dtype == np.uint8 else "input rows"
        raise ValueError(f"obs: expected {rows} [N, {', '.join(map(str, shape))}], got shape {obs.shape}")
    if dtype == np.uint8 and obs.dtype != np.uint8:
        if not np.issubdtype(obs.dtype, np.integer) or (obs.size and (obs.min() < 0 or obs.max() > 255)):
            raise ValueError(f"obs: expected uint8 images (bytes 0-255), got {obs.dtype}")
    with np.errstate(over="ignore", invalid="ignore"):  # beyond float32's range: infinite, refused below
        wide = obs.astype(np.float64) if dtype.kind == "i" else obs.astype(dtype)
    if wide.dtype.kind == "f" and not np.isfinite(wide).all():
        row = int(np.flatnonzero(~np.isfinite(wide).reshape(len(obs), -1).all(axis=1))[0])
        raise ValueError(f"obs: expected finite {dtype} values, got {obs[row].reshape(-1).tolist()} in row {row}")
    if dtype.kind == "i" and wide.size:
        info = np.iinfo(dtype)
        if wide.min() < info.min or wide.max() > info.max or not np.array_equal(wide, np.round(wide)):
            raise ValueError(f"obs: expected integers of {dtype} (the artifact's input), got {obs.dtype} values")
    return obs.astype(dtype)


SPACE_KEYS = {  # the keys of each space description (`kppo.agent.checkpoint.space_to_dict`)
    "Box": ("low", "high", "shape", "dtype"),
    "Discrete": ("n", "start"),
    "MultiDiscrete": ("nvec", "start"),
    "MultiBinary": ("n",),
    "Dict": ("spaces",),
}


def read_metadata(path: Path, content: bytes) -> dict:
    """The metadata file `path` of the .tflite model `content`, checked: UTF-8 JSON of an object, its `sha256` (when
    recorded: older artifacts have none) that of `content`, its spaces gymnasium spaces (`metadata_space`), its
    `training_config` an object or null whose `env` is a string or null. One-line errors naming the file."""
    try:
        text = path.read_bytes().decode("utf-8")
        metadata = json.loads(text)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path.name}: expected UTF-8 JSON, got a byte that is not UTF-8 at {error.start}") from None
    except ValueError as error:  # JSONDecodeError, and integers of more digits than Python converts
        raise ValueError(f"{path.name}: expected JSON, got {_line(error)}") from None
    except RecursionError:
        raise ValueError(f"{path.name}: expected an artifact's metadata, got JSON nested too deeply") from None
    if not isinstance(metadata, dict) or "observation_space" not in metadata:
        got = f"keys {sorted(metadata)}" if isinstance(metadata, dict) else one_line(metadata)[:80]
        raise ValueError(f"{path.name}: expected a JSON object with observation_space (an artifact's), got {got}")
    digest, got = metadata.get("sha256"), hashlib.sha256(content).hexdigest()
    if digest is not None and digest != got:
        raise ValueError(
            f"{path.name}: expected the metadata of the file beside it (sha256 {got[:12]}...), got sha256 "
            f"{one_line(digest)[:20]} (a damaged file, or the metadata of another artifact)"
        )
    config = metadata.get("training_config")
    if not (config is None or isinstance(config, dict)) or not isinstance(
        (config or {}).get("env", ""), (str, type(None))
    ):
        raise ValueError(
            f"{path.name}: training_config: expected an object whose env is a gymnasium id, got {one_line(config)[:80]}"
        )
    return metadata


def metadata_space(description: Any, where: str) -> gym.spaces.Space:
    """The gymnasium space a metadata space description holds (as `kppo.agent.checkpoint.space_from_dict` builds
    it), or a one-line ValueError naming `where`."""
    kind = description.get("type") if isinstance(description, dict) else None
    if not isinstance(kind, str) or kind not in SPACE_KEYS:
        raise ValueError(
            f"{where}: expected a space ('type' one of {list(SPACE_KEYS)}), got {one_line(description)[:80]}"
        )
    missing = [key for key in SPACE_KEYS[kind] if key not in description]
    if missing:
        raise ValueError(f"{where}: expected the keys {list(SPACE_KEYS[kind])} of a {kind} space, missing {missing}")
    d = description
    if kind == "Dict":
        if not isinstance(d["spaces"], dict):
            raise ValueError(f"{where}.spaces: expected an object of spaces, got {one_line(d['spaces'])[:80]}")
        return gym.spaces.Dict({key: metadata_space(sub, f"{where}.spaces.{key}") for key, sub in d["spaces"].items()})
    try:
        with warnings.catch_warnings():  # gymnasium's precision warnings: kppo.agent.checkpoint warns when it builds
            warnings.simplefilter("ignore")
            return space_from_dict(d)
    except (ValueError, TypeError, OverflowError) as error:  # numpy's and gymnasium's refusals of these values
        raise ValueError(f"{where}: expected a valid {kind} space, got {one_line(d)[:80]} ({_line(error)})") from None


def _flat(space: gym.spaces.Space) -> bool:
    """A space kppo's artifacts take as one flat input: a Box, Discrete, MultiDiscrete or MultiBinary, or a non-empty
    Dict of those."""
    parts = list(space.spaces.values()) if isinstance(space, gym.spaces.Dict) else [space]
    return bool(parts) and all(isinstance(part, (gym.spaces.Box, *INTEGER_SPACES)) for part in parts)


def _check_input_shapes(runner: TFLiteRunner, entries: Any, name: str) -> None:
    """The metadata's `inputs` (when it lists them) hold the model's observation input shapes, batch included
    (None: a dynamic batch); a one-line ValueError naming the file `name` otherwise (a damaged batch dimension would
    have `TFLiteRunner` pad every call to it)."""
    if entries is None:
        return
    details = runner.runner.get_input_details()
    model = {key: [None if d == -1 else int(d) for d in details[key]["shape_signature"]] for key in runner.input_names}
    listed = {
        e["name"]: e.get("shape")
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict) and isinstance(e.get("name"), str)
    }
    if any(listed.get(key) != shape for key, shape in model.items()):
        raise ValueError(f"{name}: inputs: expected the model's input shapes {model}, got {one_line(entries)[:120]}")


def _described_spaces(runner: TFLiteRunner, name: str) -> tuple[gym.spaces.Space, gym.spaces.Space | None]:
    """The metadata's (observation space, action space or None), refused in one line naming the file `name` unless
    they are the spaces of the model's tensors: the input (size, dtype, an image's shape), the action output (rank,
    dtype, size) and the mask input (size)."""
    metadata = cast(dict, runner.metadata)
    space = metadata_space(metadata["observation_space"], f"{name}: observation_space")
    image = is_image_space(space)
    if image:
        fits = runner.input_dtype == np.uint8 and space_shape(space) == runner.input_shape
    else:
        width = input_dim(space) if _flat(space) else -1
        dtype = np.dtype(np.int32 if runner.inputs is None and integer_input(space) else np.float32)
        fits = width == runner.input_dim and dtype == runner.input_dtype
    if not fits:
        raise ValueError(
            f"{name}: observation_space: expected the model's input ({runner.input_dtype} {list(runner.input_shape)}),"
            f" got {one_line(space)}"
        )
    _check_input_shapes(runner, metadata.get("inputs"), name)
    if "action_space" not in metadata:
        return space, None
    action = metadata_space(metadata["action_space"], f"{name}: action_space")
    outputs = runner.runner.get_output_details()
    output = outputs["action"] if "action" in outputs else next(iter(outputs.values()))
    shape, dtype = output["shape"].tolist()[1:], np.dtype(output["dtype"])
    mask: int | None = None  # the mask input's size the action space asks
    if isinstance(action, gym.spaces.Discrete):
        fits, mask = shape == [] and dtype.kind == "i", int(action.n)
    elif isinstance(action, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        width = int(np.prod(space_shape(action)))
        fits = shape == [width] and (dtype.kind == "f") == isinstance(action, gym.spaces.Box)
        mask = int(np.sum(action.nvec)) if isinstance(action, gym.spaces.MultiDiscrete) else None
    else:
        fits = False
    masks = runner.runner.get_input_details().get(MASK_INPUT)
    if masks is not None and (mask is None or masks["shape"].tolist()[1:] != [mask]):
        fits = False
    if not fits:
        raise ValueError(f"{name}: action_space: expected the model's action ({dtype} {shape}), got {one_line(action)}")
    return space, action
