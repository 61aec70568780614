"""Resuming a run: the newest readable checkpoint of a run into its runner (`checkpointing`, `restore_run`), one-bias
LSTM checkpoints included, and the agent of an interrupted run directory (`load_run_checkpoint`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from kppo.agent.agent import Agent, read_any_cells
from kppo.training.agents import SavedAgent
from kppo.training.runners.settings import agent_spec
from kppo.training.checkpointer import Restored, RoundSoFar, TrainingCheckpointer
from kppo.config.options import Config
from kppo.training.runners import Runner, make_runner
from kppo.training.sizes import check_widths


def checkpointing(
    runner: Runner, config: Config, checkpoint_dir: Any, resume: bool, fits: str, weights: Any = None
) -> tuple[Runner, TrainingCheckpointer | None, list[dict], RoundSoFar | None]:
    """(runner, checkpointer or None, metric rows so far, the round in progress): with `resume`, the runner starts
    from the newest readable checkpoint that fits `fits`, and its rows and round in progress are restored."""
    checkpointer: TrainingCheckpointer | None = None
    rows: list[dict] = []
    round_so_far = None
    if checkpoint_dir is not None:
        checkpointer = TrainingCheckpointer(
            checkpoint_dir, runner.agent, runner.state, strategy=runner.strategy, weights=weights
        )
    if resume:
        if checkpointer is None:
            raise ValueError("resume: expected a checkpoint_dir to resume from, got None")
        (state, rows, round_so_far), _ = restore_run(checkpointer, runner, config, "resume", fits)
        runner = runner.with_state(state)
    return runner, checkpointer, rows, round_so_far


def restore_newest(checkpointer: TrainingCheckpointer, field: str, fits: str) -> tuple[Restored, list[str]]:
    """(what the newest readable checkpoint holds, why newer checkpoints were skipped); a one-line ValueError naming
    `field` when none is readable (none written, or none that fits `fits`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = checkpointer.restore_latest()
    unreadable = [str(w.message).removesuffix("; trying the previous one") for w in caught]
    if restored is None:
        got = f"{len(unreadable)} unreadable ({unreadable[0]})" if unreadable else "none"
        raise ValueError(
            f"{field}: expected a checkpoint in {str(checkpointer.manager.directory)!r} that fits {fits}, got {got}"
        )
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return restored, unreadable


def restore_run(
    checkpointer: TrainingCheckpointer, runner: Runner, config: Config, field: str, fits: str
) -> tuple[Restored, list[str]]:
    """`restore_newest` into the runner's agent, a run checkpointed while kppo's LSTM cells had one bias included
    (`kppo.agent.agent.read_any_cells`)."""

    def read(agent: Agent):
        reader = (
            checkpointer
            if agent is runner.agent
            else TrainingCheckpointer(checkpointer.manager.directory, agent, runner.state)
        )
        return restore_newest(reader, field, fits)

    return read_any_cells(read, runner.agent, agent_spec(config), runner.action_space)


def load_run_checkpoint(run_dir: str | Path) -> SavedAgent:
    """The agent in the newest readable checkpoint of a run directory (config.yaml + checkpoints/), e.g. of a run that
    was interrupted before it wrote agent/. Its `metadata` holds `checkpoint` (the path), `iteration`,
    `num_iterations` and `unreadable` (why newer checkpoints were skipped; those warnings are repeated)."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "checkpoints").is_dir():
        raise ValueError(f"run: expected a run directory with config.yaml and checkpoints/, got {str(run_dir)!r}")
    config = Config.from_yaml(run_dir / "config.yaml")
    check_widths(config, run_dir / "checkpoints", run_dir / "config.yaml")
    runner = make_runner(None, config)
    try:
        checkpointer = TrainingCheckpointer(
            run_dir / "checkpoints", runner.agent, runner.state, strategy=runner.strategy
        )
        (state, _, _), unreadable = restore_run(
            checkpointer, runner, config, "checkpoints", repr(str(run_dir / "config.yaml"))
        )
        state = runner.view(state)
    finally:
        runner.close()
    iteration = int(state.iteration)
    path = next(
        (p for p in checkpointer.manager.checkpoints if p.endswith(f"-{iteration}")),
        str(run_dir / "checkpoints" / f"ckpt-{iteration}"),
    )  # the loop numbers checkpoints by iteration
    metadata = {
        "checkpoint": path,
        "iteration": iteration,
        "num_iterations": config.num_iterations,
        "unreadable": unreadable,
    }
    return SavedAgent(
        config,
        runner.agent,
        state.rollout.obs_stats,
        state.rollout.return_stats,
        runner.observation_space,
        runner.action_space,
        metadata,
    )
