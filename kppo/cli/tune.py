"""`kppo tune CONFIG --space SPACE.yaml ...`: a hyperparameter search (`kppo.tune`) from the command line.

    kppo tune cartpole --space space.yaml --trials 16 --batch 8            # 8 trials a compiled population
    kppo tune cartpole --storage postgresql://u@db/kppo --study s --trials 3   # one study, many processes
    kppo tune ppo.yml --env CartPole-v1 --trials 32                        # an RL-Zoo hyperparameter file

CONFIG is what `kppo train` takes (a YAML file or a name from configs/), or an RL-Zoo `hyperparams/ppo.yml`-style
file (`--env` picks its entry). SIGINT and SIGTERM stop the search; the trials they cut are marked failed, and
`--resume` runs them again.
"""

from __future__ import annotations

import argparse
import signal
import warnings
from pathlib import Path
from typing import Any

from kppo.cli.configs import load_config

__all__ = ["add_tune_parser", "cmd_tune"]


def add_tune_parser(sub: Any) -> None:
    """`kppo tune`'s arguments, on the root parser's subparsers `sub`."""
    tune = sub.add_parser(
        "tune",
        help="search hyperparameters with Optuna; trials batched as compiled populations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tune.add_argument("config", nargs="?", help="a YAML config, a name from configs/, or an RL-Zoo hyperparams file")
    tune.add_argument("--space", help="the search space YAML (default: RL-Zoo's PPO space)")
    tune.add_argument("--trials", type=int, default=16, help="trials this process runs (Optuna's n_trials)")
    tune.add_argument("--timeout", type=float, help="stop asking for trials after this many seconds")
    tune.add_argument("--batch", type=int, default=1, help="trials trained together as a population (or its shards)")
    tune.add_argument("--seeds-per-trial", type=int, default=1, help="seeds per trial; the objective is their mean")
    tune.add_argument("--sampler", default="tpe", help="tpe, random, cmaes, qmc or an optuna.samplers class")
    tune.add_argument(
        "--sampler-seed",
        type=int,
        default=None,
        help="the sampler's seed (default: one drawn per process, so that workers on one study spread; PBT: 0)",
    )
    tune.add_argument("--startup-trials", type=int, default=10, help="random trials before TPE models")
    tune.add_argument("--pruner", default="median", help="median, none, halving, hyperband or an optuna.pruners class")
    tune.add_argument("--objective-rounds", type=int, default=1, help="last evaluation rounds a trial's value averages")
    tune.add_argument("--storage", metavar="URL", help="Optuna storage URL or journal:PATH (default: OUT/study.db)")
    tune.add_argument("--study", metavar="NAME", help="study name (default: the env and a digest of config and space)")
    tune.add_argument("--resume", action="store_true", help="continue a study; its cut trials run again")
    tune.add_argument("--out", help="the study's folder (default: runs/tune-<env>-<time>)")
    tune.add_argument("--env", help="an RL-Zoo file's entry")
    tune.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a config field")
    tune.add_argument("--quiet", action="store_true", help="no line per trial")
    tune.add_argument("--pbt", action="store_true", help="population-based training of --batch members instead")
    tune.add_argument("--pbt-interval", type=int, default=2, help="evaluation rounds between two exploit steps")
    tune.add_argument("--pbt-quantile", type=float, default=0.25, help="the bottom share that copies the top one")
    tune.set_defaults(func=cmd_tune)


def _base_config(args: Any) -> Any:
    """CONFIG as `kppo train` reads it (an RL-Zoo file's entry evaluated as RL-Zoo's search does); then --set."""
    return load_config(args.config, args.set, None, args.env, search=True)


#: --option -> (attribute, the least value, the greatest, how the refusal says it): the numbers `kppo tune` takes,
#: checked before anything is built (Optuna would run no trial for --trials 0 or --timeout nan, and exit 1).
_BOUNDS = {
    "--trials": ("trials", 1, None, "an integer >= 1"),
    "--timeout": ("timeout", 1e-9, 1e12, "a positive number of seconds"),
    "--batch": ("batch", 1, None, "an integer >= 1"),
    "--seeds-per-trial": ("seeds_per_trial", 1, None, "an integer >= 1"),
    "--sampler-seed": ("sampler_seed", 0, 2**32 - 1, "an integer from 0 to 2**32 - 1"),
    "--startup-trials": ("startup_trials", 0, None, "an integer >= 0"),
    "--objective-rounds": ("objective_rounds", 1, None, "an integer >= 1"),
    "--pbt-interval": ("pbt_interval", 1, None, "an integer >= 1"),
    "--pbt-quantile": ("pbt_quantile", 1e-9, 0.5, "a share in (0, 0.5] (the bottom that copies the top)"),
}


def _check_arguments(args: Any) -> None:
    """One-line errors for numbers out of range (NaN included), naming the option."""
    for option, (name, low, high, expected) in _BOUNDS.items():
        value = getattr(args, name)
        if value is None:
            continue
        if not (low <= value and (high is None or value <= high)):
            raise ValueError(f"{option}: expected {expected}, got {value}")


def _stop_on_sigterm() -> None:
    """SIGTERM as Ctrl-C: the running trials are marked cut before the process ends."""
    signal.signal(signal.SIGTERM, lambda signum, frame: signal.default_int_handler(signum, frame))


def _run_pbt(args: Any, config: Any) -> int:
    """`kppo tune --pbt`: one population of --batch members (pbt.csv, best.yaml, best_schedule.yaml in --out)."""
    from kppo.tuning.pbt import pbt
    from kppo.tuning.space import load_space

    if args.space is None:
        raise ValueError("--pbt: expected --space (the sweepable values the members start from and perturb)")
    if args.batch < 2:
        raise ValueError(f"--pbt: expected --batch >= 2 (the members), got {args.batch}")
    out = Path(args.out or f"runs/pbt-{config.env}")
    space = load_space(args.space, config)
    args.start_work()
    result = pbt(
        None,
        config,
        space,
        members=args.batch,
        interval=args.pbt_interval,
        quantile=args.pbt_quantile,
        seed=0 if args.sampler_seed is None else args.sampler_seed,
        out=out,
    )
    if not args.quiet:
        print(
            f"[kppo tune] pbt: best member {result.best_value:.2f} with {result.best_params}; "
            f"{len(result.lineage)} copies in {out / 'pbt.csv'}; {out / 'best.yaml'}"
        )
    return 0


def cmd_tune(args: Any) -> int:
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ValueError("tune: Optuna is not installed; pip install 'kppo[tune]'") from None
    from kppo.tuning.search import make_pruner, make_sampler, tune
    from kppo.tuning.space import default_space, load_space

    _check_arguments(args)
    config = _base_config(args)
    if args.pbt:
        return _run_pbt(args, config)
    space = default_space(config) if args.space is None else load_space(args.space, config)
    with warnings.catch_warnings():  # their one-line errors now; their warnings (Optuna's "experimental") by `tune`
        warnings.simplefilter("ignore")
        make_sampler(args.sampler, args.sampler_seed, args.startup_trials)
        make_pruner(args.pruner, args.startup_trials, 0)
    args.start_work()
    _stop_on_sigterm()
    try:
        result = tune(
            None,
            config,
            space,
            trials=args.trials,
            timeout=args.timeout,
            batch=args.batch,
            seeds_per_trial=args.seeds_per_trial,
            sampler=args.sampler,
            pruner=args.pruner,
            storage=args.storage,
            study=args.study,
            resume=args.resume,
            out=args.out,
            sampler_seed=args.sampler_seed,
            startup_trials=args.startup_trials,
            objective_rounds=args.objective_rounds,
            verbose=0 if args.quiet else 1,
        )
    except KeyboardInterrupt:
        print("kppo tune: interrupted; the cut trials are marked failed (rerun with --resume)")
        return 130
    return 0 if result.best_value is not None else 1
