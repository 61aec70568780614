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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

INTEGER_SPACES = ("Discrete", "MultiDiscrete", "MultiBinary")


def flatten(observation_space: dict, obs: Any) -> np.ndarray:
    """One raw observation -> the artifact's input row [input_dim] (see the module docstring), float64 or int64."""
    if observation_space["type"] == "Dict":
        parts = [flatten(sub, obs[key]) for key, sub in observation_space["spaces"].items()]
        return np.concatenate(parts)
    if observation_space["type"] in INTEGER_SPACES:
        return np.asarray(obs, np.int64).reshape(-1)
    return np.asarray(obs, np.float64).reshape(-1)


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


def load_metadata(artifact: str | Path, metadata: str | Path | None = None) -> dict:
    """The artifact's metadata: `metadata`, or `<artifact>.metadata.json` beside it."""
    artifact = Path(artifact)
    return json.loads(Path(metadata or artifact.with_name(artifact.name + ".metadata.json")).read_text())


MASK_INPUT = "action_mask"
STATE_NAMES = ("state_h", "state_c")  # a recurrent artifact's state inputs and outputs


class Controller:
    """A policy artifact ready to act: `act(obs)` for one observation, `act(obs, mask)` for an artifact with an
    action-mask input; a recurrent artifact's state is kept here (`reset()` at each episode start)."""

    def __init__(
        self, artifact: str | Path, metadata: str | Path | None = None, num_threads: int = 1, delegates: bool = True
    ):
        """`delegates`: LiteRT's default delegates (XNNPACK); False runs its builtin kernels only, silently."""
        self.metadata = load_metadata(artifact, metadata)
        no_delegates = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}
        resolver = {} if delegates else no_delegates
        self.interpreter = Interpreter(model_path=str(artifact), num_threads=num_threads, **resolver)
        self.interpreter.allocate_tensors()
        inputs = self.interpreter.get_input_details()
        #: Positions of the observation and the mask among the model's inputs (TFLite Micro sets inputs by position).
        self.mask_position = next((i for i, d in enumerate(inputs) if MASK_INPUT in d["name"]), None)
        self.obs_position = next(
            i
            for i, d in enumerate(inputs)
            if i != self.mask_position and not any(name in d["name"] for name in STATE_NAMES)
        )
        self._input = inputs[self.obs_position]
        self._mask = None if self.mask_position is None else inputs[self.mask_position]
        signature = self.interpreter.get_signature_runner("action")
        ins, outs = signature.get_input_details(), signature.get_output_details()
        position_of = {d["index"]: i for i, d in enumerate(inputs)}
        entries = self.metadata.get("inputs") or []
        #: One input per Dict key (a Dict holding an image): (metadata entry, tensor index) in the metadata's order.
        self.key_inputs = [(entry, ins[entry["name"]]["index"]) for entry in entries] if len(entries) > 1 else []
        #: Positions of the observation inputs among the model's inputs (one, or one per Dict key).
        self.obs_positions = [position_of[index] for _, index in self.key_inputs] or [self.obs_position]
        self.recurrent = STATE_NAMES[0] in ins
        #: Output positions (TFLite Micro reads outputs by position): the action's, and the state's (h, c).
        positions = {d["index"]: i for i, d in enumerate(self.interpreter.get_output_details())}
        self.action_position = positions[outs["action" if self.recurrent else next(iter(outs))]["index"]]
        self._output = self.interpreter.get_output_details()[self.action_position]
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

    def act(self, obs: Any, mask: Any = None) -> np.ndarray | int:
        """Raw observation (as the env returns it) -> deterministic action in env units; `mask` (the allowed actions,
        bool or 0/1, MultiDiscrete dimensions concatenated) is required by a masked artifact and refused otherwise."""
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
        image = np.asarray(obs)
        layout = self.metadata["input"].get("layout", "HWC")
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
            got = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"obs: expected a dict with keys {sorted(spaces)}, got {got}")
        rows = []
        for entry, _ in self.key_inputs:
            key, shape = entry["key"], tuple(entry["shape"][1:])
            if "layout" in entry:
                image = np.asarray(obs[key])
                if image.shape != shape or image.dtype != np.uint8:
                    raise ValueError(
                        f"obs[{key!r}]: expected a uint8 image of shape {shape} ({entry['layout']}), got "
                        f"{image.dtype} of shape {image.shape}"
                    )
                rows.append(image)
                continue
            row = flatten(spaces[key], obs[key])
            if row.shape != shape:
                raise ValueError(f"obs[{key!r}]: expected {shape[0]} values once flattened, got {row.shape[0]}")
            rows.append(row.astype(entry["dtype"]))
        return rows

    def mask_row(self, mask: Any) -> np.ndarray | None:
        """The mask as the artifact's float32 input row [mask_size] (None for an unmasked artifact); one-line errors."""
        if (mask is None) != (self._mask is None):
            expected = f"{self.mask_size} values" if self._mask is not None else "None (the artifact takes no mask)"
            raise ValueError(f"mask: expected {expected}, got {'None' if mask is None else 'a mask'}")
        if mask is None:
            return None
        row = np.asarray(mask, np.float32).reshape(-1)
        if row.shape != (self.mask_size,) or not row.any():
            raise ValueError(
                f"mask: expected {self.mask_size} values with one allowed action at least, got "
                f"{row.shape[0]} values, {int(row.astype(bool).sum())} allowed"
            )
        return row

    def act_flat(self, row: np.ndarray, mask: Any = None) -> np.ndarray | int:
        """One input row [obs_dim] (already flattened; an image as it is, [*input_shape]), and a masked artifact's
        mask -> deterministic env action."""
        return self.act_inputs([self.image_row(row) if self.image else np.asarray(row).astype(self.input_dtype)], mask)

    def act_inputs(self, rows: list[np.ndarray], mask: Any = None) -> np.ndarray | int:
        """One row per observation input (one, or one per Dict key: `key_rows`), and a masked artifact's mask ->
        deterministic env action."""
        mask_row = self.mask_row(mask)
        indices = [index for _, index in self.key_inputs] or [self._input["index"]]
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
