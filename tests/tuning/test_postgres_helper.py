"""The `postgres_url` fixture's server (tests/tuning/conftest.py) takes connections and holds an Optuna study that two
other processes each add a trial to: the storage the tuning tests share between processes is a real one."""

import subprocess
import sys
import uuid

import optuna
import sqlalchemy

# One trial, told the value of argv[3], in the study argv[1] on the storage argv[2], from a process of its own.
ADD_TRIAL = """
import os, sys
import optuna
study = optuna.load_study(study_name=sys.argv[1], storage=sys.argv[2])
trial = study.ask()
trial.set_user_attr("pid", os.getpid())
study.tell(trial, float(sys.argv[3]))
"""


def test_server_takes_connections(postgres_url):
    engine = sqlalchemy.create_engine(postgres_url)
    try:
        with engine.connect() as connection:
            assert connection.execute(sqlalchemy.text("SELECT 1 + 1")).scalar() == 2
    finally:
        engine.dispose()


def test_two_processes_add_trials_to_one_study(postgres_url):
    name = f"kppo-test-{uuid.uuid4().hex}"  # unique: $KPPO_TEST_POSTGRES_URL may be a server that outlives the test
    optuna.create_study(storage=postgres_url, study_name=name, direction="maximize")
    workers = [
        subprocess.Popen([sys.executable, "-c", ADD_TRIAL, name, postgres_url, str(value)], stderr=subprocess.PIPE)
        for value in (1.0, 2.0)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=60)
        assert worker.returncode == 0, stderr.decode()

    trials = optuna.load_study(study_name=name, storage=postgres_url).get_trials()
    assert sorted(t.value for t in trials) == [1.0, 2.0]
    assert {t.user_attrs["pid"] for t in trials} == {w.pid for w in workers}
    optuna.delete_study(study_name=name, storage=postgres_url)
