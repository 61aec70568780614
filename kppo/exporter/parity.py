"""Running exported artifacts and checking them against the policy: `TFLiteRunner` (LiteRT; with the artifact's
metadata file checked against the model, `read_metadata`), the observations and action masks an artifact is checked
on, and the parity measure (`measure_parity`, `check_parity`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.exporter.inputs import ArtifactInput, split_rows
from kppo.gym_envs.spaces import input_dim, integer_input, is_image_space, one_line, space_shape

PARITY_TOLERANCE = 1e-5  # float32 artifacts: max |error| / (high - low) for Box actions


class ParityError(ValueError):
    """The artifact does not reproduce `Policy.get_action`."""


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
            if kind == "Box":
                low, high = (np.asarray(d[k], dtype=d["dtype"]).reshape(d["shape"]) for k in ("low", "high"))
                return gym.spaces.Box(low, high, tuple(d["shape"]), np.dtype(d["dtype"]))
            if kind == "Discrete":
                return gym.spaces.Discrete(d["n"], start=d["start"])
            if kind == "MultiDiscrete":
                return gym.spaces.MultiDiscrete(d["nvec"], start=d["start"])
            return gym.spaces.MultiBinary(d["n"])
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


def random_images(shape: tuple[int, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` uint8 images [count, *shape] for checks: a third uniform noise, a third sparse (each pixel 0 or 255,
    MinAtar-like), a third blocks of 4x4-pixel noise (edges and flat areas, as in rendered frames)."""
    images = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    sparse = (rng.random((count, *shape)) < rng.uniform(0.02, 0.3, size=(count,) + (1,) * len(shape))) * 255
    blocks = rng.integers(0, 256, size=(count, *[-(-d // 4) for d in shape]), dtype=np.uint8)
    for axis in range(1, blocks.ndim):
        blocks = np.repeat(blocks, 4, axis=axis)
    blocks = blocks[(slice(None), *[slice(0, d) for d in shape])]
    kind = np.arange(count) % 3
    return np.where(
        (kind == 1).reshape(-1, *[1] * len(shape)),
        sparse,
        np.where((kind == 2).reshape(-1, *[1] * len(shape)), blocks, images),
    ).astype(np.uint8)


def _sample_rows(policy: Policy, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Input rows from standard scores z [N, input_dim]: Box values mean + std * z (normalization statistics),
    Discrete / MultiDiscrete / MultiBinary values uniform over their range, a Dict's images `random_images`."""
    mean = np.asarray(policy.obs_scaling.mean, np.float64)
    std = np.sqrt(np.asarray(policy.obs_scaling.var, np.float64) + 1e-8)
    rows = np.zeros(z.shape)
    space = policy.observation_space
    for part in policy.layout:
        sub = space if part.key is None else space[part.key]  # type: ignore[index]
        if is_image_space(sub):
            rows[:, part.raw] = random_images(space_shape(sub), len(z), rng).reshape(len(z), -1)
        elif part.kind == "Box":
            rows[:, part.raw] = mean[part.encoded] + std[part.encoded] * z[:, part.raw]
        else:
            sizes = np.asarray(part.sizes or [2] * (part.raw.stop - part.raw.start))
            rows[:, part.raw] = np.asarray(part.starts or 0) + rng.integers(0, sizes, size=(len(z), len(sizes)))
    return rows.astype(policy.input_dtype)


def parity_observations(policy: Policy, count: int, seed: int = 0, recorded: np.ndarray | None = None) -> np.ndarray:
    """Input rows to check an artifact on: recorded ones first, then samples around the normalization statistics
    (70% within 3 std, 30% at 10-15 std, i.e. in the +-10 clip region; integers uniform), [count, input_dim]; for an
    image policy `random_images` after the recorded ones, [count, *input_shape] uint8."""
    rng = np.random.default_rng(seed)
    dim = policy.input_dim
    shape = policy.input_shape
    parts = [] if recorded is None else [np.asarray(recorded).astype(policy.input_dtype).reshape(-1, *shape)[:count]]
    missing = count - sum(len(p) for p in parts)
    if missing > 0 and policy.image:
        parts.append(random_images(shape, missing, rng))
    elif missing > 0:
        near = rng.normal(size=(missing, dim)) * 3.0
        far = rng.choice([-1.0, 1.0], size=(missing, dim)) * rng.uniform(10.0, 15.0, size=(missing, dim))
        parts.append(_sample_rows(policy, np.where(rng.random((missing, 1)) < 0.7, near, far), rng))
    return np.concatenate(parts)


def calibration_observations(policy: Policy, recorded: np.ndarray | None, seed: int) -> np.ndarray:
    """int8 calibration data without recorded observations or an env: samples within the normalization statistics'
    bulk (mean +- std * N(0, 1)); the far, clipped samples of the parity set would waste the int8 input range. An
    image policy's: the recorded images (else `random_images`), one pixel of the first set to 0 and one to 255, so
    the calibrated input range is the bytes' whole range [0, 255] (every byte an exact int8 level, none clipped),
    at the cost of two pixels in one image (a black and a white frame would widen every activation's range)."""
    if policy.image:
        rng = np.random.default_rng(seed + 1)
        images = random_images(policy.input_shape, 500, rng) if recorded is None else np.asarray(recorded)
        images = images.astype(np.uint8).reshape(-1, *policy.input_shape).copy()
        first = images[0].reshape(-1)  # a view: writes go into the first image
        first[0], first[-1] = 0, 255
        return images
    if recorded is not None:
        return np.asarray(recorded).astype(policy.input_dtype).reshape(-1, policy.input_dim)
    rng = np.random.default_rng(seed + 1)
    return _sample_rows(policy, rng.normal(size=(500, policy.input_dim)), rng)


def mask_parts(policy: Policy) -> list[int]:
    """The widths of the policy's mask parts: [n] for Discrete(n), nvec for MultiDiscrete."""
    space = policy.action_space
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in space.nvec]
    return [int(cast(gym.spaces.Discrete, space).n)]


def example_masks(sizes: list[int], count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` random masks [count, sum(sizes)] float32 0/1: each action allowed with probability 1/2, one at least
    per part."""
    masks = rng.random((count, int(sum(sizes)))) < 0.5
    for start, size in zip(np.cumsum([0, *sizes[:-1]]), sizes):
        masks[np.arange(count), start + rng.integers(0, size, count)] = True
    return masks.astype(np.float32)


def parity_masks(policy: Policy, count: int, seed: int = 0) -> np.ndarray | None:
    """Random action masks [count, mask_size] for a masked policy (`example_masks`), None for others."""
    if not policy.action_masks:
        return None
    return example_masks(mask_parts(policy), count, np.random.default_rng(seed + 2)).astype(bool)


def measure_parity(run, policy: Policy, obs: np.ndarray, masks: np.ndarray | None = None) -> dict[str, float]:
    """Artifact vs `Policy.get_action` on `obs` (with `masks` for a masked artifact): for Box actions the error
    relative to the action range; for discrete actions the fraction of differing actions among observations whose
    top two allowed logits differ by > 1e-4."""
    flat = policy.encode(obs)
    want = policy.get_action_flat(flat, None, masks)
    got = np.asarray(run(obs) if masks is None else run(obs, masks)).reshape(want.shape)
    logits = None
    if not isinstance(policy.action_space, gym.spaces.Box):
        logits = policy.dist.masked_np(np.asarray(policy.actor(tf.constant(np.asarray(policy.normalize(flat))))), masks)
    return _compare(policy, want, got, logits)


def _compare(policy: Policy, want: np.ndarray, got: np.ndarray, logits: np.ndarray | None) -> dict[str, float]:
    """The parity figures of actions `got` against `want` (see `measure_parity`); `logits`: the policy's (masked)
    logits at each row, for discrete actions."""
    if not np.all(np.isfinite(got)):
        return {"max_error": float("inf"), "mean_error": float("inf"), "non_finite": float(np.mean(~np.isfinite(got)))}
    space = policy.action_space
    if isinstance(space, gym.spaces.Box):
        err = np.abs(got.astype(np.float64) - want) / (space.high - space.low)
        return {"max_error": float(err.max()), "mean_error": float(err.mean()), "non_finite": 0.0}
    assert logits is not None  # given for discrete actions
    top2 = np.sort(logits, axis=-1)[..., -2:]
    decisive = (top2[..., 1] - top2[..., 0] > 1e-4).reshape(len(want), -1).all(axis=1)
    wrong = (got != want).reshape(len(want), -1).any(axis=1)
    rate = float(np.mean(wrong[decisive])) if decisive.any() else 0.0
    return {"max_error": rate, "mean_error": float(np.mean(wrong)), "non_finite": 0.0}


def recurrent_states(policy: Policy, rows: np.ndarray, episode_length: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(h, c) [N, units]: the state a recurrent policy holds before each of `rows` [N, input_dim], played in order as
    episodes of `episode_length` steps from zeros (what int8 calibration of its state inputs sees)."""
    units, states = policy.lstm.units, []
    h = c = np.zeros((1, units), np.float32)
    for i, row in enumerate(np.asarray(rows)):
        if i % episode_length == 0:
            h = c = np.zeros((1, units), np.float32)
        states.append((h, c))
        _, h, c, _ = policy.step_flat(policy.encode(row[None]), h, c, np.zeros(1, bool))
    return cast(tuple[np.ndarray, np.ndarray], tuple(np.concatenate(part) for part in zip(*states)))


def measure_recurrent_parity(
    run, policy: Policy, obs: np.ndarray, masks: np.ndarray | None = None, episode_length: int = 50
) -> dict[str, float]:
    """`measure_parity` for a recurrent artifact (`run(obs, h, c, masks) -> (actions, h, c)`): the rows of `obs` cut
    into episodes of `episode_length` steps, run side by side, the state carried from zeros at each episode's start
    (`Policy.step_flat`); also the state's largest absolute difference (`state_max_error`)."""
    episodes = len(obs) // episode_length
    rows = np.asarray(obs)[: episodes * episode_length].reshape(episodes, episode_length, -1)
    mask_rows = (
        None if masks is None else np.asarray(masks)[: episodes * episode_length].reshape(episodes, episode_length, -1)
    )
    h = c = np.zeros((episodes, policy.lstm.units), np.float32)
    run_h, run_c = h, c
    want: list[np.ndarray] = []
    got: list[np.ndarray] = []
    logits: list[Any] = []
    state_error = 0.0
    for t in range(episode_length):
        step_mask = None if mask_rows is None else mask_rows[:, t]
        action, h, c, params = policy.step_flat(
            policy.encode(rows[:, t]), h, c, np.zeros(episodes, bool), None, step_mask
        )
        run_action, run_h, run_c = run(rows[:, t], run_h, run_c, step_mask)
        state_error = max(state_error, float(np.abs(run_h - h).max()), float(np.abs(run_c - c).max()))
        want.append(action)
        got.append(np.asarray(run_action).reshape(action.shape))
        logits.append(params)
    want_all, got_all = np.concatenate(want), np.concatenate(got)
    return {
        **_compare(policy, want_all, got_all, np.concatenate(logits) if not isinstance(logits[0], tuple) else None),
        "state_max_error": state_error,
    }


def check_parity(parity: dict[str, float], format: str = "tflite") -> None:
    """Raises `ParityError` unless a float32 artifact matched the policy (see `measure_parity`)."""
    if parity["non_finite"] or parity["max_error"] > PARITY_TOLERANCE:
        raise ParityError(
            f"export: the {format} artifact does not reproduce Policy.get_action (max error {parity['max_error']:.3g},"
            f" non-finite {parity['non_finite']:.0%}, tolerance {PARITY_TOLERANCE}); did its weights load?"
        )
