"""`kppo train CONFIG --seeds 0-7 [--sweep NAME=V1,V2 ...]`: a population in one compiled program, written as a run
directory whose members are ordinary run directories (so `kppo eval` and `kppo export` take any of them).

    RUN/config.yaml, population.yaml (seeds, sweep), checkpoints/, summary.json,
        learning_curve.png (members' mean +- std), zoo.yaml (trained from an RL-Zoo entry)
    RUN/members/<name>/config.yaml, agent/, metrics.csv, summary.json   (<name>: seed3, learning_rate=0.001-seed3, ...)
        and zoo.yaml (the run's, copied)
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

POPULATION_FILE = "population.yaml"
#: The RL-Zoo entry a run was trained from (`kppo.cli.configs.write_zoo_record`).
ZOO_FILE = "zoo.yaml"


#: The most members `--seeds` names (a population trains them all in one program).
MAX_SEEDS = 10_000


def parse_seeds(text: str) -> list[int]:
    """ "0-7", "0,3,5" or "0-3,10" -> seeds (in order, no repeats); a one-line error naming --seeds otherwise."""
    seeds: dict[int, None] = {}  # ordered, and a repeat is found at once (a list made 0-100000 quadratic)
    try:
        for part in text.split(","):
            low, dash, high = part.strip().partition("-")
            span = range(int(low), int(high if dash else low) + 1)
            if not span:
                raise ValueError
            if len(seeds) + len(span) > MAX_SEEDS:
                raise OverflowError
            seeds.update(dict.fromkeys(span))
    except ValueError:
        raise ValueError(f"--seeds: expected seeds like 0-7 or 0,3,5 (integers >= 0), got {text!r}") from None
    except OverflowError:
        raise ValueError(f"--seeds: expected at most {MAX_SEEDS:,} seeds, got {text!r}") from None
    return list(seeds)


def parse_sweep(items: list[str]) -> dict[str, list]:
    """["learning_rate=1e-4,3e-4", ...] -> {"learning_rate": [1e-4, 3e-4]} (values parsed as YAML scalars)."""
    from kppo.cli.runs import printable
    from kppo.config.options import load_yaml  # the loader Config.from_yaml reads files with

    grid: dict[str, list] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise ValueError(f"--sweep: expected NAME=V1,V2,..., got {item!r}")
        if name in grid:
            raise ValueError(f"--sweep {printable(name)}: given twice (give its values once, comma-separated)")
        try:
            grid[name] = [load_yaml(v) for v in values.split(",")]
        except yaml.YAMLError:
            raise ValueError(
                f"--sweep {printable(name)}: could not parse the values {values!r} (YAML scalars)"
            ) from None
    return grid


def _read_population(out: Path) -> tuple[list[int], dict[str, list]]:
    """The seeds and sweep grid a population run wrote to population.yaml; a one-line error naming the file."""
    from kppo.config.options import load_yaml

    path = out / POPULATION_FILE
    try:
        population = load_yaml(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError):
        population = None
    seeds = population.get("seeds") if isinstance(population, dict) else None
    sweep = population.get("sweep") if isinstance(population, dict) else None
    good_seeds = isinstance(seeds, list) and bool(seeds) and all(type(s) is int and s >= 0 for s in seeds)
    good_sweep = isinstance(sweep, dict) and all(isinstance(k, str) and isinstance(v, list) for k, v in sweep.items())
    if not (good_seeds and good_sweep):
        raise ValueError(
            f"--resume: expected {str(path)!r} as kppo train wrote it (seeds: a list of integers >= 0, sweep: "
            f"name: [values]), got {'an unreadable or empty file' if population is None else repr(population)[:80]}"
        )
    return list(seeds or []), dict(sweep or {})


def is_population_run(run: Path) -> bool:
    return (run / POPULATION_FILE).is_file()


def member_name(config: Any, swept: list[str]) -> str:
    return "-".join([f"{name}={getattr(config, name):g}" for name in swept] + [f"seed{config.seed}"])


def _arguments(args: Any) -> tuple[Any, list[int], dict, Path]:
    """(base config, seeds, sweep grid, run directory) of a new population run or of the one `--resume` names."""
    from kppo.cli.configs import load_config, write_zoo_record, zoo_entry_of
    from kppo.cli.runs import writable_dir
    from kppo.config.options import Config

    if args.resume:
        out = Path(args.resume)
        if args.config or args.set or args.seed is not None or args.seeds or args.sweep:
            raise ValueError(
                "--resume: expected no CONFIG, --set, --seed, --seeds or --sweep (the run's files are used)"
            )
        seeds, sweep = _read_population(out)
        return Config.from_yaml(out / "config.yaml"), seeds, sweep, out
    if args.seed is not None:
        raise ValueError("--seed: expected no --seed with --seeds or --sweep (give the seeds as --seeds)")
    config = load_config(args.config, args.set, None, getattr(args, "env", None))
    seeds = parse_seeds(args.seeds) if args.seeds else [config.seed]
    grid = config.sweep(**parse_sweep(args.sweep)).grid  # validated: the one-line errors of Config.sweep
    default = Path("runs") / f"{config.env}-seeds{seeds[0]}-{seeds[-1]}-{time.strftime('%Y%m%d-%H%M%S')}"
    out = writable_dir(Path(args.out) if args.out else default, "--out")
    config.to_yaml(out / "config.yaml")
    zoo = zoo_entry_of(args.config, getattr(args, "env", None))
    if zoo is not None:  # the run (and each member, `train_population`) records the entry it came from
        write_zoo_record(out / ZOO_FILE, args.config, zoo)
    (out / POPULATION_FILE).write_text(yaml.safe_dump({"seeds": seeds, "sweep": grid}, sort_keys=False))
    return config, seeds, grid, out


def train_population(args: Any) -> int:
    """`kppo train --seeds/--sweep` (or `--resume` of a population run)."""
    import kppo
    from kppo.agent import checkpoint
    from kppo.cli import reporting
    from kppo.cli.runs import TrainingProgress, stop_on_signals

    config, seeds, grid, out = _arguments(args)
    sweep = config.sweep(**grid)
    count = len(sweep.settings()) * len(seeds)
    args.start_work()
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
        if (out / ZOO_FILE).is_file():  # trained from an RL-Zoo entry: each member's folder says which
            shutil.copyfile(out / ZOO_FILE, directory / ZOO_FILE)
        stats = member.runner_state.rollout
        checkpoint.save(
            directory / "agent",
            member.config.to_yaml(),
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
