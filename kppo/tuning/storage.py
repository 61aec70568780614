"""Where a study lives and who runs its trials: Optuna storages opened from a URL (a SQLite file in the run
directory by default; any RDB URL, PostgreSQL and MySQL among them; Optuna's journal file), the study made or joined
with a check that it is this config's, and the liveness of running trials across processes and machines.

Optuna's own heartbeat runs only inside `Study.optimize`; kppo asks and tells, so it keeps its own on every storage:
each running trial carries its owner (host, pid) and a heartbeat time in its user attributes. A trial whose owner is
gone (a dead pid on this host, or no heartbeat for `STALE_S` seconds) is marked failed and flagged as cut, and
`--resume` runs the cut trials' parameters again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from kppo.config.options import Config
from kppo.core.errors import reason
from kppo.tuning.space import SearchSpace

__all__ = [
    "Liveness",
    "creation_lock",
    "cut_trials",
    "fail_stale_trials",
    "open_storage",
    "open_study",
    "storage_url",
    "study_identity",
    "study_name",
]

HEARTBEAT_S = 10.0  # how often a process marks its running trials alive
STALE_S = 120.0  # a running trial with no heartbeat for this long belongs to a dead process
OWNER, HEARTBEAT, CUT, RETRY_OF = "kppo_owner", "kppo_heartbeat", "kppo_cut", "kppo_retry_of"


def _redacted(url: str) -> str:
    """A storage URL without its password (errors and the console show it)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"


def storage_url(url: str | None, out: Path) -> str:
    """`url`, or for None the study's SQLite file in `out` (`out/study.db`, the folder made)."""
    if url is not None:
        return url
    out.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(out / 'study.db').resolve()}"


#: The PostgreSQL advisory lock that serializes the creation of Optuna's tables between workers (any fixed key).
PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"kppo: optuna schema").digest()[:7], "big")


@contextlib.contextmanager
def creation_lock(url: str) -> Iterator[None]:
    """Held while a worker opens the storage and its study: two processes that create a fresh Optuna storage at once
    race on its tables (`alembic_version`'s UNIQUE constraint; Optuna issue #4621), so the second waits for the first
    and then opens what it created. SQLite: an exclusive `flock` on a lock file beside the database; PostgreSQL: a
    session advisory lock; other URLs and journal files (which lock themselves): none."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        lock_path = Path(url.removeprefix("sqlite:///") + ".lock")
        with open(lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return
    if url.startswith(("postgresql://", "postgresql+", "postgres://")):
        import sqlalchemy

        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        try:
            with engine.connect() as connection:
                connection.execute(sqlalchemy.text(f"SELECT pg_advisory_lock({PG_LOCK_KEY})"))
                try:
                    yield
                finally:
                    connection.execute(sqlalchemy.text(f"SELECT pg_advisory_unlock({PG_LOCK_KEY})"))
        finally:
            engine.dispose()
        return
    yield


def open_storage(url: str | None, out: Path) -> tuple[Any, str]:
    """(Optuna storage, how messages name it) for `url`: None -> `out/study.db` (SQLite); `journal:PATH` or a path
    ending in .log / .journal -> Optuna's journal file; anything with '://' -> an RDB storage (SQLAlchemy URL)."""
    import optuna

    url = storage_url(url, out)
    name = _redacted(url)
    try:
        if url.startswith("journal:") or url.endswith((".log", ".journal")):
            path = Path(url.removeprefix("journal:"))
            if not path.parent.is_dir():
                raise ValueError(f"--storage: expected a journal file in an existing folder, got {str(path)!r}")
            from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

            backend = JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path)))
            return optuna.storages.JournalStorage(backend), name
        if "://" not in url:
            raise ValueError(
                f"--storage: expected a database URL (sqlite:///F, postgresql://U@H/DB, ...) or journal:PATH, "
                f"got {name!r}"
            )
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True}), name
    except ValueError as err:
        if str(err).startswith("--storage"):
            raise
        raise ValueError(f"--storage: could not open {name!r} ({reason(err)})") from None
    except Exception as err:  # SQLAlchemy's and the drivers' errors: a URL that cannot be opened
        raise ValueError(f"--storage: could not open {name!r} ({type(err).__name__}: {reason(err)})") from None


#: Config fields added after the first studies were saved: left out of a study's identity at their defaults, so a
#: study made before them keeps its default name and the same search still joins it.
LATER_FIELDS = ("clip_obs", "clip_reward", "norm_epsilon", "n_lstm_layers")


def study_identity(base: Config, space: SearchSpace, env: str) -> dict[str, Any]:
    """What a study is of: the env, the base config (`LATER_FIELDS` at their defaults left out) and the space (its
    user attributes)."""
    fields = Config.__dataclass_fields__
    config = {k: v for k, v in base.to_dict().items() if not (k in LATER_FIELDS and v == fields[k].default)}
    return {"env": env, "config": config, "space": space.to_dict()}


def study_name(base: Config, space: SearchSpace, env: str) -> str:
    """The default study name: the env and a digest of config and space (processes with the same ones meet)."""
    text = json.dumps(study_identity(base, space, env), sort_keys=True, default=str)
    return f"{env}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def _first_difference(saved: dict, mine: dict) -> str:
    for part in ("env", "config", "space"):
        if part == "env" and saved.get("env") != mine["env"]:
            return f"env {saved.get('env')!r}, not {mine['env']!r}"
        a, b = saved.get(part) or {}, mine[part]
        if part != "env" and a != b:
            name = next((k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)), "?")
            return f"{part} {name}: {a.get(name)!r}, not {b.get(name)!r}"
    return ""


def open_study(
    storage: Any, label: str, name: str, identity: dict[str, Any], sampler: Any, pruner: Any, resume: bool
) -> Any:
    """The study `name` in `storage`: made (with `identity` as its user attributes), or joined when it exists and
    is of the same env, config and space. `resume` needs it to exist."""
    import optuna

    exists = name in [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if resume and not exists:
        raise ValueError(f"--resume: no study {name!r} in {label} to resume")
    study = optuna.create_study(
        storage=storage, study_name=name, sampler=sampler, pruner=pruner, direction="maximize", load_if_exists=True
    )
    saved = study.user_attrs.get("kppo")
    if saved is None:
        saved = json.loads(json.dumps(identity, default=str))
        study.set_user_attr("kppo", saved)
    difference = _first_difference(saved, json.loads(json.dumps(identity, default=str)))
    if difference:
        raise ValueError(f"--study {name}: the study in {label} is of another search ({difference}); name another")
    return study


def _owner() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _alive(owner: Any) -> bool | None:
    """Whether the owner process lives: known on its own host, None (unknown) elsewhere."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, KeyError, TypeError):
        return None
    return True


def _trial(study: Any, frozen: Any) -> Any:
    import optuna

    return optuna.trial.Trial(study, frozen._trial_id)  # a handle on a trial another process asked for


def fail_stale_trials(study: Any, now: float | None = None) -> list[int]:
    """Marks the running trials of dead processes failed and cut; returns their numbers."""
    import optuna

    now = time.time() if now is None else now
    failed = []
    for frozen in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        attrs = frozen.user_attrs
        alive = _alive(attrs.get(OWNER))
        beat = attrs.get(HEARTBEAT, frozen.datetime_start.timestamp() if frozen.datetime_start else now)
        if alive is False or (alive is None and now - float(beat) > STALE_S):
            try:
                _trial(study, frozen).set_user_attr(CUT, "its process stopped mid-trial")
                study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
            except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError):
                continue  # another process finished or failed it first
            failed.append(frozen.number)
    return failed


def cut_trials(study: Any) -> list[Any]:
    """The failed trials an interruption or a dead process cut, not yet run again."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get(RETRY_OF) for t in trials}
    return [
        t for t in trials if t.state == optuna.trial.TrialState.FAIL and CUT in t.user_attrs and t.number not in retried
    ]


class Liveness:
    """This process's running trials: owned (host, pid) and marked alive every `HEARTBEAT_S` seconds by a thread."""

    def __init__(self, interval: float = HEARTBEAT_S):
        self.interval, self.lock = interval, threading.Lock()
        self.running: list[Any] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="kppo-tune-heartbeat")
        self.thread.start()

    def own(self, trial: Any) -> None:
        trial.set_user_attr(OWNER, _owner())
        trial.set_user_attr(HEARTBEAT, time.time())
        with self.lock:
            self.running.append(trial)

    def release(self, trial: Any) -> None:
        with self.lock:
            self.running = [t for t in self.running if t is not trial]

    def _beat(self) -> None:
        while not self.stop.wait(self.interval):
            with self.lock:
                trials = list(self.running)
            for trial in trials:
                try:
                    trial.set_user_attr(HEARTBEAT, time.time())
                except Exception:  # finished meanwhile, or the storage is briefly away: the next beat tries again
                    continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
