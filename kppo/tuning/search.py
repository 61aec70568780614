"""`kppo.tune`: a hyperparameter search on Optuna (TPE and the median pruner by default, as RL-Zoo's), whose trials
train `batch` at a time as one compiled population when they differ only in sweepable fields, in a study that any
number of processes share through its storage.

The loop asks `batch` trials, groups them by shape (`trials.group_by_shape`), trains each group with every seed of
each trial as one population (`trials.run_group`), and tells each trial its value: the mean over its seeds of its last
`objective_rounds` evaluation rounds. `trials` counts this process's trials (Optuna's `n_trials`); `timeout` stops
asking after that many seconds.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from pathlib import Path
from typing import Any, NamedTuple

from kppo.config.options import Config
from kppo.config.population import check_members
from kppo.tuning import report
from kppo.tuning.space import SearchSpace, default_space, load_space, parse_space
from kppo.tuning.storage import (
    RETRY_OF,
    Liveness,
    cut_trials,
    fail_stale_trials,
    creation_lock,
    open_storage,
    open_study,
    storage_url,
    study_identity,
    study_name,
)
from kppo.tuning.trials import Pending, group_by_shape, run_group

__all__ = ["TuneResult", "make_pruner", "make_sampler", "tune"]

SAMPLERS = {"tpe": "TPESampler", "random": "RandomSampler", "cmaes": "CmaEsSampler", "qmc": "QMCSampler"}
PRUNERS = {
    "median": "MedianPruner",
    "none": "NopPruner",
    "nop": "NopPruner",
    "halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
}


class TuneResult(NamedTuple):
    """What `kppo.tune` found: the best value and parameters, the best trial's full config, the study, and its
    folder (best.yaml, trials.csv, the plots)."""

    best_value: float | None
    best_params: dict[str, Any]
    best_config: Config | None
    study: Any
    out: Path


def make_sampler(name: str, seed: int | None, startup_trials: int) -> Any:
    """An Optuna sampler by short name (tpe, random, cmaes, qmc) or class name (`optuna.samplers.X`).
    TPE as RL-Zoo's: multivariate; with a constant liar, so trials asked together spread out."""
    import optuna

    cls_name = SAMPLERS.get(name.lower(), name)
    cls = getattr(optuna.samplers, cls_name, None)
    if not isinstance(cls, type) or not issubclass(cls, optuna.samplers.BaseSampler):
        raise ValueError(f"--sampler: expected one of {', '.join(SAMPLERS)} or an optuna.samplers class, got {name!r}")
    if cls is optuna.samplers.TPESampler:
        return cls(seed=seed, n_startup_trials=startup_trials, multivariate=True, constant_liar=True)
    try:
        return cls(seed=seed)  # type: ignore[call-arg]  # every seeded Optuna sampler takes seed=
    except (TypeError, ImportError, ModuleNotFoundError) as err:
        raise ValueError(f"--sampler {name}: could not make it ({type(err).__name__}: {err})") from None


def make_pruner(name: str, startup_trials: int, warmup_rounds: int) -> Any:
    """An Optuna pruner by short name (median, none, halving, hyperband) or class name (`optuna.pruners.X`); the
    median pruner as RL-Zoo's (no pruning in the first third of the rounds)."""
    import optuna

    cls_name = PRUNERS.get(name.lower(), name)
    cls = getattr(optuna.pruners, cls_name, None)
    if not isinstance(cls, type) or not issubclass(cls, optuna.pruners.BasePruner):
        raise ValueError(f"--pruner: expected one of {', '.join(PRUNERS)} or an optuna.pruners class, got {name!r}")
    if cls is optuna.pruners.MedianPruner:
        return cls(n_startup_trials=startup_trials, n_warmup_steps=warmup_rounds)
    try:
        return cls()
    except TypeError as err:
        raise ValueError(f"--pruner {name}: takes arguments kppo does not pass ({err})") from None


def _space(space: Any, base: Config) -> SearchSpace:
    if space is None:
        return default_space(base)
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, dict):
        return parse_space(space, base)
    return load_space(space, base)


def _check_budget(trials: int, timeout: float | None, sampler_seed: int | None) -> None:
    """The Python API checks what the CLI's parser checks (`kppo.cli.tune`)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise ValueError(f"trials: expected an integer >= 0 (0 makes the study only), got {trials!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise ValueError(f"timeout: expected None or a positive number of seconds, got {timeout!r}")
    if sampler_seed is not None and (not isinstance(sampler_seed, int) or sampler_seed < 0):
        raise ValueError(f"sampler_seed: expected None or an integer >= 0, got {sampler_seed!r}")


def _check_batching(base: Config, batch: int, seeds_per_trial: int) -> None:
    if batch < 1 or seeds_per_trial < 1:
        raise ValueError(f"--batch / --seeds-per-trial: expected >= 1, got {batch} and {seeds_per_trial}")
    if batch * seeds_per_trial > 1:
        try:
            check_members([base])
        except ValueError as err:
            raise ValueError(
                f"--batch {batch} --seeds-per-trial {seeds_per_trial}: this config cannot train as a population "
                f"({err}); use --batch 1 --seeds-per-trial 1"
            ) from None


def worker_seed(sampler_seed: int | None) -> int:
    """This process's sampler seed: `sampler_seed`, or for None a fresh draw from the OS's entropy, so that workers
    joining one study propose different trials (Optuna's and RL-Zoo's default: an unseeded sampler)."""
    return secrets.randbelow(2**32) if sampler_seed is None else sampler_seed


def _ask(study: Any, space: SearchSpace, base: Config, attrs: dict, live: Liveness, console) -> Pending | None:
    """One asked trial with its config; a sampled config that is not valid fails the trial (None). `attrs`: what the
    trial records (the seeds it trains, the seed of the sampler that proposed it: a worker's search re-runs from it)."""
    import optuna

    trial = study.ask()
    live.own(trial)
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    params = space.suggest(trial)
    try:
        return Pending(trial, params, space.apply(base, params))
    except ValueError as err:
        trial.set_user_attr("error", str(err))
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        live.release(trial)
        console.trial(study, trial.number, f"failed: {err}")
        return None


def _requeue_cut(study: Any, console) -> None:
    """`--resume`: the trials an interruption or a dead process cut, asked again with the same parameters."""
    for frozen in cut_trials(study):
        study.enqueue_trial(frozen.params, user_attrs={RETRY_OF: frozen.number}, skip_if_exists=False)
        console.line(f"trial {frozen.number} was cut ({frozen.user_attrs.get('kppo_cut')}): running it again")


def tune(
    env: Any = None,
    config: Config | None = None,
    space: Any = None,
    *,
    trials: int = 16,
    timeout: float | None = None,
    batch: int = 1,
    seeds_per_trial: int = 1,
    sampler: str = "tpe",
    pruner: str = "median",
    storage: str | None = None,
    study: str | None = None,
    resume: bool = False,
    out: str | Path | None = None,
    sampler_seed: int | None = None,
    startup_trials: int = 10,
    objective_rounds: int = 1,
    verbose: int = 1,
) -> TuneResult:
    """Searches hyperparameters of `config` on `env` with Optuna, trials batched as populations.

    Args:
        env: as `kppo.train` takes it (TF-native or gymnasium); defaults to `config.env`.
        config: the base config (its `total_timesteps` is each trial's budget, `eval_freq` its evaluation rounds).
        space: a YAML file, YAML text, a mapping or a `SearchSpace`; None: RL-Zoo's PPO space.
        trials: how many trials this process runs (Optuna's `n_trials`).
        timeout: stop asking for trials after this many seconds.
        batch: trials asked together; those that differ only in sweepable fields train as one population.
        seeds_per_trial: seeds each trial trains (`config.seed`, +1, ...); the objective is their mean.
        sampler: a short name (`tpe`, `random`, `cmaes`, `qmc`) or an Optuna sampler class name.
        pruner: a short name (`median`, `none`, `halving`, `hyperband`) or an Optuna pruner class name.
        storage: an Optuna storage URL (default: SQLite in `out`); `journal:PATH` for Optuna's journal file.
        study: the study's name (default: the env and a digest of config and space, so equal searches meet).
        resume: the study must exist; trials an interruption or a killed process cut are run again first.
        out: the study's folder (best.yaml, trials.csv, plots; the default SQLite file).
        sampler_seed: the sampler's seed: an integer reproduces this process's search; None (the default) draws
            one per process, so that workers on one study spread (each trial records its sampler's seed).
        startup_trials: random trials before TPE models (and before the median pruner prunes).
        objective_rounds: the last evaluation rounds a trial's value averages.
        verbose: 0 silent, 1 a console line per finished trial.
    """
    import optuna

    base = Config() if config is None else config
    env = base.env if env is None else env
    env_name = env if isinstance(env, str) else type(env).__name__
    out = Path(out) if out is not None else Path("runs") / f"tune-{env_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    search = _space(space, base)
    _check_budget(trials, timeout, sampler_seed)
    _check_batching(base, batch, seeds_per_trial)
    if objective_rounds < 1:
        raise ValueError(f"objective_rounds: expected >= 1, got {objective_rounds}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = worker_seed(sampler_seed)
    made_sampler = make_sampler(sampler, seed, startup_trials)
    made_pruner = make_pruner(pruner, startup_trials, base.eval_rounds // 3)  # RL-Zoo: both startups equal
    name = study or study_name(base, search, env_name)
    identity = study_identity(base, search, env_name)
    url = storage_url(storage, out)
    with _opening(url):  # one worker at a time creates the storage's tables and the study
        backend, label = open_storage(url, out)
        the_study = open_study(backend, label, name, identity, made_sampler, made_pruner, resume)
    out.mkdir(parents=True, exist_ok=True)
    console = report.Console(verbose, trials)
    console.line(
        f"study {name!r} in {label}: {trials} trials here, batch {batch}, {seeds_per_trial} seed(s) each, "
        f"sampler seed {seed}"
    )
    seeds = [base.seed + i for i in range(seeds_per_trial)]
    stale = fail_stale_trials(the_study)
    if stale:
        console.line(f"trials {stale} belonged to a process that stopped: marked failed")
    if resume:
        _requeue_cut(the_study, console)
    attrs = {"seeds": seeds, "sampler_seed": seed}
    _run(env, the_study, search, base, attrs, trials, timeout, batch, objective_rounds, console)
    return _finish(the_study, search, base, out, console)


@contextlib.contextmanager
def _opening(url: str):
    """`creation_lock(url)` held around the body; a lock that cannot be taken (a database that cannot be reached)
    leaves the body to `open_storage`, whose error names the storage and the reason in one line."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(creation_lock(url))
        except Exception:  # open_storage reports it
            pass
        yield


def _run(env, study, space, base, attrs, trials, timeout, batch, objective_rounds, console) -> None:
    seeds = attrs["seeds"]
    live, start, asked = Liveness(), time.monotonic(), 0
    programs: dict = {}  # compiled populations by shape: a later batch of the same shapes reuses one
    try:
        while asked < trials and (timeout is None or time.monotonic() - start < timeout):
            fail_stale_trials(study)
            size = min(batch, trials - asked)
            pending = [p for p in (_ask(study, space, base, attrs, live, console) for _ in range(size)) if p]
            asked += size
            for group in group_by_shape(pending):
                run_group(env, study, group, seeds, objective_rounds, _logger(console, study), programs)
                for item in group:
                    live.release(item.trial)
    finally:
        live.close()


def _logger(console, study: Any):
    """What `run_group` calls when a trial ends: its console line."""
    return lambda item, what: console.trial(study, item.trial.number, what)


def _finish(study: Any, space: SearchSpace, base: Config, out: Path, console) -> TuneResult:
    report.write_trials(study, out / "trials.csv")
    try:
        best = study.best_trial
    except ValueError:  # no trial completed
        console.line(f"no trial completed; trials.csv is in {out}")
        return TuneResult(None, {}, None, study, out)
    best_config = space.apply(base, best.params)
    report.write_best(best_config, out / "best.yaml")
    for line in report.write_plots(study, out):
        console.line(line)
    console.line(f"best value {best.value:.2f} (trial {best.number}): {best.params}; {out / 'best.yaml'}")
    return TuneResult(best.value, dict(best.params), best_config, study, out)
