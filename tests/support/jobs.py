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
    await add_jobs(conn, tenant_id, document_id, n, "FAILED_TERMINAL", key_prefix="settled-")


async def add_jobs(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    document_id: uuid.UUID | None,
    n: int,
    state: str,
    *,
    key_prefix: str | None = None,
) -> None:
    """``n`` jobs of one tenant and document in ``state``, written in one statement
    (no outbox event, no attempt row): FAILED_TERMINAL and SUCCEEDED as history,
    RUNNING as another driver's live leases (an hour left, fence 1)."""
    assert state in ("FAILED_TERMINAL", "SUCCEEDED", "RUNNING"), state
    await conn.execute(
        """INSERT INTO extraction_jobs (id, tenant_id, idempotency_key, request_hash,
               document_id, object_version, state, deadline_at, terminal_reason, finished_at,
               result_ref, lease_until, lease_owner, attempt, fence)
           SELECT gen_random_uuid(), $1, $4 || g, 'h', $2, 'v1', $5,
                  CASE WHEN $5 = 'RUNNING' THEN now() + interval '1 day' ELSE now() END,
                  CASE WHEN $5 = 'FAILED_TERMINAL' THEN 'deadline_exceeded' END,
                  CASE WHEN $5 <> 'RUNNING' THEN now() END,
                  CASE WHEN $5 = 'SUCCEEDED' THEN 'extraction_results/history' END,
                  CASE WHEN $5 = 'RUNNING' THEN now() + interval '1 hour' END,
                  CASE WHEN $5 = 'RUNNING' THEN 'another-driver' END,
                  CASE WHEN $5 = 'RUNNING' THEN 1 ELSE 0 END,
                  CASE WHEN $5 = 'RUNNING' THEN 1 ELSE 0 END
           FROM generate_series(1, $3::int) g""",
        tenant_id,
        document_id,
        n,
        key_prefix if key_prefix is not None else f"{state.lower()}-{uuid.uuid4().hex[:8]}-",
        state,
    )
