"""The demo's reference ERP: a database of its own, and what the report reads from it.

The reference receiver (:mod:`benchmarks.erp_receiver`) stands for a customer's ERP,
outside Fenceline, and keeps what it received in plaintext (``erp_postings.invoice``,
IBAN included). So the demo gives it a database of its own on the same server,
``<demo database>_erp`` (``fenceline_demo_erp``), recreated with the demo's and
migrated with ``sql/erp`` only; the demo's database holds no ``erp_*`` table. The
report reads the postings from the ERP's database and joins them to the jobs by id
here, in Python: the two databases share no query.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmarks.erp_receiver import ERP_SCHEMA_DIR
from pipeline.database import connect, create_database, dsn_for
from pipeline.jobs import admin_dsn
from pipeline.queries import q

#: The ERP's database is the demo's name with this suffix, on the same server.
ERP_DATABASE_SUFFIX = "_erp"


def erp_database_url(database_url: str) -> str:
    """The reference ERP's database beside ``database_url``'s (same server)."""
    admin, name = admin_dsn(database_url)
    return dsn_for(admin, f"{name}{ERP_DATABASE_SUFFIX}")


async def create_erp_database(database_url: str) -> str:
    """(Re)create the ERP's database beside ``database_url``'s with ``sql/erp``'s
    migrations only; return its DSN."""
    admin, name = admin_dsn(database_url)
    return await create_database(
        admin, f"{name}{ERP_DATABASE_SUFFIX}", replace=True, schema_dir=ERP_SCHEMA_DIR
    )


@dataclass(frozen=True)
class JobPosting:
    """What the ERP recorded for one job: runs of its posting step, and whether it posted."""

    applications: int
    posted: bool


@dataclass(frozen=True)
class ErpPostings:
    """The ERP's postings as the demo reports them."""

    postings: int = 0
    #: Postings a second delivery reached (absorbed by the receiver's inbox).
    duplicates_absorbed: int = 0
    by_job: dict[uuid.UUID, JobPosting] = field(default_factory=dict)


async def read_erp_postings(erp_dsn: str) -> ErpPostings:
    """The postings in the ERP's database at ``erp_dsn``."""
    conn = await connect(erp_dsn)
    try:
        totals = await conn.fetchrow(q("erp_posting_totals"))
        by_job = {
            r["job_id"]: JobPosting(int(r["applications"] or 0), bool(r["posted"]))
            for r in await conn.fetch(q("erp_posting_applications_by_job"))
        }
    finally:
        await conn.close()
    return ErpPostings(
        postings=int(totals["postings"]),
        duplicates_absorbed=int(totals["duplicates_absorbed"]),
        by_job=by_job,
    )


def join_postings(rows: Mapping[Any, dict[str, Any]], postings: ErpPostings) -> None:
    """Give each ``report_invoice_rows`` row (by job id) its ``erp_applications`` and
    ``erp_posted``: 0 and False for a job the ERP never recorded."""
    for job_id, row in rows.items():
        p = postings.by_job.get(job_id)
        row["erp_applications"] = p.applications if p else 0
        row["erp_posted"] = p.posted if p else False
