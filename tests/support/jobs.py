"""Helpers for tests that drive the job store against a real database."""

from __future__ import annotations

import uuid

import asyncpg

from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.tenants import Tenant, create_tenant


async def new_tenant(pool: asyncpg.Pool, name: str | None = None, **kw: object) -> Tenant:
    async with pool.acquire() as conn:
        return await create_tenant(conn, name or f"t-{uuid.uuid4().hex[:8]}", **kw)  # type: ignore[arg-type]


def request(
    tenant: Tenant, key: str | None = None, text: str | None = None, **kw: object
) -> AcceptRequest:
    key = key or uuid.uuid4().hex
    return AcceptRequest(
        tenant_id=tenant.id,
        idempotency_key=key,
        document=DocumentIn(text if text is not None else f"invoice {key}"),
        **kw,  # type: ignore[arg-type]
    )


async def accept_many(store: JobStore, tenant: Tenant, n: int) -> list[uuid.UUID]:
    ids = []
    for _ in range(n):
        ids.append((await store.accept(request(tenant))).job_id)
    return ids


async def add_failed_history(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, document_id: uuid.UUID, n: int
) -> None:
    """``n`` settled (FAILED_TERMINAL) jobs of one tenant and document, keyed
    ``settled-1`` .. ``settled-n``, written in one statement: history that no
    quota or backlog counts."""
    await conn.execute(
        """INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash,
               document_id, object_version, state, deadline_at, terminal_reason, finished_at)
           SELECT gen_random_uuid(), $1, 'settled-' || g, 'h', $2, 'v1', 'FAILED_TERMINAL',
                  now(), 'deadline_exceeded', now()
           FROM generate_series(1, $3::int) g""",
        tenant_id,
        document_id,
        n,
    )
