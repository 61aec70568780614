"""Workers on one study spread and never race: `kppo tune` processes started together on a fresh storage (a SQLite
file; a fresh PostgreSQL database) each sample with their own seed, complete N trials with N distinct settings, none
lost or run twice, every worker rc 0; and ten pairs of processes opening fresh SQLite storages at the same instant
all succeed (the tables' creation is serialized: `kppo.tuning.storage.creation_lock`)."""

import json
import subprocess
import sys
import uuid

import optuna
import pytest

from tests.tuning.test_shared_study import _files

#: Imports Optuna once, then forks a process per URL (in pairs) that waits for the same instant to open it: separate
#: processes, each with its own connection, without an interpreter start (and Optuna's import) per process.
PAIRS = """\
import json, multiprocessing, sys, time
from pathlib import Path
import optuna
from kppo.tuning.storage import creation_lock, open_storage
optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_and_tell(url, start, errors):
    try:
        while time.time() < start:  # every process leaves the line at the same instant
            time.sleep(0.001)
        with creation_lock(url):
            storage, _ = open_storage(url, Path("."))
            study = optuna.create_study(storage=storage, study_name="shared", load_if_exists=True, direction="maximize")
        trial = study.ask()
        study.tell(trial, 1.0)
    except BaseException as error:
        errors.put(f"{type(error).__name__}: {error}")
        raise


urls = json.loads(sys.argv[1])
fork = multiprocessing.get_context("fork")
errors = fork.Queue()
start = time.time() + 1.0  # after every process has forked
workers = [fork.Process(target=open_and_tell, args=(url, start, errors)) for url in urls for _ in range(2)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join(120)
failures = [errors.get() for _ in range(errors.qsize())]
failures += [f"rc {w.exitcode}" for w in workers if w.exitcode != 0 and not failures]
print(json.dumps(failures))
"""


def _tune(tmp_path, storage: str, out: str, trials: int) -> subprocess.Popen:
    config, space = _files(tmp_path)
    command = [sys.executable, "-m", "kppo.cli", "tune", str(config), "--space", str(space), "--storage", storage]
    command += ["--study", "shared", "--out", str(tmp_path / out), "--quiet", "--pruner", "none"]
    return subprocess.Popen([*command, "--trials", str(trials)], stderr=subprocess.PIPE, text=True)


def _fresh_postgres_database(url: str) -> str:
    """A new, empty database on the server of `url` (what a first worker finds on a new server): its URL."""
    import sqlalchemy

    name = f"kppo_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sqlalchemy.pool.NullPool)
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return url.rsplit("/", 1)[0] + "/" + name


# SQLite's workers are slow: the default suite keeps the real server's, and SQLite's fresh storages opened at one
# instant (below); how workers spread (each its own sampler seed) does not depend on the storage.
@pytest.mark.parametrize("backend", [pytest.param("sqlite", marks=pytest.mark.slow), "postgresql"])
def test_two_workers_started_together_spread_over_one_fresh_study(tmp_path, backend, request):
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        url = _fresh_postgres_database(request.getfixturevalue("postgres_url"))
    workers = [_tune(tmp_path, url, f"w{i}", 3) for i in range(2)]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-2000:]
    trials = optuna.load_study(study_name="shared", storage=url).get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 6  # none lost, none run twice
    assert len({t.params["learning_rate"] for t in trials}) == 6  # six distinct settings
    owners = sorted(t.user_attrs["kppo_owner"]["pid"] for t in trials)
    assert owners == sorted([workers[0].pid] * 3 + [workers[1].pid] * 3)
    seeds = {t.user_attrs["kppo_owner"]["pid"]: t.user_attrs["sampler_seed"] for t in trials}
    assert len(set(seeds.values())) == 2  # each worker drew its own sampler seed


def test_ten_pairs_opening_fresh_sqlite_storages_at_one_instant_all_succeed(tmp_path):
    urls = [f"sqlite:///{tmp_path / f'pair{i}.db'}" for i in range(10)]
    out = subprocess.run(
        [sys.executable, "-c", PAIRS, json.dumps(urls)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], out.stderr[-3000:]
    for url in urls:
        assert len(optuna.load_study(study_name="shared", storage=url).get_trials()) == 2
