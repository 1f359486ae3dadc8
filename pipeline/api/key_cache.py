"""A cache of verified API keys in the intake process (issue 21, item 1).

Without it every request reads and verifies its key in PostgreSQL (a pool
acquire and one query) before the route does anything. With it a key verified
once is answered from memory, bounded in size (least recently used out first)
and in age (re-verified after ``max_age_seconds`` whatever happens). The rules
that keep it from ever answering for a key the database would refuse:

* **Changes are pushed, in their own transaction.** A trigger on ``api_keys``
  (``sql/schema/015_api_key_notify.sql``) sends ``NOTIFY fenceline_api_keys``
  with the key's id in the transaction that revokes it, changes its scopes or
  expiry or deletes it; renaming or deleting a tenant sends ``*``. The cache
  LISTENs on a dedicated connection and drops the entry (or everything) when
  the notification arrives, which PostgreSQL delivers when the change commits.
* **Fail safe.** While that connection is not subscribed — not yet, lost, or
  reconnecting — the cache neither answers nor fills: every request reads the
  database. After each (re)connect the cache starts empty, because
  notifications sent while it was deaf are gone.
* **No stale fill.** A request that missed reads the database and then fills
  the cache only if no notification arrived in between (a generation counter);
  otherwise a revoke that committed during the read could be overwritten by the
  row read before it.
* **Expiry on every hit.** An entry keeps the key's ``expires_at``; a hit within
  :data:`EXPIRY_MARGIN_SECONDS` of it (the process clock may trail the
  database's) is a miss, so the database decides and answers ``key_expired``.
* **Comparison.** Entries are found by the sha256 digest of the presented key,
  as the database's unique index is: a caller cannot choose digest prefixes, so
  the lookup's timing says nothing about any stored key; the found entry's
  digest is still compared with :func:`hmac.compare_digest`.

Unknown, revoked and expired keys are never cached: a refused key costs the
database read it always did.

What remains: a revoke is seen once its notification has reached this process
(sub-millisecond to a few milliseconds after the commit on one machine). The
accept transaction closes that window for the one write that matters — it
re-checks the key in a statement it already runs
(``tenant_admission_get``'s ``key_state``), so a job is never accepted on a key
revoked before the accept committed.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from pipeline.messaging import NotificationListener
from pipeline.service import ServiceHealth
from pipeline.tenants import Principal, VerifiedKey

log = logging.getLogger(__name__)

CHANNEL = "fenceline_api_keys"
#: A hit this close to the key's expiry goes to the database instead.
EXPIRY_MARGIN_SECONDS = 2.0


@dataclass(frozen=True)
class _Entry:
    digest: str
    verified: VerifiedKey
    verified_at: float  # time.monotonic()


class KeyCache:
    """Verified keys by digest, invalidated by ``LISTEN fenceline_api_keys``."""

    def __init__(
        self,
        dsn: str,
        *,
        max_entries: int,
        max_age_seconds: float,
        reconnect_seconds: float = 1.0,
    ) -> None:
        if max_entries < 1 or max_age_seconds <= 0:
            raise ValueError("a key cache needs max_entries >= 1 and max_age_seconds > 0")
        self.max_entries = max_entries
        self.max_age_seconds = max_age_seconds
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._by_id: dict[uuid.UUID, str] = {}
        self._generation = 0
        self.listener = NotificationListener(
            dsn, CHANNEL, self._on_change, reconnect_seconds=reconnect_seconds
        )
        #: Answers from memory, database reads while live, and reads because not live.
        self.hits = 0
        self.misses = 0
        self.bypasses = 0

    async def start(self) -> None:
        """Subscribe (retrying in the background while the database is down)."""
        await self.listener.start()

    async def stop(self) -> None:
        await self.listener.stop()
        self._clear()

    async def run_once(self) -> bool:
        """Resubscribe now if LISTEN is down; whether the cache is live afterwards."""
        return await self.listener.run_once()

    def health(self) -> ServiceHealth:
        """The listener's health: a cache that is not live answers nothing from memory."""
        return replace(
            self.listener.health(),
            name="key cache",
            details={"live": self.live, "entries": len(self._entries)},
        )

    @property
    def live(self) -> bool:
        return self.listener.live

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, digest: str, now: datetime) -> Principal | None:
        """The cached principal for ``digest``, or None: read the database."""
        if not self.live:
            self.bypasses += 1
            if self._entries:
                self._clear()
            return None
        entry = self._entries.get(digest)
        if entry is None or not hmac.compare_digest(entry.digest, digest):
            self.misses += 1
            return None
        expires_at = entry.verified.expires_at
        stale = time.monotonic() - entry.verified_at > self.max_age_seconds
        expiring = expires_at is not None and now >= expires_at - timedelta(
            seconds=EXPIRY_MARGIN_SECONDS
        )
        if stale or expiring:
            self._drop(digest)
            self.misses += 1
            return None
        self._entries.move_to_end(digest)
        self.hits += 1
        return entry.verified.principal

    def ticket(self) -> int | None:
        """Taken before a database read; :meth:`put` fills only if nothing changed since."""
        return self._generation if self.live else None

    def put(self, ticket: int | None, digest: str, verified: VerifiedKey) -> bool:
        """Remember a key the database verified after ``ticket`` was taken; False when a
        notification (or a lost connection) came in between, and nothing is kept."""
        if ticket is None or ticket != self._generation or not self.live:
            return False
        self._drop(digest)
        self._entries[digest] = _Entry(digest, verified, time.monotonic())
        self._by_id[verified.principal.key_id] = digest
        while len(self._entries) > self.max_entries:
            _, entry = self._entries.popitem(last=False)
            self._by_id.pop(entry.verified.principal.key_id, None)
        return True

    def _on_change(self, payload: str | None) -> None:
        self._generation += 1
        if payload is None or payload == "*":  # (re)connected, or a tenant changed
            self._clear()
            return
        try:
            key_id = uuid.UUID(payload)
        except ValueError:
            log.warning("key cache: unexpected notification %r; dropping everything", payload)
            self._clear()
            return
        digest = self._by_id.pop(key_id, None)
        if digest is not None:
            self._entries.pop(digest, None)

    def _drop(self, digest: str) -> None:
        entry = self._entries.pop(digest, None)
        if entry is not None:
            self._by_id.pop(entry.verified.principal.key_id, None)

    def _clear(self) -> None:
        self._entries.clear()
        self._by_id.clear()
