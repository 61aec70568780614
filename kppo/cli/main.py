"""`kppo train | eval | export | tune`: the parser (each command's module adds its own), one-line errors and warnings.

    kppo train                                  # the default example: TF-native CartPole, exports policy.tflite
    kppo train pendulum --set learning_rate=3e-4 --seed 1 --out runs/p1
    kppo eval runs/p1 --episodes 20             # or an artifact: kppo eval runs/p1/policy.tflite
    kppo export runs/p1 --format tflite --quantize int8
    kppo export model.zip --vecnormalize vec_normalize.pkl --quantize int8 --out p.tflite   # an SB3 save
    kppo eval model.zip --env CartPole-v1       # an SB3 save: --env names its env
    kppo train cartpole --seeds 0-7 --sweep learning_rate=3e-4,1e-3   # 16 agents in one compiled program
    kppo tune cartpole --space space.yaml --trials 16 --batch 8   # a search; 8 trials a compiled population

A run directory holds config.yaml, agent/ (networks, optimizer and statistics; no pickle), metrics.csv,
tensorboard/, learning_curve.png, policy.tflite + policy.tflite.metadata.json, summary.json. `eval` and `export`
of a run that stopped before writing agent/ (interrupted, killed) use its newest readable checkpoint.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any, NoReturn

from kppo.cli.evaluate import add_eval_parser
from kppo.cli.export import add_export_parser
from kppo.cli.runs import printable
from kppo.cli.train import add_train_parser
from kppo.cli.tune import add_tune_parser


class _Parser(argparse.ArgumentParser):
    """argparse with kppo's one-line errors: `kppo <command>: error: <message>` and a pointer to --help on stderr,
    exit status 2 (argparse's own print the usage first, several lines); --help is argparse's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # the root parser's: command -> its parser

    def error(self, message: str) -> NoReturn:
        shown = printable(message)  # an argument's text, a line break in it included, stays on the line
        print(f"{self.prog}: error: {shown} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, with unrecognized arguments refused by the command they were given to, quoted."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self.commands.get(str(getattr(parsed, "command", "")), self)
            parser.error(f"unrecognized arguments: {' '.join(map(repr, extras))}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    """The root parser: one subparser a command, each added by its module (`cli.train`, `cli.evaluate`, `cli.export`,
    `cli.tune`) with its `cmd_*` as `func`."""
    parser = _Parser(prog="kppo", description="PPO for TensorFlow/Keras.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add_parser in (add_train_parser, add_eval_parser, add_export_parser, add_tune_parser):
        add_parser(sub)
    parser.commands = dict(sub.choices)
    return parser


class _Warnings:
    """A command's warnings as one line each on stderr, like its errors (e.g. fewer evaluation rounds than
    eval_freq). They are held while the command checks its arguments and shown once its work starts
    (`args.start_work()`, which the commands call), so that a refused command prints its one error line only (a
    warning about a command that did not run is noise, e.g. Optuna's "experimental" one before a --pruner error)."""

    def __init__(self, command: str) -> None:
        self.command, self.live = command, False
        self.held: list[str] = []

    def show(self, message, category, filename, lineno, file=None, line=None) -> None:
        del category, filename, lineno, line
        text = f"kppo {self.command}: warning: {message}"
        if self.live:
            print(text, file=file or sys.stderr)
        else:
            self.held.append(text)

    def start(self) -> None:
        self.live = True
        for text in self.held:
            print(text, file=sys.stderr)
        self.held.clear()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shown = _Warnings(args.command)
    args.start_work = shown.start
    with warnings.catch_warnings():  # restores the previous warning display on return
        warnings.showwarning = shown.show
        try:
            code = args.func(args)
        except (ValueError, FloatingPointError, OSError) as err:  # OSError: kppo's one-line write failures
            print(f"kppo {args.command}: error: {err}", file=sys.stderr)
            return 2
        shown.start()  # a command that returned without starting (nothing to do) still says its warnings
        return code


if __name__ == "__main__":
    sys.exit(main())
