"""Tenant-registered webhook endpoints: registration, key rotation, disable / enable.

Invariants:

* Only URLs that pass the :class:`~pipeline.delivery.egress.EgressGuard` (syntax *and* DNS
  resolution) are ever stored; the dispatcher checks again on every attempt,
  because DNS answers change.
* Every tenant-facing call is scoped by tenant id in SQL: another tenant's
  endpoint is :class:`~pipeline.errors.NotFound`, indistinguishable from none.
* An endpoint has exactly one current signing key (a partial unique index). A
  rotation retires it with ``expires_at = now + grace``; until then the
  dispatcher signs with both keys, so receivers can switch at their own pace.
* Secrets are sealed at rest (:class:`SecretBox`, AES-256-GCM with the endpoint
  and key id as associated data); they are returned in plain text exactly once,
  to the caller that created them.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.clock import Clock, DatabaseClock
from pipeline.database import fetch_dicts, fetch_owned
from pipeline.delivery.egress import EgressGuard, EgressPolicy
from pipeline.delivery.signing import decode_secret, generate_secret
from pipeline.envelope import NONCE_BYTES, key_id_of, open_sealed, seal
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_EVENT_TYPES: tuple[str, ...] = ("extraction.completed.v1",)
#: An event type name: dotted lower-case words ending in a version, ``extraction.completed.v1``.
EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.v[0-9]{1,4}$"
MAX_EVENT_TYPES = 32


def parse_event_types(values: Sequence[str]) -> tuple[str, ...]:
    """An endpoint's event-type filter from comma-separated and/or repeated values.

    Blank entries are dropped and duplicates removed in order; an empty result
    means *every* event type (the ``webhook_endpoints.event_types`` convention).

    Raises:
        ValueError: a name that is not an event type, or more than ``MAX_EVENT_TYPES``.
    """
    names = [n.strip() for v in values for n in v.split(",")]
    out = tuple(dict.fromkeys(n for n in names if n))
    bad = [n for n in out if not re.fullmatch(EVENT_TYPE_PATTERN, n)]
    if bad:
        raise ValueError(f"not event types (like {DEFAULT_EVENT_TYPES[0]}): {bad}")
    if len(out) > MAX_EVENT_TYPES:
        raise ValueError(f"at most {MAX_EVENT_TYPES} event types")
    return out


class SecretBox:
    """Seals webhook secrets for storage; see the header of ``003_delivery.sql``.
    The sealing is :mod:`pipeline.envelope`'s AES-256-GCM, under one key of its own
    (no per-tenant data key: a secret is the endpoint's, not invoice content).

    Args:
        key: 32 raw bytes (AES-256), or None for the development ``plain:`` form.
    """

    def __init__(self, key: bytes | None) -> None:
        if key is not None and len(key) != 32:
            raise ValueError("the webhook secret key must be 32 bytes")
        self._key = key
        self.key_id = key_id_of(key) if key is not None else "plain"
        if key is None:
            log.warning(
                "webhook secrets are stored unsealed: set FENCELINE_WEBHOOK_SECRET_KEY "
                "(base64 of 32 bytes) outside development"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        if settings.webhook_secret_key is None:
            return cls(None)
        try:
            raw = base64.b64decode(settings.webhook_secret_key.get_secret_value(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("FENCELINE_WEBHOOK_SECRET_KEY must be base64") from exc
        return cls(raw)

    @staticmethod
    def _aad(endpoint_id: uuid.UUID, key_id: str) -> bytes:
        return f"fenceline-webhook:{endpoint_id}:{key_id}".encode()

    def seal(self, secret: str, *, endpoint_id: uuid.UUID, key_id: str) -> str:
        if self._key is None:
            return "plain:" + secret
        blob = seal(self._key, secret.encode(), self._aad(endpoint_id, key_id))
        nonce, sealed = blob[:NONCE_BYTES], blob[NONCE_BYTES:]
        b64 = base64.b64encode
        return f"v1:{self.key_id}:{b64(nonce).decode()}:{b64(sealed).decode()}"

    def open(self, sealed: str, *, endpoint_id: uuid.UUID, key_id: str) -> str:
        """The secret; ValueError if it was sealed under another key or tampered with."""
        if sealed.startswith("plain:"):
            return sealed[len("plain:") :]
        version, kek_id, nonce, ciphertext = [*sealed.split(":"), "", "", ""][:4]
        if version != "v1" or self._key is None or kek_id != self.key_id:
            raise ValueError(f"secret sealed under key {kek_id!r}, which is not configured")
        try:
            blob = base64.b64decode(nonce) + base64.b64decode(ciphertext)
        except binascii.Error as exc:
            raise ValueError("sealed secret failed authentication") from exc
        # SealBroken is a ValueError: "failed authentication", as before
        return open_sealed(self._key, blob, self._aad(endpoint_id, key_id)).decode()


@dataclass(frozen=True)
class Endpoint:
    id: uuid.UUID
    tenant_id: uuid.UUID
    url: str
    description: str | None
    event_types: tuple[str, ...]
    state: str
    disabled_reason: str | None
    breaker_state: str
    consecutive_failures: int
    failing_since: datetime | None
    created_at: datetime
    #: ``pending`` until the endpoint echoed a challenge (:mod:`verification`); its
    #: deliveries are held until then. A URL change sets it back to ``pending``.
    verification: str = "pending"
    verified_at: datetime | None = None
    #: Seconds within which the ERP must acknowledge each delivered event
    #: (:mod:`acknowledgements`); None: no acknowledgement is expected.
    ack_window_seconds: int | None = None


@dataclass(frozen=True)
class IssuedSecret:
    """A secret shown once: at registration or rotation."""

    endpoint: Endpoint
    key_id: str
    secret: str
    previous_key_id: str | None = None
    previous_expires_at: datetime | None = None


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: str
    expires_at: datetime | None


def _endpoint(row: Any) -> Endpoint:
    return from_record(Endpoint, row, convert={"event_types": tuple})


def guard_from_settings(settings: Settings) -> EgressGuard:
    """The production guard: allowed ports and the development switch from settings."""
    return EgressGuard(
        EgressPolicy(
            allowed_ports=frozenset(settings.delivery_allowed_ports),
            allow_loopback_http=settings.delivery_allow_loopback_http,
        )
    )


class EndpointRegistry:
    """Endpoint administration; every method is tenant-scoped.

    Args:
        pool: the Fenceline database.
        guard: the SSRF guard that validates URLs (with DNS) at registration.
        box: seals secrets at rest.
        clock: injectable time (None → the database's ``now()``).
        rotation_grace_seconds: how long a rotated-out key keeps signing.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        guard: EgressGuard,
        box: SecretBox,
        *,
        clock: Clock | None = None,
        rotation_grace_seconds: float = 86400.0,
    ) -> None:
        self.pool = pool
        self.guard = guard
        self.box = box
        self.clock = clock or DatabaseClock()
        self.rotation_grace_seconds = rotation_grace_seconds

    async def register(
        self,
        tenant_id: uuid.UUID,
        url: str,
        *,
        event_types: Sequence[str] = DEFAULT_EVENT_TYPES,
        description: str | None = None,
        secret: str | None = None,
        ack_window_seconds: int | None = None,
    ) -> IssuedSecret:
        """Validate ``url`` (resolving it) and store the endpoint with a first key.

        Raises:
            EgressBlocked: the URL or an address it resolves to is not allowed;
                nothing is written.
            ValueError: a supplied ``secret`` is not a valid Standard Webhooks secret
                (base64 of 24..64 bytes, ``whsec_`` prefix optional).
        """
        await self.guard.resolve(url)
        secret = secret or generate_secret()
        decode_secret(secret)
        endpoint_id = uuid.uuid4()
        key_id = "k1"
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                q("endpoint_insert"),
                endpoint_id,
                tenant_id,
                url,
                description,
                list(event_types),
                now,
                ack_window_seconds,
            )
            sealed = self.box.seal(secret, endpoint_id=endpoint_id, key_id=key_id)
            await conn.execute(q("endpoint_key_insert"), endpoint_id, key_id, sealed, now)
            await conn.execute(
                q("endpoint_event_insert"), endpoint_id, tenant_id, "registered", url, now
            )
        return IssuedSecret(_endpoint(row), key_id, secret)

    async def rotate(
        self,
        tenant_id: uuid.UUID,
        endpoint_id: uuid.UUID,
        *,
        grace_seconds: float | None = None,
        secret: str | None = None,
    ) -> IssuedSecret:
        """Issue a new current key; the old one keeps signing for the grace period.

        A rotation inside an earlier rotation's grace period ends that older key's
        grace at once: at most two keys sign at any time.
        """
        grace = self.rotation_grace_seconds if grace_seconds is None else grace_seconds
        secret = secret or generate_secret()
        decode_secret(secret)
        async with self.pool.acquire() as conn, conn.transaction():
            await fetch_owned(conn, "endpoint_lock_for_tenant", endpoint_id, tenant_id, "endpoint")
            now = self.clock.now()
            await conn.execute(q("endpoint_key_expire_retired"), endpoint_id, now)
            retired = await conn.fetchrow(
                q("endpoint_key_retire_current"), endpoint_id, float(grace), now
            )
            if retired is None:  # pragma: no cover - the partial unique index keeps one
                raise RuntimeError(f"endpoint {endpoint_id} has no current key")
            previous, expires = retired["key_id"], retired["expires_at"]
            n = int(await conn.fetchval(q("endpoint_key_count"), endpoint_id))
            key_id = f"k{n + 1}"
            sealed = self.box.seal(secret, endpoint_id=endpoint_id, key_id=key_id)
            await conn.execute(q("endpoint_key_insert"), endpoint_id, key_id, sealed, now)
            await conn.execute(
                q("endpoint_event_insert"),
                endpoint_id,
                tenant_id,
                "rotated",
                f"{previous} -> {key_id}; {previous} signs until {expires.isoformat()}",
                now,
            )
            row = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, tenant_id)
        return IssuedSecret(_endpoint(row), key_id, secret, previous, expires)

    async def disable(
        self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, reason: str = "disabled_by_tenant"
    ) -> Endpoint:
        """Stop deliveries: waiting ones become ``abandoned`` (redrive brings them back)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await fetch_owned(conn, "endpoint_lock_for_tenant", endpoint_id, tenant_id, "endpoint")
            await disable_endpoint(conn, endpoint_id, tenant_id, reason, self.clock.now())
            row = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, tenant_id)
        return _endpoint(row)

    async def enable(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> Endpoint:
        """Re-validate the URL and reactivate with a clean breaker."""
        row = await self._row(tenant_id, endpoint_id)
        await self.guard.resolve(row["url"])
        async with self.pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(q("endpoint_enable_if_disabled"), endpoint_id, tenant_id):
                await conn.execute(
                    q("endpoint_event_insert"),
                    endpoint_id,
                    tenant_id,
                    "enabled",
                    None,
                    self.clock.now(),
                )
            row = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, tenant_id)
        return _endpoint(row)

    async def change_url(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, url: str) -> Endpoint:
        """Point the endpoint at ``url`` (validated and resolved first): it is pending
        verification again, and its deliveries wait until the new URL echoes a challenge.

        Raises:
            NotFound: not the tenant's endpoint (checked before the URL, so another
                tenant's id is a 404 whatever the URL).
            EgressBlocked: the URL is not allowed; nothing is written.
        """
        await self._row(tenant_id, endpoint_id)
        await self.guard.resolve(url)
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            old = await fetch_owned(
                conn, "endpoint_lock_for_tenant", endpoint_id, tenant_id, "endpoint"
            )
            if old["url"] != url:
                if (
                    await conn.fetchval(
                        q("endpoint_update_url_for_tenant"), endpoint_id, tenant_id, url, now
                    )
                    is None
                ):  # pragma: no cover - the row is locked above
                    raise RuntimeError(f"endpoint {endpoint_id} vanished under its lock")
                await conn.execute(
                    q("endpoint_event_insert"),
                    endpoint_id,
                    tenant_id,
                    "url_changed",
                    f"{old['url']} -> {url}",
                    now,
                )
            row = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, tenant_id)
        return _endpoint(row)

    async def set_ack_window(
        self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, window_seconds: int | None
    ) -> Endpoint:
        """Ask for acknowledgements within ``window_seconds`` of each 2xx (None: stop
        asking). Deliveries created from now on carry it; earlier ones keep theirs.

        Raises:
            NotFound: not the tenant's endpoint.
        """
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            old = await fetch_owned(
                conn, "endpoint_get_for_tenant", endpoint_id, tenant_id, "endpoint"
            )
            if old["ack_window_seconds"] != window_seconds:
                if (
                    await conn.fetchval(
                        q("endpoint_set_ack_window_for_tenant"),
                        endpoint_id,
                        tenant_id,
                        window_seconds,
                        now,
                    )
                    is None
                ):  # pragma: no cover - read above in this transaction
                    raise RuntimeError(f"endpoint {endpoint_id} vanished")
                await conn.execute(
                    q("endpoint_event_insert"),
                    endpoint_id,
                    tenant_id,
                    "ack_window_changed",
                    f"{old['ack_window_seconds']} -> {window_seconds}",
                    now,
                )
            row = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, tenant_id)
        return _endpoint(row)

    async def get(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> Endpoint:
        return _endpoint(await self._row(tenant_id, endpoint_id))

    async def _row(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> asyncpg.Record:
        """The tenant's endpoint row; another tenant's endpoint is :class:`NotFound`."""
        async with self.pool.acquire() as conn:
            return await fetch_owned(
                conn, "endpoint_get_for_tenant", endpoint_id, tenant_id, "endpoint"
            )

    async def list_endpoints(self, tenant_id: uuid.UUID) -> list[Endpoint]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(q("endpoint_list_for_tenant"), tenant_id)
        return [_endpoint(r) for r in rows]

    async def keys(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> list[dict[str, Any]]:
        """Key metadata (ids, creation, retirement, expiry); never the secrets."""
        return await fetch_dicts(self.pool, "endpoint_key_list_for_tenant", endpoint_id, tenant_id)

    async def events(self, tenant_id: uuid.UUID, endpoint_id: uuid.UUID) -> list[dict[str, Any]]:
        return await fetch_dicts(
            self.pool, "endpoint_event_list_for_tenant", endpoint_id, tenant_id
        )


async def signing_keys(
    conn: asyncpg.Connection, box: SecretBox, endpoint_id: uuid.UUID, now: datetime | None
) -> list[SigningKey]:
    """The keys to sign with now: the current key first, then keys still in grace.

    System use (the dispatcher), not tenant-scoped; raises ValueError when a
    sealed secret cannot be opened with the configured key.
    """
    rows = await conn.fetch(q("endpoint_key_list_for_signing"), endpoint_id, now)
    return [
        SigningKey(
            key_id=r["key_id"],
            secret=box.open(r["sealed_secret"], endpoint_id=endpoint_id, key_id=r["key_id"]),
            expires_at=r["expires_at"],
        )
        for r in rows
    ]


async def disable_endpoint(
    conn: asyncpg.Connection,
    endpoint_id: uuid.UUID,
    tenant_id: uuid.UUID,
    reason: str,
    now: datetime | None,
) -> bool:
    """Disable inside the caller's transaction; abandon waiting deliveries; log an event.

    Returns False when the endpoint was already disabled (nothing changes).
    """
    if await conn.fetchrow(q("endpoint_disable_if_active"), endpoint_id, reason, now) is None:
        return False
    abandoned = await conn.fetch(
        q("delivery_abandon_waiting_for_endpoint"), endpoint_id, "endpoint_disabled"
    )
    await conn.execute(
        q("endpoint_event_insert"),
        endpoint_id,
        tenant_id,
        "disabled",
        f"{reason}; {len(abandoned)} waiting deliveries abandoned",
        now,
    )
    log.warning("endpoint %s disabled: %s", endpoint_id, reason)
    return True
