"""The supplier register's names, VAT ids and tax numbers sealed at rest, with keyed
hashes for the register's unique keys.

A supplier's name and tax ids are lines of its invoices (a sole trader's name is
personal data), so issue 46 wants them out of a database dump as the IBANs on file
(:mod:`pipeline.tenants.supplier_ibans`). With a KEK configured (migration 048):

* ``suppliers.name`` holds the name sealed under the tenant's data key (subject
  :data:`NAME`): no SQL compares or orders it; validation matches names in Python;
* ``suppliers.vat_id`` and ``suppliers.tax_number`` hold keyed hashes of the ids
  (:meth:`~pipeline.data_keys.DataKeys.keyed_hash`), so the unique keys and the
  upserts' conflict targets compare them by equality without the ids, and
  ``vat_id_sealed`` / ``tax_number_sealed`` hold the ids sealed.

Invariants:

* **Opened where the register is read** (:func:`open_identities`, called by
  :func:`pipeline.tenants.master_data.load_master_data`): every reader sees the clear
  values, in memory only, ordered in Python as SQL ordered them before.
* **No KEK, no sealing**: the values are stored as they are and the ``*_sealed``
  columns stay NULL; rows written before sealing read as they are, and
  :func:`seal_register` seals them (and the IBANs on file) once a KEK is
  configured.
* **Shredded with the tenant**: once the tenant's data keys are shredded the names
  and ids do not open (:class:`~pipeline.errors.DataKeyShredded`), and the next data
  key hashes an id differently, as it does an IBAN.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from pipeline.data_keys import DataKeys
from pipeline.queries import q
from pipeline.tenants.supplier_ibans import open_accounts, open_ibans, seal_accounts, seal_ibans

#: The subjects a supplier's name, VAT id and tax number are sealed to (the tenant is
#: bound separately), and the labels their keyed hashes are derived for.
NAME = "suppliers:name"
VAT_ID = "suppliers:vat_id"
TAX_NUMBER = "suppliers:tax_number"


@dataclass(frozen=True)
class StoredIdentity:
    """A supplier's name and ids as the register stores them."""

    name: str
    vat_id: str | None
    vat_id_sealed: str | None
    tax_number: str | None
    tax_number_sealed: str | None


async def _id(
    keys: DataKeys, conn: asyncpg.Connection, tenant: uuid.UUID, value: str | None, label: str
) -> tuple[str | None, str | None]:
    """An id as stored: ``(keyed hash, sealed)``, or ``(value, None)`` without a KEK."""
    if value is None or not keys.sealing:
        return value, None
    hashed = await keys.keyed_hash(conn, tenant, value, label)
    return hashed, await keys.seal_text(conn, tenant, value, label)


async def seal_identity(
    keys: DataKeys,
    conn: asyncpg.Connection,
    tenant: uuid.UUID,
    *,
    name: str,
    vat_id: str | None,
    tax_number: str | None,
) -> StoredIdentity:
    """A supplier's name and ids as stored (module docstring); as they are without a KEK."""
    vat, vat_sealed = await _id(keys, conn, tenant, vat_id, VAT_ID)
    tax, tax_sealed = await _id(keys, conn, tenant, tax_number, TAX_NUMBER)
    return StoredIdentity(
        name=await keys.seal_text(conn, tenant, name, NAME) if keys.sealing else name,
        vat_id=vat,
        vat_id_sealed=vat_sealed,
        tax_number=tax,
        tax_number_sealed=tax_sealed,
    )


async def open_identities(
    keys: DataKeys, conn: asyncpg.Connection, tenant: uuid.UUID, rows: Sequence[Any]
) -> list[tuple[str, str | None, str | None]]:
    """``(name, vat_id, tax_number)`` of each register row, opened (those stored unsealed
    as they are); each data key version is read once a call.

    Raises:
        DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: as
            :meth:`~pipeline.data_keys.DataKeys.open_text`.
    """
    items: list[tuple[str, str]] = []
    for r in rows:
        items.append((r["name"], NAME))
        items.append((r["vat_id_sealed"] or r["vat_id"] or "", VAT_ID))
        items.append((r["tax_number_sealed"] or r["tax_number"] or "", TAX_NUMBER))
    opened = iter(await keys.open_pairs(conn, tenant, items))
    out = []
    for r in rows:
        name, vat, tax = next(opened), next(opened), next(opened)
        out.append(
            (
                name,
                vat if r["vat_id"] is not None else None,
                tax if r["tax_number"] is not None else None,
            )
        )
    return out


async def seal_register(keys: DataKeys, pool: asyncpg.Pool, *, batch: int = 200) -> int:
    """Seal every supplier whose name, IBANs or national accounts were stored unsealed
    (before migrations 044 and 048, or without a KEK): its name, ids, IBANs and
    accounts; returns how many rows were sealed. Each row is rewritten only if its
    name, IBANs and accounts are still the ones read (a supplier added again meanwhile
    is left as its writer stored it). Nothing to do without a KEK."""
    if not keys.sealing:
        return 0
    done = 0
    while True:
        async with pool.acquire() as conn:
            rows = await conn.fetch(q("supplier_list_unsealed"), batch)
            changed = 0
            for row in rows:
                tenant, stored = row["tenant_id"], list(row["ibans"])
                [clear] = await open_ibans(keys, conn, tenant, [stored])
                sealed, hashes = await seal_ibans(keys, conn, tenant, clear)
                held = list(row["accounts"])
                [accounts] = await open_accounts(keys, conn, tenant, [held])
                sealed_accounts, account_hashes = await seal_accounts(keys, conn, tenant, accounts)
                [(name, vat_id, tax_number)] = await open_identities(keys, conn, tenant, [row])
                ident = await seal_identity(
                    keys, conn, tenant, name=name, vat_id=vat_id, tax_number=tax_number
                )
                updated = await conn.fetchval(
                    q("supplier_register_update_if_same"),
                    row["id"],
                    stored,
                    row["name"],
                    ident.name,
                    ident.vat_id,
                    ident.vat_id_sealed,
                    ident.tax_number,
                    ident.tax_number_sealed,
                    sealed,
                    hashes,
                    held,
                    sealed_accounts,
                    account_hashes,
                )
                changed += updated is not None
        done += changed
        if len(rows) < batch or changed == 0:
            return done
