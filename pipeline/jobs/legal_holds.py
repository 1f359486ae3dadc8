"""A tenant's retention policy and its legal holds, set by an operator and audited.

The policy is one ``tenant_retention`` row (no row: the defaults of
:class:`~pipeline.jobs.retention.RetentionConfig`). A legal hold, on the whole
tenant or on one job, stops :mod:`pipeline.jobs.retention` from removing anything
of it until it is cleared. Setting or clearing one writes a ``legal_hold_events``
row in the same transaction (who, when, why; ``explain`` prints a job's), and each
write is conditional: setting a hold that is set, or clearing one that is not,
changes nothing and says so (``False``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.errors import NotFound
from pipeline.jobs.retention import RetentionConfig
from pipeline.queries import q


@dataclass(frozen=True)
class RetentionPolicy:
    """The horizons that apply to a tenant, and whether the whole tenant is held."""

    tenant_id: uuid.UUID
    content_days: int
    audit_days: int
    legal_hold: bool
    hold_reason: str | None
    own: bool  # False: the defaults (the tenant has no policy row)
    updated_at: datetime | None


def _policy(
    tenant: uuid.UUID, row: asyncpg.Record | None, defaults: RetentionConfig
) -> RetentionPolicy:
    if row is None:
        return RetentionPolicy(
            tenant, defaults.content_days, defaults.audit_days, False, None, False, None
        )
    return RetentionPolicy(
        tenant,
        row["content_days"],
        row["audit_days"],
        row["legal_hold"],
        row["hold_reason"],
        True,
        row["updated_at"],
    )


async def retention_policy(
    conn: asyncpg.Connection, tenant: uuid.UUID, defaults: RetentionConfig
) -> RetentionPolicy:
    """The tenant's effective policy."""
    return _policy(tenant, await conn.fetchrow(q("retention_policy_get"), tenant), defaults)


async def set_retention_policy(
    pool: asyncpg.Pool, tenant: uuid.UUID, content_days: int, audit_days: int
) -> RetentionPolicy:
    """Give a tenant its own horizons (its hold, if any, stays as it is).

    Raises:
        ValueError: not ``1 <= content_days <= audit_days <= 36500``.
    """
    if not 1 <= content_days <= audit_days <= 36500:
        raise ValueError("need 1 <= content days <= audit days <= 36500")
    async with pool.acquire() as conn:
        row = await conn.fetchrow(q("retention_policy_upsert"), tenant, content_days, audit_days)
    return _policy(tenant, row, RetentionConfig())


async def set_legal_hold(
    pool: asyncpg.Pool,
    tenant: uuid.UUID,
    *,
    reason: str,
    actor: str,
    job: uuid.UUID | None = None,
    defaults: RetentionConfig | None = None,
) -> bool:
    """Hold a tenant (``job`` None) or one of its jobs; False when already held.

    Raises:
        NotFound: ``job`` is not this tenant's.
    """
    defaults = defaults or RetentionConfig()
    async with pool.acquire() as conn, conn.transaction():
        if job is None:
            changed = await conn.fetchval(
                q("retention_tenant_hold_set_if_clear"),
                tenant,
                reason,
                defaults.content_days,
                defaults.audit_days,
            )
        else:
            if await conn.fetchval(q("job_get_for_tenant"), job, tenant) is None:
                raise NotFound(f"job {job}")
            changed = await conn.fetchval(
                q("retention_job_hold_set_if_clear"), job, tenant, reason, actor
            )
        if changed is None:
            return False
        await _audit(conn, tenant, job, "set", reason, actor)
    return True


async def clear_legal_hold(
    pool: asyncpg.Pool,
    tenant: uuid.UUID,
    *,
    reason: str,
    actor: str,
    job: uuid.UUID | None = None,
) -> bool:
    """Release a tenant's (``job`` None) or a job's hold; False when none was set."""
    async with pool.acquire() as conn, conn.transaction():
        if job is None:
            changed = await conn.fetchval(q("retention_tenant_hold_clear_if_held"), tenant)
        else:
            changed = await conn.fetchval(q("retention_job_hold_clear_if_held"), job, tenant)
        if changed is None:
            return False
        await _audit(conn, tenant, job, "cleared", reason, actor)
    return True


async def _audit(
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    job: uuid.UUID | None,
    action: str,
    reason: str,
    actor: str,
) -> None:
    seq = await conn.fetchval(q("retention_hold_event_insert"), tenant, job, action, reason, actor)
    if seq is None:  # pragma: no cover - an INSERT … RETURNING always returns its row
        raise RuntimeError("legal hold event not written")


async def held_jobs(conn: asyncpg.Connection, tenant: uuid.UUID) -> list[dict[str, Any]]:
    """The tenant's jobs under a legal hold."""
    return [
        dict(r.items()) for r in await conn.fetch(q("retention_job_hold_list_for_tenant"), tenant)
    ]


async def retention_for_job(
    conn: asyncpg.Connection, job: uuid.UUID, tenant: uuid.UUID
) -> list[dict[str, Any]]:
    """``explain``'s retention section: the holds set and cleared on the job or its
    tenant, and what retention removed, in time order."""
    rows: list[dict[str, Any]] = [
        {"kind": "hold", **dict(r.items())}
        for r in await conn.fetch(q("retention_hold_event_list_for_job"), job, tenant)
    ]
    mark = await conn.fetchrow(q("retention_mark_get_for_job"), job, tenant)
    if mark is not None:
        rows.append(
            {"kind": "content", "created_at": mark["content_removed_at"], **dict(mark.items())}
        )
        if mark["audit_removed_at"] is not None:
            rows.append(
                {"kind": "audit", "created_at": mark["audit_removed_at"], **dict(mark.items())}
            )
    rows.sort(key=lambda r: r["created_at"])
    return rows


def retention_lines(row: dict[str, Any]) -> list[str]:
    """One line per retention entry of :func:`retention_for_job`."""
    if row["kind"] == "hold":
        scope = "job" if row["job_id"] is not None else "tenant"
        return [
            f"{row['created_at']} legal hold ({scope}) {row['action']} by {row['actor']}: "
            f"{row['reason']}"
        ]
    if row["kind"] == "content":
        lines = [
            f"content removed by retention at {row['content_removed_at']} (results "
            f"{row['results']}, documents {row['documents']}, document texts "
            f"{row['document_texts']}, delivery payloads {row['delivery_payloads']}, "
            f"review corrections {row['review_corrections']}, review decisions "
            f"{row['review_decisions']}; digests kept)"
        ]
        if row.get("object_uri") is not None:
            lines.append(f"stored object {row['object_uri']}: {_object_state(row)}")
        return lines
    return [
        f"audit history removed by retention at {row['audit_removed_at']} (job events "
        f"{row['job_events']}, inbox records {row['inbox_records']})"
    ]


def _object_state(row: dict[str, Any]) -> str:
    """What became of the document's stored object (migration 045)."""
    if row["object_pending_at"] is not None:
        return f"removal pending since {row['object_pending_at']}"
    if row["object_outcome"] == "removed":
        return f"removed at {row['object_removed_at']}"
    if row["object_outcome"] == "shared":
        return "kept: another document still needs it"
    if row["object_outcome"] == "client_object":
        return "kept: the client's object, not the store's upload"
    return "kept: a job still uses the document"
