"""``fenceline redrive`` with a date or count it cannot use (issue 45, defect 1).

A date-time that leaves the calendar once moved to UTC (year 9999 with a negative
offset, year 1 with a positive one), a naive or malformed one, is a one-line error
and exit 2 from the argument parser, never a traceback, and nothing is re-driven;
so is a ``--limit`` or ``--attempts`` outside the REST route's bounds."""

from __future__ import annotations

import asyncpg
import pytest

from tests.integration.test_cli import fenceline
from tests.support.api import count_rows
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("flag", ["--failed-from", "--failed-before"])
@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59-05:00",
        "9999-12-31T23:30:00-00:31",
        "0001-01-01T00:00:00+00:01",
        "2025-13-01T00:00:00Z",
        "2025-01-01T00:00:00",
        "yesterday",
    ],
)
async def test_a_redrive_date_it_cannot_use_is_a_clear_error_not_a_traceback(
    pool: asyncpg.Pool, dsn: str, flag: str, value: str
) -> None:
    tenant = await new_tenant(pool)
    before = await count_rows(pool, "job_redrives", "extraction_jobs")
    cli = ("redrive", "--tenant", tenant.name, "--by", "ops", "--reason", "sweep")
    r = fenceline(*cli, f"{flag}={value}", dsn=dsn)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert flag in r.stderr and "error:" in r.stderr, r.stderr
    assert await count_rows(pool, "job_redrives", "extraction_jobs") == before


async def test_a_usable_redrive_date_with_an_offset_still_selects(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await new_tenant(pool)
    cli = ("redrive", "--tenant", tenant.name, "--by", "ops", "--reason", "sweep")
    r = fenceline(*cli, "--failed-from", "2025-01-01T00:00:00-05:00", dsn=dsn)
    assert r.returncode == 0, r.stderr
    assert '"redriven": []' in r.stdout


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--limit", "-1"), ("--limit", "0"), ("--attempts", "-1"), ("--attempts", "10" * 10)],
)
async def test_a_redrive_count_out_of_bounds_is_a_clear_error(
    pool: asyncpg.Pool, dsn: str, flag: str, value: str
) -> None:
    tenant = await new_tenant(pool)
    cli = ("redrive", "--tenant", tenant.name, "--by", "ops", "--reason", "sweep")
    r = fenceline(*cli, f"{flag}={value}", dsn=dsn)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and flag in r.stderr, r.stderr
