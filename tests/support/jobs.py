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
