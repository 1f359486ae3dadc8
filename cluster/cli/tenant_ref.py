"""How a command names its tenant: ``--tenant NAME`` or ``--tenant-id UUID``, one of them.

A name and an id never share one lookup (:func:`pipeline.tenants.resolve_tenant`
takes a ``str`` as a name and a :class:`uuid.UUID` as an id): with one positional
argument tried as an id first, a tenant named with another tenant's id made
``keys create`` mint a key for that other tenant.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any


def tenant_options(p: argparse.ArgumentParser) -> None:
    """Add the required, mutually exclusive ``--tenant`` / ``--tenant-id`` pair."""
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--tenant", metavar="NAME", help="the tenant's name")
    which.add_argument("--tenant-id", type=uuid.UUID, metavar="UUID", help="the tenant's id")


def tenant_ref(args: argparse.Namespace) -> str | uuid.UUID:
    """The tenant the options name: its id (a UUID) or its name (a string)."""
    tenant_id: uuid.UUID | None = args.tenant_id
    return tenant_id if tenant_id is not None else str(args.tenant)


async def operated_tenant(conn: Any, tenant: str | None, job: uuid.UUID | None) -> uuid.UUID:
    """An operator command's tenant: the one ``--tenant`` names, else the one its job
    belongs to (an operator names a job without its tenant).

    Raises:
        NotFound: no such tenant, or no such job.
    """
    from pipeline.errors import NotFound
    from pipeline.queries import q
    from pipeline.tenants import resolve_tenant

    if tenant is not None:
        return (await resolve_tenant(conn, str(tenant))).id
    row = await conn.fetchrow(q("job_get_any_tenant"), job)
    if row is None:
        raise NotFound(f"job {job}")
    tenant_id: uuid.UUID = row["tenant_id"]
    return tenant_id
