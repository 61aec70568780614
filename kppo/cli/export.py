"""`kppo export RUN_DIR|SB3_ZIP`: a run's agent (or its newest checkpoint) or an SB3 save as a TFLite, SavedModel or
ONNX policy with its metadata and parity check (`kppo.export`), written beside the run or the save by default; int8
calibrated on observations the policy visits (its run's env, `--calibrate-env` or `--calibrate-data`). Beside the
artifact, its quality report (`<artifact>.report.json`, `kppo.exporter.report`: closed-loop return of the float
policy and the artifact in the run's env or `--calibrate-env`); a degraded artifact is kept under a `.rejected` name
unless `--accept-degraded`. `--budget flash=..,ram=..[,latency=..]` writes the best-return TFLite precision that
fits (`kppo.exporter.deploy`)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from kppo.cli.sources import is_unfinished_run, load_unfinished_run, sb3_model

SUFFIXES = {"tflite": ".tflite", "saved_model": "", "onnx": ".onnx"}
MIN_CALIBRATION = 1000  # int8: the fewest recorded observations calibrated on without a warning
REPORT_EPISODES = 20  # kppo.exporter.report.REPORT_EPISODES (not imported here: `kppo --help` starts no TensorFlow)


def add_export_parser(sub: Any) -> None:
    """`kppo export`'s arguments, on the root parser's subparsers `sub`."""
    ex = sub.add_parser("export", help="export a run's agent as TFLite, SavedModel or ONNX")
    ex.add_argument("run", metavar="RUN_DIR|SB3_ZIP")
    ex.add_argument(
        "--format", choices=list(SUFFIXES), default="tflite", help="onnx needs the extra: pip install kppo[onnx]"
    )
    ex.add_argument(
        "--quantize",
        choices=["none", "float16", "dynamic", "int8"],
        default="none",
        help="TFLite only; int8 calibrates on 2,000 states the policy visits in its run's env (or --calibrate-env, "
        "--calibrate-data)",
    )
    ex.add_argument("--batch-size", type=int, default=1, help="fixed input batch (0: dynamic)")
    ex.add_argument("--out")
    ex.add_argument("--vecnormalize", metavar="PKL", help="an SB3 save's vec_normalize.pkl: its statistics baked in")
    ex.add_argument(
        "--calibrate-env",
        metavar="ID",
        help="the gymnasium env of the closed-loop report and of int8's calibration (the policy's own episodes "
        "there; default: the run's env; an SB3 zip names none)",
    )
    ex.add_argument(
        "--calibrate-data",
        metavar="FILE.npz",
        help="int8: calibrate on recorded observations: the array 'obs' (or the file's only array) [N, *obs_shape]; "
        "a Dict space: one array per key",
    )
    ex.add_argument(
        "--episodes",
        type=int,
        default=REPORT_EPISODES,
        help="closed-loop episodes of the float policy and of the artifact in the report (seeds 1000, 1001, ...)",
    )
    ex.add_argument(
        "--accept-degraded",
        action="store_true",
        help="write the artifact even when its closed-loop return is below the float policy's by more than "
        "max(2%%, the 95%% interval)",
    )
    ex.add_argument(
        "--budget",
        metavar="flash=64KiB,ram=16KiB[,latency=1ms]",
        help="try every TFLite precision and write the best-return one within these limits (flash: file size, "
        "ram: TFLite Micro arena, latency: LiteRT invoke here)",
    )
    ex.set_defaults(func=cmd_export)


def _calibration(args, source, sb3: bool, quantize: str | None) -> dict:
    """`kppo.export`'s calibration arguments from `--calibrate-env` / `--calibrate-data` (int8, or a budget's int8
    candidate); an SB3 zip without either is refused for int8: the CLI never calibrates on the normalization
    statistics. `--calibrate-env` also names the report's env, for any precision."""
    if quantize != "int8" and not args.budget:
        if args.calibrate_data:
            raise ValueError(f"--calibrate-data: only for --quantize int8 or --budget, got --quantize {args.quantize}")
        return {}
    if args.calibrate_env and args.calibrate_data:
        raise ValueError("--calibrate-env, --calibrate-data: expected one of them, got both")
    if args.calibrate_data:
        from kppo.exporter.artifact import resolve_source
        from kppo.exporter.calibration import load_observations

        rows = load_observations(args.calibrate_data, resolve_source(source)[0])
        if len(rows) < MIN_CALIBRATION:
            warnings.warn(
                f"--calibrate-data: {len(rows)} observations; int8 ranges are calibrated best on at least "
                f"{MIN_CALIBRATION:,} states the policy visits",
                stacklevel=2,
            )
        return {"representative_obs": rows}
    if args.calibrate_env:
        return {"calibration_env": args.calibrate_env}
    if sb3 and not args.budget:  # a budget without calibration data leaves int8 out, and says so
        raise ValueError(
            "--quantize int8: an SB3 zip names no env to calibrate in; pass --calibrate-env ID (the policy's own "
            "episodes there) or --calibrate-data FILE.npz (recorded observations)"
        )
    return {}


def _checked_flags(args) -> Any:
    """The report's and the budget's flags, refused in one line before any work; the parsed budget (or None)."""
    if args.batch_size < 0:
        raise ValueError(f"--batch-size: expected an integer >= 0 (0: a dynamic batch), got {args.batch_size}")
    if args.episodes < 2:
        raise ValueError(f"--episodes: expected an integer >= 2 (a 95% interval needs two), got {args.episodes}")
    if not args.budget:
        return None
    from kppo.exporter.budget import parse_budget

    budget = parse_budget(args.budget)
    if args.format != "tflite" or args.quantize not in (None, "none"):
        chosen = f"--format {args.format}" if args.format != "tflite" else f"--quantize {args.quantize}"
        raise ValueError(
            f"--budget: expected no --quantize and --format tflite (it tries every precision), got {chosen}"
        )
    return budget


def cmd_export(args) -> int:
    import kppo
    from kppo.training.agents import read_metadata
    from kppo.cli.runs import writable_dir

    budget = _checked_flags(args)
    source: Any = Path(args.run)
    quantize = None if args.quantize in (None, "none", "float32") else args.quantize
    default = f"policy{'' if quantize is None else '_' + quantize}" + SUFFIXES[args.format]
    sb3 = sb3_model(source, args.vecnormalize)
    if sb3 is None and args.vecnormalize:
        raise ValueError("--vecnormalize: only for a zip Stable-Baselines3 saved (kppo's runs hold their statistics)")
    if (source / "agent").is_dir():
        source = source / "agent"
    unfinished = sb3 is None and is_unfinished_run(source)
    if sb3 is None and not unfinished:
        read_metadata(source)  # the one-line error for a directory that is neither an agent nor a run
    beside = Path(args.run).with_name(f"{Path(args.run).stem}_{default}") if sb3 is not None else None
    out = Path(args.out) if args.out else (beside or Path(args.run) / default)
    writable_dir(out.parent, "--out")
    if unfinished:
        source = load_unfinished_run(source)
    if sb3 is not None:
        source = sb3
    calibration = _calibration(args, source, sb3 is not None, quantize)
    args.start_work()
    checked = _export(args, source, out, quantize, budget, calibration, kppo.export)
    exported = checked.exported
    parity = exported.metadata["parity"]
    calibrated = exported.metadata.get("calibration")
    if calibrated is not None and args.calibrate_data:
        calibrated = {**calibrated, "source": f"recorded observations from {Path(args.calibrate_data).name}"}
    print(
        f"wrote {exported.path} ({exported.metadata['size_bytes']:,} bytes; parity max error {parity['max_error']:.2e}"
        f" on {parity['observations']} observations"
        + ("" if calibrated is None else f"; calibrated on {calibrated['observations']:,} {calibrated['source']}")
        + f") and {exported.metadata_path.name}"
    )
    _print_report(checked)
    return 0


def _export(args, source, out: Path, quantize, budget, calibration: dict, export_fn) -> Any:
    """The artifact with its report (`kppo.exporter.deploy`): one precision, or the best within `budget`."""
    from kppo.exporter.deploy import export_checked, export_within_budget

    common = {
        "env": args.calibrate_env,
        "episodes": args.episodes,
        "accept_degraded": args.accept_degraded,
        "export_fn": export_fn,
    }
    batch = None if args.batch_size == 0 else args.batch_size
    if budget is not None:
        return export_within_budget(source, out, budget, calibration=calibration, batch_size=batch, **common)
    return export_checked(source, out, format=args.format, quantize=quantize, batch_size=batch, **calibration, **common)


def _print_report(checked) -> None:
    """The report's summary line, and a budget's candidates."""
    from kppo.exporter.report import summary

    print(f"report {checked.report_path.name}: {summary(checked.report)}")
    for row in (checked.report.get("budget") or {}).get("candidates", []):
        ret = "n/a" if row["return"] is None else f"{row['return']:.1f}"
        arena = "n/a" if row["arena_bytes"] is None else f"{row['arena_bytes']:,} B"
        print(
            f"  {row['quantization']:>8}: return {ret}, {row['size_bytes']:,} B, arena {arena}, "
            f"{row['latency_us']:.1f} us{'' if row['fits'] else ', over budget'}"
            + (", Pareto" if row["pareto"] else "")
            + (" <- written" if row["chosen"] else "")
        )
