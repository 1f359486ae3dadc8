"""Per-tenant data keys: sealing a tenant's content, KEK rotation, crypto-shredding.

The key hierarchy is :mod:`pipeline.envelope`'s; the keys live in
``tenant_data_keys`` (migration 039). :class:`DataKeys` is what a writer and a reader
of invoice content hold:

* :meth:`DataKeys.seal_text` seals under the tenant's current data key, creating its
  first one (or, after a shredding, the next version) on first use;
* :meth:`DataKeys.open_text` reads the data key the value names *on every call*, so a
  shredded key refuses at once (:class:`~pipeline.errors.DataKeyShredded`) in every
  process; only the unwrapping is cached, keyed by the wrapped bytes it came from.

Associated data binds a value to its tenant and its subject (for a document's text,
the document's SHA-256: the natural key of its ``documents`` row), so sealed bytes
copied to another tenant's or another document's row do not open.

With no KEK configured (:meth:`DataKeys.from_settings` without ``FENCELINE_KEK`` or
``FENCELINE_KEK_FILE``) content is written unsealed and a warning is logged, as the
webhook secrets' box does; sealed values then cannot be read
(:class:`~pipeline.errors.DataKeyUnavailable`). Values written before sealing was on
read as they are.
"""

from __future__ import annotations

import hmac
import logging
import os
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from pipeline.envelope import (
    ARMOR,
    KEY_BYTES,
    KeyProvider,
    LocalKeyProvider,
    SealBroken,
    armor,
    is_armored,
    open_sealed,
    seal,
    unarmor,
)
from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable
from pipeline.queries import q
from pipeline.settings import Settings

log = logging.getLogger(__name__)

#: The escape of an unsealed text that begins like a sealed value (or like this escape).
PLAIN = "fenceline-plain:"

#: Unwrapped data keys kept per process (keyed by the wrapped bytes they came from).
_CACHE_LIMIT = 4096


def document_subject(sha256: str) -> str:
    """The subject a document's text is sealed to: its ``documents`` row's natural key
    (tenant, SHA-256) with the tenant bound separately. The pasted text and the text a
    file was read as are both this document's text."""
    return f"document:{sha256}"


def _content_aad(tenant: uuid.UUID, subject: str, version: int) -> bytes:
    return f"fenceline-content:{tenant}:{subject}:{version}".encode()


def _keyed_hash(data_key: bytes, tenant: uuid.UUID, label: str, text: str) -> str:
    """HMAC-SHA256 of ``text`` under a key derived from ``data_key`` for ``label``."""
    derived = hmac.new(data_key, f"fenceline-keyed-hash:{tenant}:{label}".encode(), "sha256")
    return hmac.new(derived.digest(), text.encode(), "sha256").hexdigest()


def _wrap_context(tenant: uuid.UUID, version: int) -> bytes:
    return f"fenceline-data-key:{tenant}:{version}".encode()


class DataKeys:
    """Seals and opens a tenant's content under its data keys.

    Args:
        provider: the KEK's provider; None: content is written unsealed.
    """

    def __init__(self, provider: KeyProvider | None) -> None:
        self.provider = provider
        self._unwrapped: dict[tuple[uuid.UUID, int, str, bytes], bytes] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> DataKeys:
        """The keys ``FENCELINE_KEK`` / ``FENCELINE_KEK_FILE`` configure.

        Raises:
            ValueError: a KEK that is not base64 of 32 bytes, or both settings set.
        """
        provider = LocalKeyProvider.from_settings(settings)
        if provider is None:
            _warn_unsealed()
        return cls(provider)

    @property
    def sealing(self) -> bool:
        """Whether new content is sealed."""
        return self.provider is not None

    async def seal_text(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, text: str, subject: str
    ) -> str:
        """``text`` sealed under the tenant's current data key (armored for a text
        column); ``text`` itself when no KEK is configured."""
        # Unsealed (no KEK): a text that begins like a sealed value is escaped, so it
        # is never read back as one (open_text strips exactly one escape).
        [sealed] = await self.seal_texts(conn, tenant, [(text, subject)])
        return sealed

    async def seal_texts(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, items: Sequence[tuple[str, str]]
    ) -> list[str]:
        """:meth:`seal_text` of each ``(text, subject)``, reading the tenant's current
        data key once for the call instead of once a value."""
        if self.provider is None:
            return [PLAIN + t if t.startswith((ARMOR, PLAIN)) else t for t, _ in items]
        if not items:
            return []
        version, key = await self._current(conn, tenant, self.provider)
        return [
            armor(version, seal(key, text.encode(), _content_aad(tenant, subject, version)))
            for text, subject in items
        ]

    async def keyed_hash(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, text: str, label: str
    ) -> str | None:
        """A keyed hash of ``text`` for equality lookups without the value: HMAC-SHA256
        under a key derived (under ``label``) from the tenant's current data key,
        written ``<dek version>:<hex>``. None when no KEK is configured (the value is
        then stored unsealed, as every sealed value is). Equal texts hash equal under
        one data key version; after a shredding the next version hashes differently,
        as nothing sealed under the old one opens either."""
        if self.provider is None:
            return None
        version, key = await self._current(conn, tenant, self.provider)
        return f"{version}:{_keyed_hash(key, tenant, label, text)}"

    async def open_text(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, value: str, subject: str
    ) -> str:
        """The text ``value`` holds: opened when sealed, as it is when written unsealed.

        Raises:
            DataKeyShredded: the data key it was sealed under was shredded.
            DataKeyNotHere: no KEK for it here (retryable on a worker that has one).
            DataKeyUnavailable: no such key, or it does not authenticate (bytes
                moved from another tenant or subject, or altered).
        """
        [text] = await self.open_texts(conn, tenant, [value], subject)
        return text

    async def open_texts(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, values: Sequence[str], subject: str
    ) -> list[str]:
        """:meth:`open_text` of each of ``values`` (all sealed to ``subject``), reading
        each data key version they name once for the call instead of once a value.

        Raises:
            DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as :meth:`open_text`.
        """
        return await self.open_pairs(conn, tenant, [(value, subject) for value in values])

    async def open_pairs(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, items: Sequence[tuple[str, str]]
    ) -> list[str]:
        """:meth:`open_text` of each ``(value, subject)``, reading each data key version
        they name once for the call instead of once a value.

        Raises:
            DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as :meth:`open_text`.
        """
        keys: dict[int, bytes] = {}
        out = []
        for value, subject in items:
            if value.startswith(PLAIN):
                out.append(value[len(PLAIN) :])
                continue
            if not is_armored(value):
                out.append(value)
                continue
            try:
                version, blob = unarmor(value)
            except SealBroken as exc:
                raise DataKeyUnavailable(f"tenant {tenant}: {exc}") from exc
            if version not in keys:
                keys[version] = await self.key(conn, tenant, version)
            try:
                text = open_sealed(keys[version], blob, _content_aad(tenant, subject, version))
            except SealBroken as exc:
                raise DataKeyUnavailable(
                    f"tenant {tenant}'s {subject} does not authenticate under its data key"
                    f" version {version}: moved from another row or tenant, or altered"
                ) from exc
            out.append(text.decode())
        return out

    async def open_fields(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, row: Any, subject: str, *fields: str
    ) -> dict[str, Any]:
        """``row`` as a dict with each of ``fields`` (text, or NULL) opened."""
        out = dict(row.items())
        for name in fields:
            if out.get(name) is not None:
                out[name] = await self.open_text(conn, tenant, out[name], subject)
        return out

    async def key(self, conn: asyncpg.Connection, tenant: uuid.UUID, version: int) -> bytes:
        """Data key ``version`` of ``tenant``, unwrapped (read from the table every call).

        Raises:
            DataKeyShredded: it was shredded.
            DataKeyNotHere: its KEK is not configured here.
            DataKeyUnavailable: no such key, or its wrapping does not authenticate.
        """
        row = await conn.fetchrow(q("data_key_get"), tenant, version)
        if row is None:
            raise DataKeyUnavailable(f"tenant {tenant} has no data key version {version}")
        if row["wrapped"] is None:
            raise DataKeyShredded(str(tenant), version)
        if self.provider is None:
            raise DataKeyNotHere(
                "content is sealed and no key-encryption key is configured here"
                " (FENCELINE_KEK or FENCELINE_KEK_FILE)"
            )
        return self._unwrap(self.provider, tenant, row)

    async def _current(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, provider: KeyProvider
    ) -> tuple[int, bytes]:
        """The tenant's current data key; its first (or next, after a shredding) made now."""
        for _ in range(3):
            row = await conn.fetchrow(q("data_key_get_current"), tenant)
            if row is not None and row["wrapped"] is not None:
                return row["version"], self._unwrap(provider, tenant, row)
            version = 1 if row is None else row["version"] + 1
            data_key = os.urandom(KEY_BYTES)
            kek_id, wrapped = provider.wrap(data_key, _wrap_context(tenant, version))
            made = await conn.fetchval(
                q("data_key_insert_if_new"), tenant, version, kek_id, wrapped
            )
            if made is not None:
                self._remember(tenant, version, kek_id, wrapped, data_key)
                return version, data_key
            # a concurrent writer made this version first: read theirs
        raise DataKeyNotHere(f"tenant {tenant}'s data key kept changing while read")

    def _unwrap(self, provider: KeyProvider, tenant: uuid.UUID, row: Any) -> bytes:
        version, kek_id, wrapped = row["version"], row["kek_id"], bytes(row["wrapped"])
        cached = self._unwrapped.get((tenant, version, kek_id, wrapped))
        if cached is not None:
            return cached
        try:
            data_key = provider.unwrap(kek_id, wrapped, _wrap_context(tenant, version))
        except KeyError as exc:
            raise DataKeyNotHere(
                f"tenant {tenant}'s data key version {version} is wrapped by KEK {kek_id},"
                " which is not configured here"
            ) from exc
        except SealBroken as exc:
            raise DataKeyUnavailable(
                f"tenant {tenant}'s data key version {version} does not unwrap under KEK {kek_id}"
            ) from exc
        self._remember(tenant, version, kek_id, wrapped, data_key)
        return data_key

    def _remember(
        self, tenant: uuid.UUID, version: int, kek_id: str, wrapped: bytes, data_key: bytes
    ) -> None:
        if len(self._unwrapped) >= _CACHE_LIMIT:
            self._unwrapped.clear()
        self._unwrapped[(tenant, version, kek_id, wrapped)] = data_key


async def rotate_kek(pool: asyncpg.Pool, provider: KeyProvider, *, batch: int = 500) -> int:
    """Re-wrap every data key not shredded under ``provider``'s current KEK; returns
    how many were re-wrapped. No sealed value is rewritten: values name their data
    key's version, which stays. Each row is updated only if it is still wrapped under
    the KEK it was read under (a concurrent rotation's row is left to it).

    ``provider`` must hold the old KEKs as well as the new one (``FENCELINE_KEK=new,old``);
    once this returns, the old ones can be removed from the configuration.

    Raises:
        DataKeyUnavailable: a key is wrapped under a KEK ``provider`` does not hold.
    """
    if batch < 1:
        raise ValueError("batch must be positive")
    current = provider.current_kek_id
    done = 0
    while True:
        async with pool.acquire() as conn:
            rows = await conn.fetch(q("data_key_list_to_rewrap"), current, batch)
            if not rows:
                return done
            for row in rows:
                tenant, version = row["tenant_id"], row["version"]
                context = _wrap_context(tenant, version)
                try:
                    data_key = provider.unwrap(row["kek_id"], bytes(row["wrapped"]), context)
                except (KeyError, SealBroken) as exc:
                    raise DataKeyUnavailable(
                        f"tenant {tenant}'s data key version {version} is wrapped by KEK"
                        f" {row['kek_id']}, which the rotation cannot unwrap: keep the old"
                        " KEK after the new one in FENCELINE_KEK until the rotation is done"
                    ) from exc
                kek_id, wrapped = provider.wrap(data_key, context)
                updated = await conn.fetchval(
                    q("data_key_rewrap_if_kek"), tenant, version, row["kek_id"], kek_id, wrapped
                )
                done += updated is not None


async def shred_tenant_keys(
    conn: asyncpg.Connection, tenant: uuid.UUID, *, now: datetime | None = None
) -> list[int]:
    """Crypto-shredding: destroy every data key of ``tenant``. Whatever was sealed
    under them (rows, replicas, backups, a stray dump) is unreadable from now on; a
    read answers :class:`~pipeline.errors.DataKeyShredded`. Returns the versions
    destroyed now (none when they were already)."""
    return [r["version"] for r in await conn.fetch(q("data_key_shred_for_tenant"), tenant, now)]


async def tenant_keys(conn: asyncpg.Connection, tenant: uuid.UUID) -> list[dict[str, Any]]:
    """The tenant's data keys (version, KEK, when made, re-wrapped, shredded), never the key."""
    return [dict(r.items()) for r in await conn.fetch(q("data_key_list_for_tenant"), tenant)]


_warned = False


def _warn_unsealed() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "invoice content is stored unsealed: set FENCELINE_KEK (base64 of 32 bytes) or"
            " FENCELINE_KEK_FILE outside development"
        )
