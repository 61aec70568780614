"""Trains capability-matrix cells (tests/helpers/capabilities.py) in this process and writes each cell's final
weights to `<out>/<cell>.npz`: `python -m tests.helpers.seed_weights OUT CELL...` (a cell as `native-single-mlp`).
tests/training/test_same_seed.py runs it in two fresh processes and compares the files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tests.helpers.capabilities import train_cell


def cell_weights(result) -> dict[str, np.ndarray]:
    """Every variable of every member's actor, critic and LSTM cells, by member and variable path."""
    members = getattr(result, "members", [result])
    weights = {}
    for index, member in enumerate(members):
        agent = member.agent
        networks = [agent.actor, agent.critic] + ([agent.lstm] if getattr(agent, "lstm", None) is not None else [])
        for network in networks:
            for variable in network.variables:
                weights[f"{index}/{network.name}/{variable.path}"] = variable.numpy()
    return weights


def main(out: str, cells: list[str]) -> None:
    for name in cells:
        env, run, agent = name.split("-")
        np.savez(Path(out) / f"{name}.npz", **cell_weights(train_cell((env, run, agent))))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
