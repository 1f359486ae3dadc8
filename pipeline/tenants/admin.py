"""Tenant and API-key administration: the functions the ``fenceline`` CLI calls.

Keys are shown once, at creation, and stored only as sha256 (see
:mod:`pipeline.tenants.accounts`). Scopes are a closed set, so a typo cannot mint a key
with a scope nothing checks:

* ``jobs`` — submit jobs, read this tenant's jobs, results and events (every
  valid key of the tenant may do this);
* ``review`` — also decide REVIEW_REQUIRED jobs (:mod:`pipeline.api.review`);
* ``operator`` — also see operational retry details and decide reviews.

Tenants are addressed by name (a ``str``) or by id (a :class:`uuid.UUID`), never one
lookup for both (:func:`resolve_tenant`); names follow :mod:`pipeline.tenants.names`.
Quotas are the admission limits of :mod:`pipeline.jobs.quotas`, and
:func:`tenant_usage` shows a tenant's current standing against them, read exactly as
admission reads it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import asyncpg

from pipeline.errors import NotFound
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.settings import Settings
from pipeline.spend import ModelSpend, TenantSpend, spend_by_model, spend_for_tenant
from pipeline.tenants.accounts import (
    Tenant,
    create_api_key,
    create_tenant,
    get_tenant,
    get_tenant_by_name,
    list_tenants,
    revoke_api_key,
)
from pipeline.tenants.key_labels import key_label

SCOPES = frozenset({"jobs", "review", "operator"})
#: The tenant ``fenceline up`` creates on a database without tenants, so the review
#: console of a fresh local cluster can be signed in to at once.
LOCAL_TENANT = "default"
#: What a console key of ``fenceline up`` may do: submit, review, see the dashboard.
CONSOLE_KEY_SCOPES = ("jobs", "operator", "review")


@dataclass(frozen=True)
class IssuedKey:
    """A new key; ``secret`` exists only in this object and is never stored."""

    key_id: uuid.UUID
    tenant_id: uuid.UUID
    secret: str
    scopes: tuple[str, ...]
    expires_at: datetime | None = None
    label: str | None = None


@dataclass(frozen=True)
class KeyInfo:
    key_id: uuid.UUID
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    label: str | None = None


@dataclass(frozen=True)
class TenantUsage:
    """A tenant's unsettled work and this period's spend, next to its limits."""

    tenant: Tenant
    pending_jobs: int
    pending_bytes: int
    pending_tokens: int
    spent: Decimal
    seconds_to_next_period: float
    #: The period's spend split: held for unsettled work vs reported by attempts.
    spend: TenantSpend
    #: The period's charges per model and the prompt and completion prices applied.
    by_model: tuple[ModelSpend, ...] = ()


def check_scopes(scopes: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes, deduplicated and sorted; ValueError for an unknown or empty set."""
    unknown = sorted(set(scopes) - SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {sorted(SCOPES)}, got {scopes}")
    return tuple(sorted(set(scopes)))


async def resolve_tenant(conn: asyncpg.Connection, ref: str | uuid.UUID) -> Tenant:
    """A tenant by id (a :class:`uuid.UUID`) or by name (a ``str``), never both.

    A string is a name even when it reads as a UUID: trying it as an id first let a
    tenant named with another tenant's id stand for that other tenant.

    Raises:
        NotFound: no tenant has that id, or that name.
    """
    if isinstance(ref, uuid.UUID):
        tenant = await get_tenant(conn, ref)
    else:
        tenant = await get_tenant_by_name(conn, ref)
    if tenant is None:
        raise NotFound(f"tenant {ref}")
    return tenant


async def add_tenant(
    conn: asyncpg.Connection,
    name: str,
    *,
    scopes: tuple[str, ...] = ("jobs",),
    **limits: int | Decimal,
) -> tuple[Tenant, IssuedKey]:
    """Create a tenant and its first key in one transaction."""
    checked = check_scopes(scopes)
    async with conn.transaction():
        tenant = await create_tenant(conn, name, **limits)  # type: ignore[arg-type]
        key = await issue_key(conn, tenant.id, scopes=checked)
    return tenant, key


async def issue_key(
    conn: asyncpg.Connection,
    tenant: str | uuid.UUID,
    *,
    scopes: tuple[str, ...] = ("jobs",),
    expires_in_seconds: float | None = None,
    label: str | None = None,
) -> IssuedKey:
    """A new key for ``tenant`` (id or name), refused after ``expires_in_seconds`` if given,
    named ``label`` if given (ValueError for a label the text-safety rule refuses).

    Rotation without downtime: issue the new key (optionally expiring), move the
    clients to it, then revoke the old one — or give the old one an end by
    having issued it with an expiry in the first place.
    """
    checked = check_scopes(scopes)
    stored_label = key_label(label)
    t = await resolve_tenant(conn, tenant)
    key_id, secret = await create_api_key(
        conn, t.id, scopes=checked, expires_in_seconds=expires_in_seconds, label=stored_label
    )
    expires_at = await conn.fetchval(q("api_key_expiry_get"), key_id)
    return IssuedKey(
        key_id=key_id,
        tenant_id=t.id,
        secret=secret,
        scopes=checked,
        expires_at=expires_at,
        label=stored_label,
    )


async def revoke_key(conn: asyncpg.Connection, tenant: str | uuid.UUID, key_id: uuid.UUID) -> bool:
    """Revoke a key of ``tenant``; False if it was unknown or already revoked.

    Revocation takes effect on the next request, and open status streams end at
    their next key check (``sse_key_recheck_seconds``).
    """
    t = await resolve_tenant(conn, tenant)
    return await revoke_api_key(conn, t.id, key_id)


async def list_keys(conn: asyncpg.Connection, tenant: str | uuid.UUID) -> list[KeyInfo]:
    """The tenant's keys without secrets (only the stored prefix identifies them)."""
    t = await resolve_tenant(conn, tenant)
    rows = await conn.fetch(q("api_key_list_for_tenant"), t.id)
    return [
        from_record(
            KeyInfo, r, rename={"key_id": "id", "prefix": "key_prefix"}, convert={"scopes": tuple}
        )
        for r in rows
    ]


async def set_quotas(
    conn: asyncpg.Connection,
    tenant: str | uuid.UUID,
    *,
    max_pending_jobs: int | None = None,
    max_pending_bytes: int | None = None,
    max_pending_tokens: int | None = None,
    spend_budget: Decimal | None = None,
    max_in_flight: int | None = None,
    weight: int | None = None,
) -> Tenant:
    """Change admission limits; ``None`` keeps a value. Applies to the next request."""
    t = await resolve_tenant(conn, tenant)
    row = await conn.fetchrow(
        q("tenant_quotas_update_if_exists"),
        t.id,
        max_pending_jobs,
        max_pending_bytes,
        max_pending_tokens,
        spend_budget,
        max_in_flight,
        weight,
    )
    if row is None:  # pragma: no cover - resolved a moment ago; tenants are never deleted
        raise NotFound(f"tenant {tenant}")
    updated = await get_tenant(conn, t.id)
    assert updated is not None
    return updated


async def tenant_usage(
    conn: asyncpg.Connection, tenant: str | uuid.UUID, settings: Settings | None = None
) -> TenantUsage:
    """The tenant's standing against its quotas, as admission would read it now."""
    s = settings or Settings()
    t = await resolve_tenant(conn, tenant)
    row = await conn.fetchrow(q("tenant_admission_get"), t.id, s.spend_period, None, None, None)
    spend = await spend_for_tenant(conn, t.id, s.spend_period)
    by_model = await spend_by_model(conn, t.id, s.spend_period)
    return TenantUsage(
        tenant=t,
        pending_jobs=int(row["jobs"]),
        pending_bytes=int(row["bytes"]),
        pending_tokens=int(row["tokens"]),
        spent=Decimal(row["spent"]),
        seconds_to_next_period=float(row["seconds_to_next_period"]),
        spend=spend,
        by_model=tuple(by_model),
    )


async def console_key(
    conn: asyncpg.Connection, tenant_name: str, *, expires_in_seconds: float
) -> IssuedKey | None:
    """A fresh, expiring console key (:data:`CONSOLE_KEY_SCOPES`) for ``tenant_name``.

    The tenant is created only on a database that has no tenant at all (a fresh
    local cluster); on one that has tenants but none of that name this returns
    None, so ``fenceline up`` never invents a tenant beside real ones.
    """
    async with conn.transaction():
        tenant = await get_tenant_by_name(conn, tenant_name)
        if tenant is None:
            if await list_tenants(conn):
                return None
            tenant = await create_tenant(conn, tenant_name)
        return await issue_key(
            conn, tenant.id, scopes=CONSOLE_KEY_SCOPES, expires_in_seconds=expires_in_seconds
        )
