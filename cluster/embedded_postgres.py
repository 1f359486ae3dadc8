"""The self-contained default: an embedded PostgreSQL when nothing answers at the default URL.

``fenceline up`` and ``fenceline demo`` need a PostgreSQL server. A machine with
one (the default URL, ``127.0.0.1:5432``) or a user who names one
(``FENCELINE_DATABASE_URL``, ``--database-url``) uses it as before. Only when
the URL is the unchanged default *and* nothing answers there does
:func:`local_database` start PostgreSQL 16 from the ``pgserver`` wheel in the
project's state folder (``FENCELINE_STATE_DIR``, default ``.fenceline``:
``<state_dir>/postgres``), say so, and hand back settings whose
``database_url`` points at it. RabbitMQ stays optional as before (broker-less
mode: the durable scheduler finds the work).

Invariants:

* **A URL the user set is never replaced.** If it does not answer, the command
  fails on it, naming it, as before: silently running against a different
  database than the one asked for would hide the user's data.
* **Something that answers is used**, even if it refuses the login or lacks the
  database: that is a configuration problem of a real server, which the
  ordinary path reports (``setup_database`` creates a missing database).
* **The embedded server lives as long as the command.** It listens on a Unix
  socket only (no TCP port to collide with), its data folder survives the run
  (the next start takes ~0.1 s instead of an initdb), and it stops when the
  context ends or, failing that, when the process exits (pgserver's own
  ``atexit``). Ray actors and replicas reach it through the socket path in the
  URL they get from :meth:`Settings.to_env`; they all run on this machine.

Measured on the 2-core reference machine (docs/MACHINE-NOTES): initdb + start
≈ 1.1 s, restart 0.13 s. As root, pgserver runs the server as a system user
``pgserver`` and opens search permission on the data folder's parents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg

from pipeline.jobs import admin_dsn
from pipeline.settings import Settings

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

log = logging.getLogger(__name__)

#: The data folder inside the state folder.
PGDATA_NAME = "postgres"
#: How long a probe waits for a server to answer before calling the URL silent.
PROBE_TIMEOUT_S = 3.0


def url_was_set(settings: Settings) -> bool:
    """Whether the database URL came from the user (environment or ``--database-url``)."""
    return "database_url" in settings.model_fields_set


async def answers(dsn: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a PostgreSQL server answers at ``dsn``.

    Any reply from a server counts, a refusal included (bad password, missing
    database): only a connection that cannot be made, or no reply within
    ``timeout``, means nothing is there.
    """
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, TimeoutError):
        return False
    except (asyncpg.PostgresError, asyncpg.InterfaceError):
        return True
    await conn.close()
    return True


def pgdata_dir(settings: Settings) -> Path:
    """Where the embedded server keeps its data: ``<state_dir>/postgres``."""
    return settings.state_dir / PGDATA_NAME


def start_embedded(pgdata: Path) -> PostgresServer:
    """Start (or attach to) the embedded server of ``pgdata``; initdb on first use.

    Raises:
        RuntimeError: the ``pgserver`` package is not installed.
    """
    try:
        with warnings.catch_warnings():
            # pgserver keeps its lock in the user's runtime folder; without
            # XDG_RUNTIME_DIR platformdirs falls back to /tmp/runtime-<uid> (fine) and warns.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            from pgserver.postgres_server import get_server
    except ImportError as exc:  # a dependency of the project: only a broken venv lacks it
        raise RuntimeError(
            "no PostgreSQL answers and the embedded one needs the `pgserver` package: "
            "pip install pgserver, or set FENCELINE_DATABASE_URL"
        ) from exc
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    return get_server(pgdata, cleanup_mode="stop")


def embedded_url(server: PostgresServer, database_url: str) -> str:
    """The embedded server's URL for the database ``database_url`` names."""
    _, name = admin_dsn(database_url)
    return server.get_uri(database=name)


@contextlib.contextmanager
def local_database(settings: Settings, *, say: Callable[[str], None] = print) -> Iterator[Settings]:
    """``settings`` as they are, or pointed at an embedded server while the block runs.

    See the module docstring for when the embedded server starts; ``say`` gets
    one line saying that it did and where.
    """
    if url_was_set(settings) or asyncio.run(answers(settings.database_url)):
        yield settings
        return
    pgdata = pgdata_dir(settings).resolve()
    server = start_embedded(pgdata)
    url = embedded_url(server, settings.database_url)
    say(
        f"database: nothing answers at {settings.database_url} and FENCELINE_DATABASE_URL "
        f"is unset; started an embedded PostgreSQL (pgserver) in {pgdata} at {url}"
    )
    try:
        yield settings.model_copy(update={"database_url": url})
    finally:
        server.cleanup()
