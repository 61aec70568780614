"""`kppo train [CONFIG] [--env ID] [--set NAME=VALUE ...]`: a Config trained into a run directory (config.yaml,
agent/, metrics.csv, tensorboard/, learning_curve.png, policy.tflite + metadata, summary.json; zoo.yaml for an RL-Zoo
entry); `--resume` continues an interrupted run from its latest checkpoint, and `--seeds` / `--sweep` train a
population (`cli.population`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from kppo.cli.configs import config_help, load_config, write_zoo_record, zoo_entry_of


def add_train_parser(sub: Any) -> None:
    """`kppo train`'s arguments, on the root parser's subparsers `sub`."""
    train = sub.add_parser(
        "train",
        help="train (default: TF-native CartPole) and export policy.tflite",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=config_help(),
    )
    train.add_argument(
        "config",
        nargs="?",
        help="a YAML file, a task name from configs/ (e.g. cartpole, pendulum, zoo/Pendulum-v1) or an RL-Zoo "
        "hyperparams file (ppo.yml; --env picks its entry)",
    )
    train.add_argument("--env", help="an RL-Zoo file's entry (env id), as rl-zoo3's train.py --env")
    train.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a config field")
    train.add_argument("--seed", type=int)
    train.add_argument("--seeds", metavar="LIST", help="train a population in one program, e.g. 0-7 or 0,3,5")
    train.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="a per-member value grid (learning_rate, ent_coef, clip_range, gamma, gae_lambda, "
        "vf_coef, max_grad_norm); trained with every seed as one population",
    )
    train.add_argument("--out", help="run directory (default: runs/<env>-seed<N>-<time>)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--no-export", action="store_true", help="skip policy.tflite")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run from its latest checkpoint")
    train.set_defaults(func=cmd_train)


def cmd_train(args) -> int:
    import kppo
    from kppo.agent import checkpoint
    from kppo.cli import population as cli_population, reporting
    from kppo.cli.runs import TrainingProgress, stop_on_signals, writable_dir
    from kppo.config.options import Config

    if args.seeds or args.sweep or (args.resume and cli_population.is_population_run(Path(args.resume))):
        return cli_population.train_population(args)
    if args.resume:
        out = Path(args.resume)
        if args.config or args.set or args.seed is not None or args.env:
            raise ValueError("--resume: expected no CONFIG, --env, --set or --seed (the run's config.yaml is used)")
        if not (out / "config.yaml").is_file() or not (out / "checkpoints").is_dir():
            raise ValueError(f"--resume: expected a run directory with config.yaml and checkpoints/, got {str(out)!r}")
        config = Config.from_yaml(out / "config.yaml")
    else:
        config = load_config(args.config, args.set, args.seed, args.env)
        default = Path("runs") / f"{config.env}-seed{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        out = writable_dir(Path(args.out) if args.out else default, "--out")
        config.to_yaml(out / "config.yaml")
        zoo = zoo_entry_of(args.config, args.env)
        if zoo is not None:  # the run records the entry it came from
            write_zoo_record(out / "zoo.yaml", args.config, zoo)
    args.start_work()
    received = stop_on_signals()
    progress = TrainingProgress(config.num_iterations * config.rollout_size, args.quiet)
    rows: list[dict] = []

    def on_eval(row: dict) -> None:  # every round ends with a checkpoint: refresh the curve with it
        progress.evaluated(row)
        rows.append(row)
        metrics = {name: np.asarray([r[name] for r in rows]) for name in row}
        reporting.plot_learning_curve(out / "learning_curve.png", metrics, f"{config.env}, seed {config.seed}")

    try:
        result = kppo.train(
            config=config,
            on_eval=on_eval,
            on_progress=progress.steps,
            checkpoint_dir=out / "checkpoints",
            resume=bool(args.resume),
            should_stop=lambda: "signal" in received,
        )
    finally:
        progress.close()
    assert isinstance(result, kppo.PPOResult)  # one seed: one run
    if result.interrupted:
        step = int(result.runner_state.iteration) * config.rollout_size
        print(f"interrupted at step {step:,}: checkpoint written; continue with `kppo train --resume {out}`")
        return 128 + received["signal"]
    stats = result.runner_state.rollout
    checkpoint.save(
        out / "agent",
        config.to_yaml(),
        result.agent,
        stats.obs_stats,
        stats.return_stats,
        result.observation_space,
        result.action_space,
    )
    reporting.write_metrics_csv(out / "metrics.csv", result.metrics)
    reporting.write_tensorboard(out / "tensorboard", result.metrics)
    reporting.plot_learning_curve(
        out / "learning_curve.png", result.metrics, f"{config.env}, seed {config.seed}"
    )  # incl. rows restored by --resume
    extra = {}
    if not args.no_export:
        from kppo.exporter.deploy import export_checked  # with its closed-loop report beside it (kept quick)

        exported = export_checked(result, out / "policy.tflite", export_fn=kppo.export, micro_loop=False).exported
        extra["artifact"] = {"path": str(exported.path), "parity_max_error": exported.metadata["parity"]["max_error"]}
    summary = reporting.write_summary(out / "summary.json", result, extra)
    print(
        f"{config.env}: final eval {summary['final_eval_mean_return']:.1f} +- {summary['final_eval_std_return']:.1f}"
        f" after {summary['total_steps']:,} steps in {summary['wall_total_s']:.1f} s -> {out}"
    )
    return 0
