"""`kppo train CONFIG --seeds 0-7 [--sweep NAME=V1,V2 ...]`: a population in one compiled program, written as a run
directory whose members are ordinary run directories (so `kppo eval` and `kppo export` take any of them).

    RUN/config.yaml, population.yaml (seeds, sweep), checkpoints/, summary.json,
        learning_curve.png (members' mean +- std)
    RUN/members/<name>/config.yaml, agent/, metrics.csv, summary.json   (<name>: seed3, learning_rate=0.001-seed3, ...)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np
import yaml

POPULATION_FILE = "population.yaml"


def parse_seeds(text: str) -> list[int]:
    """ "0-7", "0,3,5" or "0-3,10" -> seeds (in order, no repeats); a one-line error naming --seeds otherwise."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            low, dash, high = part.strip().partition("-")
            span = range(int(low), int(high if dash else low) + 1)
            if not span:
                raise ValueError
            seeds += [s for s in span if s not in seeds]
    except ValueError:
        raise ValueError(f"--seeds: expected seeds like 0-7 or 0,3,5 (integers >= 0), got {text!r}") from None
    return seeds


def parse_sweep(items: list[str]) -> dict[str, list]:
    """["learning_rate=1e-4,3e-4", ...] -> {"learning_rate": [1e-4, 3e-4]} (values parsed as YAML scalars)."""
    grid: dict[str, list] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not name.strip() or not values.strip():
            raise ValueError(f"--sweep: expected NAME=V1,V2,..., got {item!r}")
        grid[name.strip()] = [yaml.safe_load(v) for v in values.split(",")]
    return grid


def is_population_run(run: Path) -> bool:
    return (run / POPULATION_FILE).is_file()


def member_name(config: Any, swept: list[str]) -> str:
    return "-".join([f"{name}={getattr(config, name):g}" for name in swept] + [f"seed{config.seed}"])


def _arguments(args: Any, load_config: Callable) -> tuple[Any, list[int], dict, Path]:
    """(base config, seeds, sweep grid, run directory) of a new population run or of the one `--resume` names."""
    from kppo.cli.runs import writable_dir
    from kppo.config.options import Config

    if args.resume:
        out = Path(args.resume)
        if args.config or args.set or args.seed is not None or args.seeds or args.sweep:
            raise ValueError(
                "--resume: expected no CONFIG, --set, --seed, --seeds or --sweep (the run's files are used)"
            )
        population = yaml.safe_load((out / POPULATION_FILE).read_text())
        return Config.from_yaml(out / "config.yaml"), population["seeds"], population["sweep"], out
    if args.seed is not None:
        raise ValueError("--seed: expected no --seed with --seeds or --sweep (give the seeds as --seeds)")
    config = load_config(args.config, args.set, None)
    seeds = parse_seeds(args.seeds) if args.seeds else [config.seed]
    grid = config.sweep(**parse_sweep(args.sweep)).grid  # validated: the one-line errors of Config.sweep
    default = Path("runs") / f"{config.env}-seeds{seeds[0]}-{seeds[-1]}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = writable_dir(Path(args.out) if args.out else default, "--out")
    config.to_yaml(out / "config.yaml")
    (out / POPULATION_FILE).write_text(yaml.safe_dump({"seeds": seeds, "sweep": grid}, sort_keys=False))
    return config, seeds, grid, out


def train_population(args: Any, load_config: Callable) -> int:
    import kppo
    from kppo.agent import checkpoint
    from kppo.cli import reporting
    from kppo.cli.runs import TrainingProgress, stop_on_signals

    config, seeds, grid, out = _arguments(args, load_config)
    sweep = config.sweep(**grid)
    count = len(sweep.settings()) * len(seeds)
    received = stop_on_signals()
    progress = TrainingProgress(config.num_iterations * config.rollout_size * count, args.quiet)  # all members' steps
    try:
        result = kppo.train(
            config=sweep,
            seed=seeds,
            on_eval=progress.evaluated,
            on_progress=lambda steps: progress.steps(steps * count),
            checkpoint_dir=out / "checkpoints",
            resume=bool(args.resume),
            should_stop=lambda: "signal" in received,
        )
    finally:
        progress.close()
    assert isinstance(result, kppo.PopulationResult)  # a list of seeds: a population
    if result.interrupted:
        print(f"interrupted: checkpoint written; continue with `kppo train --resume {out}`")
        return 128 + received["signal"]
    finals = {}
    for member in result.members:
        name = member_name(member.config, list(grid))
        directory = out / "members" / name
        directory.mkdir(parents=True, exist_ok=True)
        member.config.to_yaml(directory / "config.yaml")
        stats = member.runner_state.rollout
        checkpoint.save(
            directory / "agent",
            member.config,
            member.agent,
            stats.obs_stats,
            stats.return_stats,
            member.observation_space,
            member.action_space,
        )
        reporting.write_metrics_csv(directory / "metrics.csv", member.metrics)
        finals[name] = reporting.write_summary(directory / "summary.json", member)["final_eval_mean_return"]
    returns = np.asarray(list(finals.values()))
    summary = {
        "env": config.env,
        "members": len(finals),
        "final_eval_mean_return": finals,
        "mean": float(returns.mean()),
        "std": float(returns.std()),
        "min": float(returns.min()),
        **{f"wall_{k}": float(v) for k, v in result.timings.items()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    band = result.summary
    reporting.plot_learning_curve(
        out / "learning_curve.png",
        {
            "train/total_steps": result.metrics["train/total_steps"],
            "eval/mean_returns": band["eval/mean_returns"]["mean"],
            "eval/std_returns": band["eval/mean_returns"]["std"],
            "rollout/ep_rew_mean": band["rollout/ep_rew_mean"]["mean"],
        },
        f"{config.env}, {len(finals)} members (mean +- std over members)",
    )
    print(
        f"{config.env}: {len(finals)} members, final eval mean {summary['mean']:.1f} +- {summary['std']:.1f} "
        f"(min {summary['min']:.1f}) in {result.timings['total_s']:.1f} s -> {out}; "
        f"export one with `kppo export {out / 'members' / next(iter(finals))}`"
    )
    return 0
