"""The supplier register's IBANs sealed at rest, with keyed hashes for lookups.

A tenant's supplier register (``suppliers``) holds the IBANs on file that validation
compares an invoice's IBAN with: personal data (a sole trader's account) that issue
46 wants out of a database dump and out of every index. With a KEK configured each
IBAN is stored sealed under the tenant's data key (:mod:`pipeline.data_keys`,
subject :data:`SUBJECT`) and beside it, at the same position of ``iban_keys``
(migration 044), a keyed hash (:meth:`~pipeline.data_keys.DataKeys.keyed_hash`) that
an equality lookup can compare without the IBAN.

Invariants:

* **Opened where the register is read** (:func:`open_ibans`, called by
  :func:`pipeline.tenants.master_data.load_master_data`): every reader (validation,
  ``fenceline suppliers list``, the e-invoice path's "IBAN on file proves the
  seller") sees the IBANs in clear, in memory only.
* **No KEK, no sealing**: as for every sealed value, the IBANs are then stored as
  they are (with a warning, :class:`~pipeline.data_keys.DataKeys`) and ``iban_keys``
  is empty; IBANs stored before sealing read as they are, and
  :func:`pipeline.tenants.supplier_identities.seal_register` seals them once a
  KEK is configured.
* **National accounts alike** (:func:`seal_accounts`, :func:`open_accounts`): the
  accounts on file that are no IBAN (``accounts``, ``account_keys``: migration 047)
  are sealed and hashed the same way, to their own subject and hash label.
* **Shredded with the tenant**: once the tenant's data keys are shredded the
  register's IBANs do not open (:class:`~pipeline.errors.DataKeyShredded`) and its
  hashes match nothing the next data key makes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import asyncpg

from pipeline.data_keys import DataKeys

#: The subject a register IBAN is sealed to (the tenant is bound separately).
SUBJECT = "suppliers:iban"
#: What the register's keyed hashes are derived for.
HASH_LABEL = "suppliers:iban"
#: The subject and hash label of a register national account (``SE:BANKGIRO:50501055``).
ACCOUNT_SUBJECT = "suppliers:account"
ACCOUNT_HASH_LABEL = "suppliers:account"


async def seal_ibans(
    keys: DataKeys, conn: asyncpg.Connection, tenant: uuid.UUID, ibans: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The IBANs as stored (sorted by their clear text, each sealed) and their keyed
    hashes at the same positions (empty when no KEK is configured)."""
    return await _seal(keys, conn, tenant, ibans, SUBJECT, HASH_LABEL)


async def seal_accounts(
    keys: DataKeys, conn: asyncpg.Connection, tenant: uuid.UUID, accounts: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The national accounts (canonical ``SCHEME:ID``) as stored, sealed as
    :func:`seal_ibans` seals IBANs, and their keyed hashes."""
    return await _seal(keys, conn, tenant, accounts, ACCOUNT_SUBJECT, ACCOUNT_HASH_LABEL)


async def _seal(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    values: Iterable[str],
    subject: str,
    label: str,
) -> tuple[list[str], list[str]]:
    ordered = sorted(set(values))
    sealed = [await keys.seal_text(conn, tenant, value, subject) for value in ordered]
    hashes = [await keys.keyed_hash(conn, tenant, value, label) for value in ordered]
    return sealed, [h for h in hashes if h is not None]


async def iban_key(
    keys: DataKeys, conn: asyncpg.Connection, tenant: uuid.UUID, iban: str
) -> str | None:
    """The keyed hash an IBAN in electronic form has in ``suppliers.iban_keys`` (None
    without a KEK)."""
    return await keys.keyed_hash(conn, tenant, iban, HASH_LABEL)


async def open_ibans(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    stored: Sequence[Sequence[str]],
) -> list[frozenset[str]]:
    """The IBANs of each supplier in ``stored`` (its ``ibans`` as stored), opened
    (those stored unsealed as they are); each data key version is read once a call.

    Raises:
        DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as
            :meth:`~pipeline.data_keys.DataKeys.open_text`.
    """
    return await _open(keys, conn, tenant, stored, SUBJECT)


async def open_accounts(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    stored: Sequence[Sequence[str]],
) -> list[frozenset[str]]:
    """The national accounts of each supplier in ``stored`` (its ``accounts`` as
    stored), opened as :func:`open_ibans` opens IBANs (same errors)."""
    return await _open(keys, conn, tenant, stored, ACCOUNT_SUBJECT)


async def _open(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    stored: Sequence[Sequence[str]],
    subject: str,
) -> list[frozenset[str]]:
    opened = iter(
        await keys.open_texts(conn, tenant, [v for values in stored for v in values], subject)
    )
    return [frozenset(next(opened) for _ in values) for values in stored]
