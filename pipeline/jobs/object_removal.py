"""Removing a document's stored object once no documents row needs its bytes.

Both erasure (:mod:`pipeline.jobs.erasure`) and retention (:mod:`pipeline.jobs.retention`)
remove the object an upload was stored as, after the transaction that released its
documents row has committed (a store is no transaction). The embedded folder store
keeps one file for every tenant that sent the same bytes, and a tenant sending the
same bytes again reuses its row and its object, so an object goes only when no
documents row of any tenant that names it still *needs* it: not erased, and with a
job that is neither erased nor marked by retention (or with no job at all).

The race with an upload of the same bytes is closed by an advisory lock per uri
(migration 045): every documents insert naming a uri takes it shared until its
transaction ends, :func:`remove_unneeded_object` takes it exclusive, in the caller's
transaction, around the check, the removal and the caller's record. An accept that
commits first is seen by the check; one that waits for the lock commits after the
removal, and the intake then finds the object missing and puts it again
(:meth:`pipeline.api.document_intake.DocumentIntake.ensure_stored`).
"""

from __future__ import annotations

from typing import Protocol

import asyncpg

from pipeline.queries import q

#: Outcomes of :func:`remove_unneeded_object` (``documents.object_outcome``, migration
#: 045; erasure's tombstone uses the same words for the last two).
OBJECT_REMOVED = "removed"
OBJECT_SHARED = "shared"
OBJECT_CLIENT = "client_object"


class ErasableStore(Protocol):
    """What removing an object needs of a document store
    (:class:`pipeline.documents.DocumentStore`)."""

    def upload_digest(self, uri: str) -> str | None:
        """The digest when ``uri`` names an object the store's own intake wrote."""
        ...

    async def remove(self, uri: str, version: str) -> None:
        """Remove the stored object ``uri`` at ``version``; an absent one is no error."""
        ...


async def object_needed(conn: asyncpg.Connection, uri: str) -> bool:
    """Whether a documents row of any tenant still needs the bytes ``uri`` names."""
    return bool(await conn.fetchval(q("document_uri_needed"), uri))


async def remove_unneeded_object(
    conn: asyncpg.Connection, uri: str, version: str, store: ErasableStore
) -> str:
    """Remove the object unless it is the client's or still needed; the outcome.

    Must run inside the caller's transaction, which records the outcome before it
    commits: the uri's advisory lock is held until then.

    Raises:
        DocumentStoreUnavailable: the store did not answer (nothing was removed, or
            the removal is in doubt: removing again is harmless).
    """
    if not conn.is_in_transaction():
        raise RuntimeError("remove_unneeded_object needs the caller's transaction")
    if store.upload_digest(uri) is None:
        return OBJECT_CLIENT
    await conn.execute(q("document_uri_lock_for_removal"), uri)
    if await object_needed(conn, uri):
        return OBJECT_SHARED
    await store.remove(uri, version)
    return OBJECT_REMOVED
