"""A throwaway PostgreSQL server for the tests that share an Optuna study between processes (tests/tuning).

`start_postgres()` runs `initdb` into a fresh folder under the system temp dir, starts the server with `pg_ctl` on a
free port of 127.0.0.1 (its unix socket inside that folder, no other listener), creates the database `kppo` and returns
the SQLAlchemy URL (`postgresql+psycopg2://kppo@127.0.0.1:PORT/kppo`, trust authentication) and a `stop()` that stops
the server and deletes the folder. It raises `PostgresUnavailable`, saying why, when no server can be started.

The binaries come from PATH (`pg_ctl`, with `initdb` beside it) or else Debian's /usr/lib/postgresql/<version>/bin,
the newest version first. PostgreSQL refuses to run as root, so as root they run as the `postgres` user (which
Debian's package creates) through `runuser`, and the folder is that user's. The folder is not pytest's tmp_path: its
parents are root's and 0700 (the `postgres` user could not reach it), and a unix socket's path must stay short.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

USER = DATABASE = "kppo"
#: The server's settings: loopback only, and no durability (a crash loses a throwaway database, nothing else).
SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
fsync = off
synchronous_commit = off
full_page_writes = off
"""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


def find_binaries() -> Path:
    """The folder holding `initdb`, `pg_ctl` and `postgres`."""
    on_path = shutil.which("pg_ctl")
    candidates = [Path(on_path).resolve().parent] if on_path else []
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += [Path(d) for d in sorted(debian, key=lambda d: [int(n) for n in re.findall(r"\d+", d)], reverse=True)]
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres", "createdb")):
            return folder
    raise PostgresUnavailable(
        "PostgreSQL's server binaries (initdb, pg_ctl) are not on PATH nor in /usr/lib/postgresql/*/bin "
        "(Debian: apt-get install postgresql)"
    )


def start_postgres() -> tuple[str, Callable[[], None]]:
    """Start a throwaway server; return its SQLAlchemy URL and the function that stops it and deletes its files."""
    bin_dir = find_binaries()
    as_user: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresUnavailable("running as root and there is no `postgres` user to run the server as") from None
        if not shutil.which("runuser"):
            raise PostgresUnavailable("running as root and `runuser` (util-linux) is missing") from None
        as_user = ["runuser", "-u", "postgres", "--"]

    root = Path(tempfile.mkdtemp(prefix="kppo-postgres-"))
    data, log = root / "data", root / "server.log"

    def run(*command: str | Path) -> None:
        done = subprocess.run(
            [*as_user, *map(str, command)], cwd=root, capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"`{Path(command[0]).name}` failed (exit status {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}\n{tail}".strip()
            )

    def stop() -> None:
        try:
            if (data / "postmaster.pid").exists():
                run(bin_dir / "pg_ctl", "stop", "-D", data, "-m", "immediate", "-w")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    try:
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        run(bin_dir / "initdb", "-D", data, "-U", USER, "--auth=trust", "--locale=C", "-E", "UTF8", "--no-sync")
        port = free_port()
        with open(data / "postgresql.conf", "a") as conf:  # appending keeps the file its owner's
            conf.write(SETTINGS.format(port=port, socket_dir=root))
        run(bin_dir / "pg_ctl", "start", "-D", data, "-l", log, "-w", "-t", "30")
        run(bin_dir / "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", USER, DATABASE)
    except BaseException as error:
        stop()
        if isinstance(error, (OSError, subprocess.TimeoutExpired)):  # not permitted, or a command that hangs
            raise PostgresUnavailable(f"could not start PostgreSQL: {error}") from error
        raise
    return f"postgresql+psycopg2://{USER}@127.0.0.1:{port}/{DATABASE}", stop


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now (another process could take it before the server does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
