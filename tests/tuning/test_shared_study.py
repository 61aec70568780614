"""One study, several processes: `kppo tune` processes on one storage (Optuna's journal file; a real PostgreSQL
server, what several machines would share) complete it together, no trial lost or run twice; a process killed
mid-trial leaves the study usable, and `--resume` runs the trial it cut again."""

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

SPACE = "learning_rate: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}\n"
CONFIG = """\
num_envs: 4
num_steps: 16
total_timesteps: 256
num_minibatches: 2
num_epochs: 2
eval_freq: 2
num_eval_envs: 2
iterations_per_call: 2
jit_rollout: false
jit_update: false
jit_eval: false
"""


def _files(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "space.yaml").write_text(SPACE)
    return tmp_path / "config.yaml", tmp_path / "space.yaml"


def _tune(tmp_path, storage: str, out: str, *extra: str) -> subprocess.Popen:
    config, space = _files(tmp_path)
    command = [sys.executable, "-m", "kppo.cli", "tune", str(config), "--space", str(space), "--storage", storage]
    command += ["--study", "shared", "--out", str(tmp_path / out), "--quiet", "--pruner", "none", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=240)
    assert process.returncode == 0, err[-2000:]


def _storage(url: str):
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix("journal:")))
    return url


def _check_completed_together(url: str, processes: list[subprocess.Popen]) -> None:
    study = optuna.load_study(study_name="shared", storage=_storage(url))
    trials = study.get_trials()
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4
    owners = sorted(t.user_attrs["kppo_owner"]["pid"] for t in trials)
    assert owners == sorted([processes[0].pid] * 2 + [processes[1].pid] * 2)  # each process ran its own two


# Slow, to keep the default suite in its budget: two workers on a real server (and on a SQLite file) run in the
# default suite as tests/tuning/test_workers.py, which checks the same (every trial complete, each worker its own) and
# that they spread; the journal file shares Optuna's storage interface.
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["journal", "postgresql"])
def test_two_processes_complete_one_study_together(tmp_path, backend, request):
    url = f"journal:{tmp_path / 'study.log'}" if backend == "journal" else request.getfixturevalue("postgres_url")
    if backend == "postgresql":  # a fresh study on the session's server
        for summary in optuna.get_all_study_summaries(url, include_best_trial=False):
            if summary.study_name == "shared":
                optuna.delete_study(study_name="shared", storage=url)
    processes = [_tune(tmp_path, url, f"p{i}", "--trials", "2") for i in range(2)]
    for process in processes:
        _finish(process)
    _check_completed_together(url, processes)


def _first_running(url: str, timeout: float = 120.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            study = optuna.load_study(study_name="shared", storage=url)
            running = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
            if running:
                return running[0].number
        except KeyError:  # the study is not made yet
            pass
        time.sleep(0.2)
    raise AssertionError("no trial started")


def test_a_process_killed_mid_trial_leaves_the_study_usable_and_resume_runs_the_trial_again(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    victim = _tune(tmp_path, url, "a", "--trials", "3")
    number = _first_running(url)
    time.sleep(1.0)  # inside the trial: building, compiling or training
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate()
    _finish(_tune(tmp_path, url, "a", "--trials", "1", "--resume"))
    study = optuna.load_study(study_name="shared", storage=url)
    trials = {t.number: t for t in study.get_trials()}
    cut = trials[number]
    assert cut.state == optuna.trial.TrialState.FAIL and cut.user_attrs["kppo_cut"] == "its process stopped mid-trial"
    again = [t for t in trials.values() if t.user_attrs.get("kppo_retry_of") == number]
    assert len(again) == 1 and again[0].state == optuna.trial.TrialState.COMPLETE
    assert again[0].params == cut.params  # the same trial, run again
    complete = [t for t in trials.values() if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == number + 1  # every trial finished before the kill is kept, plus the one run again
