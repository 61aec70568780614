"""`kppo export RUN_DIR|SB3_ZIP`: a run's agent (or its newest checkpoint) or an SB3 save as a TFLite or SavedModel
policy with its metadata and parity check (`kppo.export`), written beside the run or the save by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kppo.cli.sources import is_unfinished_run, load_unfinished_run, sb3_model


def add_export_parser(sub: Any) -> None:
    """`kppo export`'s arguments, on the root parser's subparsers `sub`."""
    ex = sub.add_parser("export", help="export a run's agent as TFLite or SavedModel")
    ex.add_argument("run", metavar="RUN_DIR|SB3_ZIP")
    ex.add_argument("--format", choices=["tflite", "saved_model"], default="tflite")
    ex.add_argument("--quantize", choices=["none", "float16", "dynamic", "int8"], default="none")
    ex.add_argument("--batch-size", type=int, default=1, help="fixed input batch (0: dynamic)")
    ex.add_argument("--out")
    ex.add_argument("--vecnormalize", metavar="PKL", help="an SB3 save's vec_normalize.pkl: its statistics baked in")
    ex.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    import kppo
    from kppo.agent.checkpoint import read_metadata
    from kppo.cli.runs import writable_dir

    if args.batch_size < 0:
        raise ValueError(f"--batch-size: expected an integer >= 0 (0: a dynamic batch), got {args.batch_size}")
    source: Any = Path(args.run)
    quantize = None if args.quantize in (None, "none", "float32") else args.quantize
    default = f"policy{'' if quantize is None else '_' + quantize}" + (".tflite" if args.format == "tflite" else "")
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
    args.start_work()
    exported = kppo.export(
        source, out, format=args.format, quantize=quantize, batch_size=None if args.batch_size == 0 else args.batch_size
    )
    parity = exported.metadata["parity"]
    print(
        f"wrote {exported.path} ({exported.metadata['size_bytes']:,} bytes; parity max error {parity['max_error']:.2e}"
        f" on {parity['observations']} observations) and {exported.metadata_path.name}"
    )
    return 0
