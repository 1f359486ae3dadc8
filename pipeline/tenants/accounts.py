"""Tenants and their API keys.

A key is ``flk_<random>``; only its sha256 is stored. A key may carry an
expiry (``expires_at``): past it :func:`authenticate` raises
:class:`~pipeline.errors.KeyExpired`, and a revoked key stays refused whatever
its expiry. Lookups hash the presented
key and probe the unique index with that digest: a caller cannot choose digest
prefixes, so the index comparison's timing reveals nothing about any stored key,
and no secret is ever compared directly.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg

from pipeline.errors import KeyExpired
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.tenants.key_labels import key_label
from pipeline.tenants.names import tenant_name

KEY_PREFIX = "flk_"


@dataclass(frozen=True)
class Tenant:
    id: uuid.UUID
    name: str
    weight: int = 1
    max_in_flight: int = 1000
    max_pending_jobs: int = 100_000
    max_pending_bytes: int = 1 << 30
    max_pending_tokens: int = 1_000_000_000
    spend_budget: Decimal = Decimal("1000")
    allowed_currencies: tuple[str, ...] = ("EUR", "USD", "GBP", "CHF")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant a key belongs to, and what the key may do."""

    key_id: uuid.UUID
    tenant_id: uuid.UUID
    tenant_name: str
    scopes: frozenset[str]

    @property
    def is_operator(self) -> bool:
        return "operator" in self.scopes


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _tenant(row: Any) -> Tenant:
    return from_record(Tenant, row, convert={"spend_budget": Decimal, "allowed_currencies": tuple})


def _principal(row: Any) -> Principal:
    return from_record(Principal, row, rename={"key_id": "id"}, convert={"scopes": frozenset})


async def create_tenant(
    conn: asyncpg.Connection,
    name: str,
    *,
    weight: int = 1,
    max_in_flight: int = 1000,
    max_pending_jobs: int = 100_000,
    max_pending_bytes: int = 1 << 30,
    max_pending_tokens: int = 1_000_000_000,
    spend_budget: Decimal = Decimal("1000"),
    allowed_currencies: tuple[str, ...] = ("EUR", "USD", "GBP", "CHF"),
) -> Tenant:
    """A new tenant under ``name`` in its one stored form (:func:`tenant_name`).

    Raises:
        ValueError: the name is not a valid tenant name.
        asyncpg.UniqueViolationError: a tenant has that name, in any case.
    """
    row = await conn.fetchrow(
        q("tenant_insert"),
        uuid.uuid4(),
        tenant_name(name),
        weight,
        max_in_flight,
        max_pending_jobs,
        max_pending_bytes,
        max_pending_tokens,
        spend_budget,
        list(allowed_currencies),
    )
    return _tenant(row)


async def get_tenant(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> Tenant | None:
    row = await conn.fetchrow(q("tenant_get"), tenant_id)
    return _tenant(row) if row is not None else None


async def get_tenant_by_name(conn: asyncpg.Connection, name: str) -> Tenant | None:
    row = await conn.fetchrow(q("tenant_get_by_name"), name)
    return _tenant(row) if row is not None else None


async def list_tenants(conn: asyncpg.Connection) -> list[Tenant]:
    return [_tenant(r) for r in await conn.fetch(q("tenant_list"))]


async def create_api_key(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    *,
    scopes: tuple[str, ...] = ("jobs",),
    expires_in_seconds: float | None = None,
    now: datetime | None = None,
    label: str | None = None,
) -> tuple[uuid.UUID, str]:
    """Create a key; return (key id, the secret). The secret is shown once, never stored.

    Args:
        expires_in_seconds: the key is refused from ``now`` + this on; None: never.
        now: the creation time (None: the database's clock).
        label: the key's human-readable name ("Ana Ruiz"; None: none), checked by
            :func:`pipeline.tenants.key_labels.key_label` (ValueError when refused).
    """
    if expires_in_seconds is not None and not expires_in_seconds > 0:
        raise ValueError("a key's expiry must lie in the future")
    stored_label = key_label(label)
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    row = await conn.fetchrow(
        q("api_key_insert"),
        uuid.uuid4(),
        tenant_id,
        hash_key(secret),
        secret[:8],
        list(scopes),
        expires_in_seconds,
        now,
        stored_label,
    )
    return row["id"], secret


def key_digest(presented: str) -> str | None:
    """The digest a presented key is looked up by, or None for one that cannot be a key."""
    if not presented.startswith(KEY_PREFIX) or len(presented) > 200:
        return None
    return hash_key(presented)


@dataclass(frozen=True)
class VerifiedKey:
    """A key the database has just verified: its principal and when it stops being valid
    (None: never). What a cache of verified keys (pipeline.api.key_cache) holds."""

    principal: Principal
    expires_at: datetime | None


async def verify_key(
    conn: asyncpg.Connection, presented: str, *, now: datetime | None = None
) -> VerifiedKey | None:
    """The verified key for a presented key, or None (unknown, malformed or revoked).

    Raises:
        KeyExpired: the key is known and unrevoked but past its ``expires_at``
            (compared with ``now``, or the database's clock).
    """
    digest = key_digest(presented)
    if digest is None:
        return None
    row = await conn.fetchrow(q("api_key_lookup"), digest, now)
    if row is None or row["revoked_at"] is not None:
        return None
    if row["expired"]:
        raise KeyExpired(f"API key {row['id']} expired at {row['expires_at'].isoformat()}")
    principal = _principal(row)
    return VerifiedKey(principal, row["expires_at"])


async def authenticate(
    conn: asyncpg.Connection, presented: str, *, now: datetime | None = None
) -> Principal | None:
    """The principal for a presented key, or None (unknown, malformed or revoked).

    Raises:
        KeyExpired: the key is known and unrevoked but past its ``expires_at``
            (compared with ``now``, or the database's clock).
    """
    verified = await verify_key(conn, presented, now=now)
    return verified.principal if verified is not None else None


async def principal_for_key_id(
    conn: asyncpg.Connection, key_id: uuid.UUID, now: datetime | None = None
) -> Principal | None:
    """The principal of an active key named by id (a console session), or None: a revoked
    or expired key ends every session made with it at the next request."""
    row = await conn.fetchrow(q("api_key_get_by_id"), key_id, now)
    if row is None or row["revoked_at"] is not None or row["expired"]:
        return None
    return _principal(row)


async def revoke_api_key(conn: asyncpg.Connection, tenant_id: uuid.UUID, key_id: uuid.UUID) -> bool:
    """Revoke an active key of ``tenant_id`` and end its console sessions, in one
    transaction; False (and nothing changed) when it is unknown or already revoked."""
    async with conn.transaction():
        if await conn.fetchval(q("api_key_revoke_if_active"), key_id, tenant_id) is None:
            return False
        await conn.execute(q("console_session_delete_for_key"), key_id, tenant_id)
    return True
