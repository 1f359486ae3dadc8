"""The benchmarks' settings: the product's :class:`Settings` plus their own servers.

Read when a run starts (never at import): ``FENCELINE_BENCH_ADMIN_DSN`` is where
scratch databases are created and dropped, ``FENCELINE_BENCH_AMQP_URL`` the
broker the broker benchmark declares its own topology on.
"""

from __future__ import annotations

from pipeline.settings import Settings


class BenchSettings(Settings):
    bench_admin_dsn: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    bench_amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2F"


def admin_dsn() -> str:
    """The server's admin DSN for scratch databases (``FENCELINE_BENCH_ADMIN_DSN``)."""
    return BenchSettings().bench_admin_dsn
