"""`Controller`: loads a kppo TFLite artifact and its metadata and acts on raw observations.

Dependencies: numpy and ai-edge-litert only (`pip install "kppo[export]"`, or just those two packages).

    from export.runtime import Controller
    controller = Controller("policy.tflite")      # reads policy.tflite.metadata.json beside it
    action = controller.act(obs)                  # raw observation in, env action out
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def flatten(observation_space: dict, obs: Any) -> np.ndarray:
    """One raw observation -> float32 [obs_dim], Dict observations concatenated in the metadata's key order."""
    if observation_space["type"] == "Dict":
        parts = [np.asarray(obs[key], np.float32).reshape(-1) for key in observation_space["spaces"]]
        return np.concatenate(parts)
    return np.asarray(obs, np.float32).reshape(-1)


class Controller:
    """A policy artifact ready to act: `act(obs)` for one observation (any batch size the model was exported with is
    handled row by row when it is fixed at 1)."""

    def __init__(self, artifact: str | Path, metadata: str | Path | None = None, num_threads: int = 1):
        artifact = Path(artifact)
        metadata = Path(metadata) if metadata else artifact.with_name(artifact.name + ".metadata.json")
        self.metadata = json.loads(metadata.read_text())
        self.interpreter = Interpreter(model_path=str(artifact), num_threads=num_threads)
        self.interpreter.allocate_tensors()
        self._input = self.interpreter.get_input_details()[0]
        self._output = self.interpreter.get_output_details()[0]
        self.obs_dim = int(self.metadata["input"]["shape"][1])
        self.discrete = self.metadata["action_space"]["type"] == "Discrete"

    def act(self, obs: Any) -> np.ndarray | int:
        """Raw observation (as the env returns it) -> deterministic action in env units."""
        flat = flatten(self.metadata["observation_space"], obs)
        if flat.shape != (self.obs_dim,):
            raise ValueError(f"obs: expected {self.obs_dim} values once flattened, got {flat.shape[0]}")
        self.interpreter.set_tensor(self._input["index"], flat[None])
        self.interpreter.invoke()
        out = self.interpreter.get_tensor(self._output["index"])[0]
        return int(out) if self.discrete else out.copy()
