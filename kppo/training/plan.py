"""The plan of a run: how many iterations, in which rounds (an evaluation and a metric row after each), with what
around them; made from a Config (`plan_rounds`), or by the SB3 facade for one `learn` call."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

from kppo.config.options import Config


class Plan(NamedTuple):
    """How many iterations, in which rounds, with what around them."""

    rounds: list[int]  # iterations per round (a round already done before a resume has size 0)
    with_evaluation: bool  # evaluate and make a metric row after each round
    iterations_per_call: int
    rollout_size: int
    total_timesteps: int  # progress_remaining = 1 - model.num_timesteps / total_timesteps
    debug: bool = False
    gradient_steps: Any = 0  # applied before this run (a resume: the restored Adam step count; [M] for a population)
    round_so_far: Any = None  # a resume inside a round: the part of it done before (`checkpointer.RoundSoFar`)


def round_sizes(num_iterations: int, rounds: int) -> list[int]:
    """Splits the iterations into `rounds` nearly equal rounds (all iterations run, none dropped)."""
    bounds = [round((r + 1) * num_iterations / rounds) for r in range(rounds)]
    return [b - a for a, b in zip([0, *bounds[:-1]], bounds)]


def plan_rounds(config: Config, iteration: int) -> Plan:
    """`config.eval_rounds` rounds over `config.num_iterations` (a warning when that is fewer than `eval_freq`);
    rounds finished before `iteration` (a resume) are empty and the interrupted one keeps only its remaining
    iterations."""
    if config.eval_rounds < config.eval_freq:
        warnings.warn(
            f"eval_freq: {config.eval_freq} evaluation rounds asked for, but the run has only "
            f"{config.num_iterations} iterations (total_timesteps // rollout_size): evaluating after each"
        )
    ends = np.cumsum(round_sizes(config.num_iterations, config.eval_rounds))
    starts = np.concatenate([[0], ends[:-1]])
    rounds = [int(max(end - max(start, iteration), 0)) for start, end in zip(starts, ends)]
    return Plan(
        rounds,
        True,
        config.iterations_per_call,
        config.rollout_size,
        config.num_iterations * config.rollout_size,
        config.debug,
    )
