"""`Controller`: loads a kppo TFLite artifact and its metadata and acts on raw observations.

Dependencies: numpy and ai-edge-litert only (`pip install "kppo[export]"`, or just those two packages).

    from export.runtime import Controller
    controller = Controller("policy.tflite")      # reads policy.tflite.metadata.json beside it
    action = controller.act(obs)                  # raw observation in, env action out

The artifact's input row is the raw observation flattened: Box values in C order, a Discrete observation as its integer,
MultiDiscrete and MultiBinary observations as their integers, the parts of a Dict concatenated in the metadata's key
order. The artifact itself one-hot encodes the integers (see `metadata["input"]`: dtype int32 when every part is an
integer, float32 otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter

INTEGER_SPACES = ("Discrete", "MultiDiscrete", "MultiBinary")


def flatten(observation_space: dict, obs: Any) -> np.ndarray:
    """One raw observation -> the artifact's input row [input_dim] (see the module docstring), float64 or int64."""
    if observation_space["type"] == "Dict":
        parts = [flatten(sub, obs[key]) for key, sub in observation_space["spaces"].items()]
        return np.concatenate(parts)
    if observation_space["type"] in INTEGER_SPACES:
        return np.asarray(obs, np.int64).reshape(-1)
    return np.asarray(obs, np.float64).reshape(-1)


def example_observations(observation_space: dict, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` valid input rows [count, input_dim] for checks: N(0, 3^2) for Box values, uniform valid integers."""
    kind = observation_space["type"]
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


def load_metadata(artifact: str | Path, metadata: str | Path | None = None) -> dict:
    """The artifact's metadata: `metadata`, or `<artifact>.metadata.json` beside it."""
    artifact = Path(artifact)
    return json.loads(Path(metadata or artifact.with_name(artifact.name + ".metadata.json")).read_text())


class Controller:
    """A policy artifact ready to act: `act(obs)` for one observation (any batch size the model was exported with is
    handled row by row when it is fixed at 1)."""

    def __init__(self, artifact: str | Path, metadata: str | Path | None = None, num_threads: int = 1):
        self.metadata = load_metadata(artifact, metadata)
        self.interpreter = Interpreter(model_path=str(artifact), num_threads=num_threads)
        self.interpreter.allocate_tensors()
        self._input = self.interpreter.get_input_details()[0]
        self._output = self.interpreter.get_output_details()[0]
        self.obs_dim = int(self.metadata["input"]["shape"][1])
        self.input_dtype = np.dtype(self._input["dtype"])
        self.discrete = self.metadata["action_space"]["type"] == "Discrete"

    def act(self, obs: Any) -> np.ndarray | int:
        """Raw observation (as the env returns it) -> deterministic action in env units."""
        flat = flatten(self.metadata["observation_space"], obs)
        if flat.shape != (self.obs_dim,):
            raise ValueError(f"obs: expected {self.obs_dim} values once flattened, got {flat.shape[0]}")
        return self.act_flat(flat)

    def act_flat(self, row: np.ndarray) -> np.ndarray | int:
        """One input row [obs_dim] (already flattened) -> deterministic action in env units."""
        self.interpreter.set_tensor(self._input["index"], np.asarray(row).astype(self.input_dtype)[None])
        self.interpreter.invoke()
        out = self.interpreter.get_tensor(self._output["index"])[0]
        return int(out) if self.discrete else out.copy()

    def example_observations(self, count: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """`count` valid input rows [count, obs_dim] of the artifact's input dtype (see `example_observations`)."""
        rng = np.random.default_rng(0) if rng is None else rng
        rows = example_observations(self.metadata["observation_space"], count, rng)
        return rows.astype(self.input_dtype)
