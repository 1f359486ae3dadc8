"""Console sessions, kept server-side: a random id in the cookie, its digest in a row.

A browser signs in to the console once with an API key and then carries a session
cookie (``pipeline.api.console``). The cookie holds only a random id of
``SESSION_ID_BYTES`` bytes; ``console_sessions`` holds the id's sha256, the key
and tenant it was opened with, and when it expires. Invariants:

* **The id is never stored**: a copy of the table (a backup, a read replica)
  yields no cookie that works. A lookup hashes the presented id and probes the
  primary key with that digest, as API keys are looked up.
* **A session ends on the server**: :func:`close_session` (logout) deletes its
  row and the cookie is refused at once; revoking a key
  (:func:`pipeline.tenants.accounts.revoke_api_key`) deletes every session of the
  key in the same transaction; a session past ``expires_at`` is refused.
* **Every use reads the key again** (one query joins session and key): a revoked
  or expired key is refused even before its rows are gone, and scopes are the
  key's current ones.
* A session is opened only for a key that is active when the row is written
  (the insert locks the key row, so it cannot race a revocation).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from datetime import datetime

import asyncpg

from pipeline.queries import q
from pipeline.records import from_record
from pipeline.tenants.accounts import Principal

#: Random bytes in a session id (base64url: 43 characters).
SESSION_ID_BYTES = 32
#: What :func:`secrets.token_urlsafe` of ``SESSION_ID_BYTES`` produces, and nothing else.
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{43}")


def session_digest(session_id: str | None) -> str | None:
    """The digest a presented session id is looked up by, or None for text that
    cannot be one of ours (empty, another length, outside base64url): such a cookie
    never reaches the database."""
    if not session_id or _SESSION_ID.fullmatch(session_id) is None:
        return None
    return hashlib.sha256(session_id.encode("ascii")).hexdigest()


async def open_session(
    conn: asyncpg.Connection,
    principal: Principal,
    lifetime_seconds: float,
    *,
    now: datetime | None = None,
) -> str | None:
    """A new session for ``principal``'s key: the id for its cookie, or None when the
    key was revoked or expired after it was verified. Purges the key's expired
    sessions first, so a key's rows do not pile up.

    Args:
        lifetime_seconds: the session is refused from ``now`` + this on.
        now: the time of the sign-in (None: the database's clock).
    """
    if not lifetime_seconds > 0:
        raise ValueError("a session's lifetime must be positive")
    session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
    digest = session_digest(session_id)
    assert digest is not None
    async with conn.transaction():
        await conn.execute(
            q("console_session_delete_expired_for_key"),
            principal.key_id,
            principal.tenant_id,
            now,
        )
        expires_at = await conn.fetchval(
            q("console_session_insert_if_key_active"),
            digest,
            principal.tenant_id,
            principal.key_id,
            lifetime_seconds,
            now,
        )
    return None if expires_at is None else session_id


async def session_principal(
    conn: asyncpg.Connection, session_id: str | None, *, now: datetime | None = None
) -> Principal | None:
    """The principal of a live session of an active key, or None: unknown, malformed,
    logged out, expired, or its key revoked or expired."""
    digest = session_digest(session_id)
    if digest is None:
        return None
    row = await conn.fetchrow(q("console_session_lookup"), digest, now)
    if row is None:
        return None
    return from_record(Principal, row, rename={"key_id": "id"}, convert={"scopes": frozenset})


async def close_session(conn: asyncpg.Connection, tenant_id: uuid.UUID, session_id: str) -> bool:
    """End a session of ``tenant_id`` (logout): its cookie is refused from now on.
    False when there was no such session (already ended, or another tenant's)."""
    digest = session_digest(session_id)
    if digest is None:
        return False
    return await conn.fetchval(q("console_session_delete_if_tenant"), digest, tenant_id) is not None
