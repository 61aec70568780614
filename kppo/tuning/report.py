"""A study's output in its folder: `best.yaml` (the best trial's config, which `kppo train` takes as it is),
`trials.csv` (one row per trial), the plots people look at (Optuna's optimization history and parameter
importances, through its matplotlib backend) and a line on the console per finished trial."""

from __future__ import annotations

import csv
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from kppo.config.options import Config
from kppo.core.errors import reason

__all__ = ["Console", "write_best", "write_plots", "write_trials"]

PLOTS = ("optimization_history", "param_importances")


def write_trials(study: Any, path: Path) -> None:
    """trials.csv: number, state, value, wall time, seeds, batch, then one column per parameter (`params_<name>`),
    and why a trial failed or was run again."""
    trials = study.get_trials(deepcopy=False)
    names = sorted({name for t in trials for name in t.params})
    columns = ["number", "state", "value", "wall_s", "seeds", "batch", *(f"params_{n}" for n in names), "note"]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for t in trials:
            attrs = t.user_attrs
            note = attrs.get("error") or attrs.get("kppo_cut") or ""
            if "kppo_retry_of" in attrs:
                note = f"runs trial {attrs['kppo_retry_of']} again"
            writer.writerow(
                [
                    t.number,
                    t.state.name,
                    "" if t.value is None else t.value,
                    attrs.get("wall_s", ""),
                    json.dumps(attrs.get("seeds", [])),
                    attrs.get("batch", ""),
                    *(t.params.get(n, "") for n in names),
                    note,
                ]
            )


def write_best(config: Config, path: Path) -> None:
    """best.yaml: the best trial's full config."""
    config.to_yaml(path)


def write_plots(study: Any, out: Path) -> list[str]:
    """optimization_history.png and param_importances.png; returns one line per plot that could not be drawn (too
    few finished trials, say)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    skipped = []
    for name in PLOTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna marks its matplotlib backend experimental
                axes = getattr(optuna_plots, f"plot_{name}")(study)
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.savefig(out / f"{name}.png", dpi=100, bbox_inches="tight")
            plt.close(figure)
        except (ValueError, RuntimeError, ZeroDivisionError) as err:
            skipped.append(f"{name}.png not drawn ({reason(err)})")
    return skipped


class Console:
    """One line per finished trial and a summary, when `verbose` >= 1."""

    def __init__(self, verbose: int, total: int):
        self.verbose, self.total, self.finished = verbose, total, 0

    def trial(self, study: Any, number: int, what: str) -> None:
        if self.verbose < 1:
            return
        self.finished += 1  # every call is a trial that ended: complete, pruned or failed
        states = [t.state.name for t in study.get_trials(deepcopy=False)]
        try:
            best = f"best {study.best_value:.2f} (trial {study.best_trial.number})"
        except ValueError:
            best = "no value yet"
        print(
            f"[kppo tune] trial {number}: {what} | {self.finished}/{self.total} here, {best}, "
            f"{states.count('COMPLETE')} complete, {states.count('PRUNED')} pruned, {states.count('FAIL')} failed",
            file=sys.stdout,
            flush=True,
        )

    def line(self, text: str) -> None:
        if self.verbose >= 1:
            print(f"[kppo tune] {text}", flush=True)
