"""`Controller`: loads a kppo TFLite artifact and its metadata and acts on raw observations.

Dependencies: numpy and ai-edge-litert only (`pip install ./export`, or just those two packages); no gymnasium.

    from kppo_runtime.runtime import Controller
    controller = Controller("policy.tflite")      # reads policy.tflite.metadata.json beside it
    action = controller.act(obs)                  # raw observation in, env action out
    action = controller.act(obs, mask)            # a policy trained with action masks: 1/True = allowed
    controller.reset()                            # a recurrent policy: call at every episode start (the state
                                                  # (h, c) is carried from call to call inside the controller)

The artifact's input row is the raw observation flattened: Box values in C order, a Discrete observation as its integer,
MultiDiscrete and MultiBinary observations as their integers, the parts of a Dict concatenated in the metadata's key
order. The artifact itself one-hot encodes the integers (see `metadata["input"]`: dtype int32 when every part is an
integer, float32 otherwise). An image observation (a uint8 Box (H, W, C) or (C, H, W) of bytes 0-255) goes in as it
is: the artifact's input is uint8 [1, *shape] in the env's layout (`metadata["input"]["layout"]`), and the artifact
casts, divides by 255 and transposes it itself. A Dict observation holding an image goes in as the dict itself: the
artifact has one input per key (`metadata["inputs"]`: `obs_<key>`, an image key uint8 as it is, a Box key float32
flattened, an integer key int32), and `act` feeds each key to its input.

Before LiteRT reads the model, the controller checks the pair (`kppo_runtime.checks`): the metadata's JSON and the
fields it reads, TFLite's file identifier, the model's SHA-256 against the metadata's `sha256`, then the model's
tensors against the spaces the metadata describes. `act` refuses observations of another size or dtype, NaN and
infinite values, and integers outside an integer space. Every refusal is one ValueError line naming the file, field
or observation.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from kppo_runtime.checks import (
    INTEGER_SPACES,
    brief,
    check_digest,
    as_input,
    finite,
    integers_of,
    line,
    load_metadata,
    numbers,
    read_model,
    space_width,
)


def flatten(observation_space: dict, obs: Any, where: str = "obs") -> np.ndarray:
    """One raw observation -> the artifact's input row [input_dim] (see the module docstring), float64 or int64;
    one-line errors naming `where` for what is not an observation of the space (a Dict's keys, numbers, integers of
    an integer space)."""
    if observation_space["type"] == "Dict":
        spaces = observation_space["spaces"]
        if not isinstance(obs, dict) or set(obs) != set(spaces):
            got = sorted(map(str, obs)) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"{where}: expected a dict with keys {sorted(spaces)}, got {got}")
        return np.concatenate([flatten(sub, obs[key], f"{where}[{key!r}]") for key, sub in spaces.items()])
    values = numbers(obs, where)
    if observation_space["type"] in INTEGER_SPACES:
        return integers_of(observation_space, values, where)
    return values.astype(np.float64).reshape(-1)


def is_image(observation_space: dict) -> bool:
    """An image Box (the rule kppo and Stable-Baselines3 use): 3-D, uint8, every low 0 and every high 255."""
    return (
        observation_space["type"] == "Box"
        and observation_space["dtype"] == "uint8"
        and len(observation_space["shape"]) == 3
        and bool(np.all(np.asarray(observation_space["low"]) == 0))
        and bool(np.all(np.asarray(observation_space["high"]) == 255))
    )


def example_observations(observation_space: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` valid input rows [count, input_dim] for checks: N(0, 3^2) for Box values, uniform valid integers;
    for an image, uint8 images [count, *shape]: half uniform noise, half sparse (pixels 0 or 255)."""
    kind = observation_space["type"]
    if is_image(observation_space):
        shape = tuple(observation_space["shape"])
        noise = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
        sparse = (rng.random((count, *shape)) < 0.1).astype(np.uint8) * 255
        return np.where((np.arange(count) % 2 == 1).reshape(-1, 1, 1, 1), sparse, noise)
    if kind == "Dict":
        parts = [example_observations(sub, count, rng) for sub in observation_space["spaces"].values()]
        return np.concatenate(parts, axis=1)
    if kind == "Discrete":
        return observation_space["start"] + rng.integers(0, observation_space["n"], size=(count, 1))
    if kind == "MultiDiscrete":
        nvec = np.asarray(observation_space["nvec"]).reshape(-1)
        start = np.broadcast_to(np.asarray(observation_space["start"]).reshape(-1), nvec.shape)
        return start + rng.integers(0, nvec, size=(count, len(nvec)))
    if kind == "MultiBinary":
        return rng.integers(0, 2, size=(count, int(np.prod(observation_space["n"]))))
    return rng.normal(size=(count, int(np.prod(observation_space["shape"])))) * 3.0


def example_masks(action_space: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` random action masks [count, mask_size] (float32 0/1) for checks: each action allowed with probability
    1/2, at least one per dimension."""
    sizes = [int(action_space["n"])] if action_space["type"] == "Discrete" else [int(n) for n in action_space["nvec"]]
    masks = rng.random((count, sum(sizes))) < 0.5
    for start, size in zip(np.cumsum([0, *sizes[:-1]]), sizes):
        masks[np.arange(count), start + rng.integers(0, size, count)] = True
    return masks.astype(np.float32)


MASK_INPUT = "action_mask"
MAX_TENSOR_VALUES = 2**26  # the values of a tensor the controller allocates (256 MB of float32)
STATE_NAMES = ("state_h", "state_c")  # a recurrent artifact's state inputs and outputs


class Controller:
    """A policy artifact ready to act: `act(obs)` for one observation, `act(obs, mask)` for an artifact with an
    action-mask input; a recurrent artifact's state is kept here (`reset()` at each episode start)."""

    def __init__(
        self, artifact: str | Path, metadata: str | Path | None = None, num_threads: int = 1, delegates: bool = True
    ):
        """`delegates`: LiteRT's default delegates (XNNPACK); False runs its builtin kernels only, silently.

        Raises:
            ValueError: one line naming the file: a missing or damaged model or metadata file
                (`kppo_runtime.checks`), a metadata file of another artifact, a model LiteRT cannot load or that is
                not a kppo artifact (no `action` signature, inputs or outputs the metadata does not describe).
        """
        artifact = Path(artifact)
        #: The model file's name, what every error about it starts with.
        self.name = artifact.name
        model = read_model(artifact)
        self.metadata = load_metadata(artifact, metadata)
        check_digest(model, self.name, self.metadata)
        no_delegates = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
        resolver = {} if delegates else no_delegates
        with self._loading():
            self.interpreter = Interpreter(model_content=model, num_threads=num_threads, **resolver)
            largest = max(
                (int(np.prod(d["shape"], dtype=np.int64)) for d in self.interpreter.get_tensor_details()), default=0
            )
        if largest > MAX_TENSOR_VALUES:  # a damaged shape: LiteRT would allocate (and touch) it all, for seconds
            raise ValueError(
                f"{self.name}: expected tensors of at most {MAX_TENSOR_VALUES:,} values, got one of {largest:,}"
            )
        with self._loading():
            self.interpreter.allocate_tensors()
            inputs, outputs = self.interpreter.get_input_details(), self.interpreter.get_output_details()
        ins, outs = self._signature()
        self._check_tensors(ins, outs, inputs, outputs)
        #: Positions of the observation and the mask among the model's inputs (TFLite Micro sets inputs by position).
        self.mask_position = next((i for i, d in enumerate(inputs) if MASK_INPUT in d["name"]), None)
        self.obs_position = next(
            (
                i
                for i, d in enumerate(inputs)
                if i != self.mask_position and not any(name in d["name"] for name in STATE_NAMES)
            ),
            None,
        )
        if self.obs_position is None:
            raise ValueError(f"{self.name}: expected an observation input, got inputs {[d['name'] for d in inputs]}")
        self._input = inputs[self.obs_position]
        self._mask = None if self.mask_position is None else inputs[self.mask_position]
        self._check_signature(ins, outs)
        position_of = {d["index"]: i for i, d in enumerate(inputs)}
        entries = self.metadata.get("inputs") or []
        #: One input per Dict key (a Dict holding an image): (metadata entry, tensor index) in the metadata's order.
        self.key_inputs = [(entry, ins[entry["name"]]["index"]) for entry in entries] if len(entries) > 1 else []
        #: Positions of the observation inputs among the model's inputs (one, or one per Dict key).
        self.obs_positions = [position_of[index] for _, index in self.key_inputs] or [self.obs_position]
        self.recurrent = STATE_NAMES[0] in ins
        #: Output positions (TFLite Micro reads outputs by position): the action's, and the state's (h, c).
        positions = {d["index"]: i for i, d in enumerate(outputs)}
        self.action_position = positions[outs["action" if self.recurrent else next(iter(outs))]["index"]]
        self._output = outputs[self.action_position]
        self._state_in = [ins[name]["index"] for name in STATE_NAMES] if self.recurrent else []
        self._state_out = [outs[name]["index"] for name in STATE_NAMES] if self.recurrent else []
        #: Input positions of (h, c) for a recurrent artifact.
        self.state_positions = [position_of[ins[name]["index"]] for name in STATE_NAMES] if self.recurrent else []
        self.units = int(ins[STATE_NAMES[0]]["shape"][1]) if self.recurrent else None
        self.reset()
        #: One input row's shape: (obs_dim,), or an image's (H, W, C) / (C, H, W).
        self.input_shape = tuple(int(d) for d in self._input["shape"][1:])
        self.obs_dim = int(np.prod(self.input_shape))
        self.mask_size = None if self._mask is None else int(self._mask["shape"][1])
        self.input_dtype = np.dtype(self._input["dtype"])
        self.image = self.input_dtype == np.uint8
        self.discrete = self.metadata["action_space"]["type"] == "Discrete"
        check_described(self)

    @contextlib.contextmanager
    def _loading(self):
        """LiteRT's refusals of the model (its verifier, kernels and signatures: several lines, no file name) as one
        ValueError line naming the file."""
        try:
            yield
        except (ValueError, RuntimeError) as error:
            raise ValueError(f"{self.name}: expected a model LiteRT can load, got: {line(error)}") from None

    def _signature(self) -> tuple[dict, dict]:
        """The `action` signature's (inputs, outputs) by name; one-line errors when the model has none, or one whose
        tensors LiteRT cannot read."""
        try:
            signature = self.interpreter.get_signature_runner("action")
        except ValueError:
            got = sorted(self.interpreter.get_signature_list())
            raise ValueError(f"{self.name}: expected a kppo artifact's 'action' signature, got {got}") from None
        with self._loading():  # its tensor indices are not verified with the flatbuffer: reading them raises
            return signature.get_input_details(), signature.get_output_details()

    def _check_tensors(self, ins: dict, outs: dict, inputs: list, outputs: list) -> None:
        """A one-line error unless the `action` signature's tensors are the model's inputs and outputs (LiteRT reads
        a damaged model's signature indices unverified)."""
        signature = sorted(d["index"] for d in ins.values()), sorted(d["index"] for d in outs.values())
        model = sorted(d["index"] for d in inputs), sorted(d["index"] for d in outputs)
        if not (set(signature[0]) <= set(model[0]) and set(signature[1]) <= set(model[1])):
            raise ValueError(
                f"{self.name}: expected the 'action' signature's tensors among the model's inputs {model[0]} and "
                f"outputs {model[1]}, got inputs {signature[0]} and outputs {signature[1]}"
            )

    def _check_signature(self, ins: dict, outs: dict) -> None:
        """One-line errors for a model that is not a kppo artifact: no output, Dict key or
        recurrent state inputs the metadata implies but the model lacks, inputs that are not one row [1, ...] (an
        artifact exported with batch_size 1 or None)."""
        keys = [entry["name"] for entry in self.metadata.get("inputs") or []]
        keys = keys if len(keys) > 1 else []
        states = list(STATE_NAMES) if any(name in ins for name in STATE_NAMES) else []
        needs = {"action", *STATE_NAMES} if states else set()
        if any(name not in ins for name in keys + states) or not outs or not needs <= set(outs):
            raise ValueError(
                f"{self.name}: expected the inputs and outputs its metadata describes, got inputs {sorted(ins)} and "
                f"outputs {sorted(outs)}"
            )
        rows = [self._input["shape"], *(ins[name]["shape"] for name in keys)]
        flat = [ins[name]["shape"] for name in states] + ([self._mask["shape"]] if self._mask is not None else [])
        if any(len(shape) < 2 or shape[0] != 1 for shape in rows) or any(len(s) != 2 or s[0] != 1 for s in flat):
            got = {name: d["shape"].tolist() for name, d in ins.items()}
            raise ValueError(f"{self.name}: expected inputs of one row [1, ...] (batch_size 1 or None), got {got}")

    def act(self, obs: Any, mask: Any = None) -> np.ndarray | int:
        """Raw observation (as the env returns it) -> deterministic action in env units; `mask` (the allowed actions,
        bool or 0/1, MultiDiscrete dimensions concatenated) is required by a masked artifact and refused otherwise.
        One-line ValueErrors for an observation of another size or dtype, for NaN or infinite values (a broken
        sensor: the artifact would act on them without a sign) and for integers outside an integer space."""
        if self.key_inputs:
            return self.act_inputs(self.key_rows(obs), mask)
        if self.image:
            return self.act_flat(obs, mask)
        flat = flatten(self.metadata["observation_space"], obs)
        if flat.shape != (self.obs_dim,):
            raise ValueError(f"obs: expected {self.obs_dim} values once flattened, got {flat.shape[0]}")
        return self.act_flat(flat, mask)

    def image_row(self, obs: Any) -> np.ndarray:
        """An image observation as the artifact's input row: uint8 of the input shape; one-line errors for another
        shape or dtype (a float image scaled to [0, 1] would be read as nearly black)."""
        image = numbers(obs)
        layout = self.metadata.get("input", {}).get("layout", "HWC")
        if image.shape != self.input_shape:
            raise ValueError(
                f"obs: expected a uint8 image of shape {self.input_shape} ({layout}), got shape {image.shape}"
            )
        if image.dtype != np.uint8:
            raise ValueError(f"obs: expected a uint8 image of shape {self.input_shape} ({layout}), got {image.dtype}")
        return image

    def key_rows(self, obs: Any) -> list[np.ndarray]:
        """A Dict observation -> one row per key input, in the inputs' order (an image as it is, uint8; other keys
        flattened); one-line errors for missing keys, another shape or an image that is not uint8."""
        spaces = self.metadata["observation_space"]["spaces"]
        if not isinstance(obs, dict) or set(obs) != set(spaces):
            got = sorted(map(str, obs)) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"obs: expected a dict with keys {sorted(spaces)}, got {got}")
        rows = []
        for entry, _ in self.key_inputs:
            key, shape = entry["key"], tuple(entry["shape"][1:])
            if "layout" in entry:
                image = numbers(obs[key], f"obs[{key!r}]")
                if image.shape != shape or image.dtype != np.uint8:
                    raise ValueError(
                        f"obs[{key!r}]: expected a uint8 image of shape {shape} ({entry['layout']}), got "
                        f"{image.dtype} of shape {image.shape}"
                    )
                rows.append(image)
                continue
            row = flatten(spaces[key], obs[key], f"obs[{key!r}]")
            if row.shape != shape:
                raise ValueError(f"obs[{key!r}]: expected {shape[0]} values once flattened, got {row.shape[0]}")
            rows.append(as_input(row, np.dtype(entry["dtype"]), f"obs[{key!r}]"))
        return rows

    def mask_row(self, mask: Any) -> np.ndarray | None:
        """The mask as the artifact's float32 input row [mask_size] (None for an unmasked artifact); one-line errors."""
        if (mask is None) != (self._mask is None):
            expected = f"{self.mask_size} values" if self._mask is not None else "None (the artifact takes no mask)"
            raise ValueError(f"mask: expected {expected}, got {'None' if mask is None else 'a mask'}")
        if mask is None:
            return None
        row = finite(numbers(mask, "mask").astype(np.float32).reshape(-1), "mask")
        if row.shape != (self.mask_size,) or not row.any():
            raise ValueError(
                f"mask: expected {self.mask_size} values with one allowed action at least, got "
                f"{row.shape[0]} values, {int(row.astype(bool).sum())} allowed"
            )
        return row

    def act_flat(self, row: Any, mask: Any = None) -> np.ndarray | int:
        """One input row [obs_dim] (already flattened; an image as it is, [*input_shape]), and a masked artifact's
        mask -> deterministic env action; one-line errors for another shape, NaN or infinite values."""
        if self.image:
            return self.act_inputs([self.image_row(row)], mask)
        values = numbers(row)
        if values.shape != (self.obs_dim,):
            raise ValueError(f"obs: expected an input row of shape ({self.obs_dim},), got shape {values.shape}")
        return self.act_inputs([as_input(values, self.input_dtype)], mask)

    def act_inputs(self, rows: list[np.ndarray], mask: Any = None) -> np.ndarray | int:
        """One row per observation input (one, or one per Dict key: `key_rows`), and a masked artifact's mask ->
        deterministic env action."""
        mask_row = self.mask_row(mask)
        indices = [index for _, index in self.key_inputs] or [self._input["index"]]
        try:  # the inputs are checked: LiteRT's errors here are the model's ("Tensor data is null", a kernel)
            for index, row in zip(indices, rows):
                self.interpreter.set_tensor(index, np.asarray(row)[None])
            if mask_row is not None:
                self.interpreter.set_tensor(self._mask["index"], mask_row[None])
            for index, value in zip(self._state_in, self.state):
                self.interpreter.set_tensor(index, value)
            self.interpreter.invoke()
            out = self.interpreter.get_tensor(self._output["index"])[0]
            if self.recurrent:
                self.state = tuple(self.interpreter.get_tensor(index).copy() for index in self._state_out)
        except (ValueError, RuntimeError) as error:
            raise ValueError(f"{self.name}: LiteRT could not run it: {line(error)}") from None
        return int(out) if self.discrete else out.copy()

    def reset(self) -> None:
        """Zeros a recurrent artifact's state (h, c): call it at every episode start (nothing for others)."""
        self.state = tuple(np.zeros((1, self.units), np.float32) for _ in STATE_NAMES) if self.recurrent else ()

    def example_observations(self, count: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """`count` valid input rows [count, *input_shape] of the artifact's input dtype (`example_observations`)."""
        rng = np.random.default_rng(0) if rng is None else rng
        rows = example_observations(self.metadata["observation_space"], count, rng)
        return rows.astype(self.input_dtype)

    def example_inputs(self, count: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
        """`count` valid rows for each observation input, in `obs_positions`' order: [`example_observations`], or
        one array per Dict key for an artifact with one input per key."""
        if not self.key_inputs:
            return [self.example_observations(count, rng)]
        rng = np.random.default_rng(0) if rng is None else rng
        spaces = self.metadata["observation_space"]["spaces"]
        return [
            example_observations(spaces[entry["key"]], count, rng).astype(entry["dtype"])
            for entry, _ in self.key_inputs
        ]


def _integer_only(space: dict) -> bool:
    """Every part of the (checked) observation space description holds integers: the artifact's input is int32."""
    if space["type"] == "Dict":
        return all(_integer_only(sub) for sub in space["spaces"].values())
    return space["type"] in INTEGER_SPACES


def check_described(controller: Controller) -> None:
    """Raises a one-line ValueError naming the metadata file unless the model's tensors are those its metadata
    describes: the observation input (size or image shape, dtype), the Dict key inputs, the action output (rank,
    dtype, size) and the mask input (its size), so a metadata file without `sha256` for another artifact is
    refused before it acts."""
    meta, name = controller.metadata, controller.name + ".metadata.json"
    space = meta["observation_space"]
    if controller.key_inputs:
        for entry, index in controller.key_inputs:
            detail = next(d for d in controller.interpreter.get_input_details() if d["index"] == index)
            if list(detail["shape"][1:]) != entry["shape"][1:] or np.dtype(detail["dtype"]) != np.dtype(entry["dtype"]):
                raise ValueError(
                    f"{name}: inputs: expected {entry['name']} of shape {entry['shape'][1:]} {entry['dtype']} (the "
                    f"model's), got {detail['shape'][1:].tolist()} {np.dtype(detail['dtype'])}"
                )
    elif controller.image != is_image(space) or (controller.image and controller.input_shape != tuple(space["shape"])):
        raise ValueError(
            f"{name}: observation_space: expected the model's input ({controller.input_dtype} of shape "
            f"{controller.input_shape}), got {brief(space)}"
        )
    elif not controller.image:
        dtype = np.dtype(np.int32 if _integer_only(space) else np.float32)
        width = space_width(space, "observation_space")
        if width != controller.obs_dim or dtype != controller.input_dtype:
            raise ValueError(
                f"{name}: observation_space: expected {controller.obs_dim} values of {controller.input_dtype} (the "
                f"model's input), got {width} values of {dtype}"
            )
    action, output = meta["action_space"], controller._output
    shape, dtype = output["shape"].tolist(), np.dtype(output["dtype"])
    want = [1] if action["type"] == "Discrete" else [1, space_width(action, "action_space")]
    if shape != want or (dtype.kind == "f") != (action["type"] == "Box"):
        raise ValueError(
            f"{name}: action_space: expected the model's action ({dtype} of shape {shape}), got {brief(action)}"
        )
    masks = {"Discrete": [action.get("n")], "MultiDiscrete": np.asarray(action.get("nvec", 0)).reshape(-1).tolist()}
    if controller.mask_size is not None and sum(masks.get(action["type"], [-1])) != controller.mask_size:
        raise ValueError(
            f"{name}: action_space: expected a Discrete or MultiDiscrete space of {controller.mask_size} actions "
            f"(the model's mask), got {brief(action)}"
        )
