"""Tenant master data (suppliers, permitted currencies) for the validation policy.

Drivers read it through a :class:`MasterDataCache`: a tenant's record is reused
for ``ttl_seconds`` and then read again, so a supplier or currency added with
``fenceline suppliers add`` / ``fenceline tenants currencies`` reaches every
running driver within that time, without a restart.

The administration functions (:func:`add_supplier`, :func:`list_suppliers`,
:func:`set_currencies`) store master data in the form validation compares it
in: IBANs in electronic form (upper case, no spaces) after their mod-97 and
length checks, currencies as ISO 4217 codes. Input that validation could never
match (a bad IBAN, an unknown currency, hidden characters in a name) is refused
with :class:`ValueError` rather than stored.

The IBANs and national accounts on file, and the suppliers' names, VAT ids and tax
numbers, are sealed at rest under the tenant's data key when a KEK is configured
(:mod:`pipeline.tenants.supplier_ibans`, :mod:`pipeline.tenants.supplier_identities`):
the writers seal them with the ``keys`` they are given, :func:`load_master_data`
opens them, so every reader of a :class:`SupplierRecord` sees them in clear. ``keys`` left out is
``DataKeys(None)``: no KEK here, IBANs written as they are, sealed ones not readable.
"""

from __future__ import annotations

import re
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable

import asyncpg

from pipeline.data_keys import DataKeys
from pipeline.errors import NotFound
from pipeline.invoice import (
    IBAN_LENGTHS,
    ISO_4217,
    SupplierRecord,
    TenantMasterData,
    compact_id,
    iban_checksum_ok,
    names_a_registration,
    parse_account,
)
from pipeline.queries import q
from pipeline.tenants.accounts import get_tenant
from pipeline.tenants.admin import resolve_tenant
from pipeline.tenants.supplier_ibans import open_accounts, open_ibans, seal_accounts, seal_ibans
from pipeline.tenants.supplier_identities import open_identities, seal_identity


async def upsert_supplier(
    conn: asyncpg.Connection,
    tenant_id: uuid.UUID,
    record: SupplierRecord,
    *,
    keys: DataKeys | None = None,
) -> uuid.UUID:
    """Insert or update a supplier, keyed by (tenant, VAT id), or (tenant, tax number)
    for one without VAT id; its IBANs sealed under ``keys`` (module docstring)."""
    row = await _store(conn, tenant_id, record, keys or DataKeys(None))
    got: uuid.UUID = row["id"]
    return got


async def _store(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, record: SupplierRecord, keys: DataKeys
) -> asyncpg.Record:
    """The upsert of ``record`` by its VAT id, else by its tax number.

    Raises:
        ValueError: the tax number is another supplier's of the tenant.
    """
    ibans, iban_keys = await seal_ibans(keys, conn, tenant_id, record.ibans)
    accounts, account_keys = await seal_accounts(keys, conn, tenant_id, record.accounts)
    ident = await seal_identity(
        keys, conn, tenant_id, name=record.name, vat_id=record.vat_id, tax_number=record.tax_number
    )
    try:
        if record.vat_id:
            row = await conn.fetchrow(
                q("supplier_upsert"),
                uuid.uuid4(),
                tenant_id,
                ident.name,
                ident.vat_id,
                ibans,
                ident.tax_number,
                iban_keys,
                ident.vat_id_sealed,
                ident.tax_number_sealed,
                accounts,
                account_keys,
            )
        else:
            row = await conn.fetchrow(
                q("supplier_upsert_by_tax_number"),
                uuid.uuid4(),
                tenant_id,
                ident.name,
                ibans,
                ident.tax_number,
                iban_keys,
                ident.tax_number_sealed,
                accounts,
                account_keys,
            )
    except asyncpg.UniqueViolationError as exc:
        raise ValueError(
            f"the tax number {record.tax_number!r} is another supplier's on file"
        ) from exc
    except asyncpg.CheckViolationError as exc:
        raise ValueError("a supplier needs a VAT id or a tax number") from exc
    return row


def normalise_iban(value: str) -> str:
    """``value`` in electronic form (NFKC, upper case, no spaces); ValueError if invalid."""
    iban = re.sub(r"\s", "", unicodedata.normalize("NFKC", value)).upper()
    if not re.fullmatch(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}", iban):
        raise ValueError(f"{value!r} is not an IBAN (country, check digits, 11-30 characters)")
    expected = IBAN_LENGTHS.get(iban[:2])
    if expected is not None and len(iban) != expected:
        raise ValueError(f"{value!r}: {iban[:2]} IBANs have {expected} characters")
    if not iban_checksum_ok(iban):
        raise ValueError(f"{value!r}: the mod-97 check fails")
    return iban


def check_currencies(codes: Iterable[str]) -> tuple[str, ...]:
    """Upper-cased ISO 4217 codes, deduplicated in order; ValueError for an unknown or none."""
    out: list[str] = []
    for code in codes:
        upper = code.strip().upper()
        if upper not in ISO_4217:
            raise ValueError(f"{code!r} is not an ISO 4217 currency code")
        if upper not in out:
            out.append(upper)
    if not out:
        raise ValueError("at least one currency is needed")
    return tuple(out)


def _plain(value: str, what: str) -> str:
    """``value`` stripped; ValueError if empty or holding control or format characters."""
    value = value.strip()
    if not value:
        raise ValueError(f"the {what} is empty")
    hidden = sorted(
        {f"U+{ord(ch):04X}" for ch in value if unicodedata.category(ch) in ("Cc", "Cf")}
    )
    if hidden:
        raise ValueError(f"the {what} contains control or invisible characters {hidden}")
    return value


async def add_supplier(
    conn: asyncpg.Connection,
    tenant: str | uuid.UUID,
    *,
    name: str,
    vat_id: str | None = None,
    ibans: Iterable[str] = (),
    tax_number: str | None = None,
    accounts: Iterable[str] = (),
    keys: DataKeys | None = None,
) -> tuple[SupplierRecord, bool]:
    """Add a supplier to ``tenant`` (id or name), or replace the one with that VAT id
    (without a VAT id: the one with that tax number).

    A supplier is known by its VAT id, its tax number (EN 16931 BT-32), or both: an
    e-invoice of a seller without VAT id is matched by the tax number it states.
    ``accounts`` are national accounts on file (``SE:BANKGIRO:5050-1055``: EN 16931
    BT-84 that is no IBAN), stored canonical
    (:func:`~pipeline.invoice.national_accounts.parse_account`).
    Returns the record as stored and whether it was created (False: replaced).

    Raises:
        NotFound: no such tenant.
        ValueError: neither a VAT id nor a tax number; an empty or hidden-character name,
            VAT id or tax number; a tax number without a digit; an invalid IBAN; a tax
            number another supplier holds.
    """
    if vat_id is None and tax_number is None:
        raise ValueError("a supplier needs a VAT id or a tax number")
    record = SupplierRecord(
        name=_plain(name, "supplier name"),
        vat_id=None if vat_id is None else _identifier(vat_id, "VAT id"),
        ibans=frozenset(normalise_iban(i) for i in ibans),
        tax_number=None if tax_number is None else _tax_number(tax_number),
        accounts=frozenset(parse_account(a) for a in accounts),
    )
    t = await resolve_tenant(conn, tenant)
    row = await _store(conn, t.id, record, keys or DataKeys(None))
    return record, bool(row["created"])


def _tax_number(value: str) -> str:
    """A tax number as stored: an identifier with a digit in it (a statement such as
    ``Godkänd för F-skatt`` names no registration, and every Swedish seller prints it)."""
    plain = _identifier(value, "tax number")
    if not names_a_registration(plain):
        raise ValueError(f"the tax number {value!r} has no digits: it names no registration")
    return plain


def _identifier(value: str, what: str) -> str:
    """A VAT id or tax number as stored: plain, with at least one letter or digit."""
    plain = _plain(value, what)
    if not compact_id(plain):
        raise ValueError(f"the {what} {value!r} has no letters or digits")
    return plain


async def list_suppliers(
    conn: asyncpg.Connection, tenant: str | uuid.UUID, *, keys: DataKeys | None = None
) -> list[SupplierRecord]:
    """The suppliers of ``tenant`` (id or name), by name, IBANs opened; NotFound for no
    such tenant."""
    t = await resolve_tenant(conn, tenant)
    return list((await load_master_data(conn, t.id, keys=keys)).suppliers)


async def set_currencies(
    conn: asyncpg.Connection, tenant: str | uuid.UUID, codes: Iterable[str]
) -> tuple[str, ...]:
    """Replace the permitted currencies of ``tenant`` (id or name); returns them as stored.

    Raises:
        NotFound: no such tenant.
        ValueError: an unknown code, or no code at all.
    """
    checked = check_currencies(codes)
    t = await resolve_tenant(conn, tenant)
    row = await conn.fetchrow(q("tenant_currencies_update_if_exists"), t.id, list(checked))
    if row is None:  # pragma: no cover - resolved a moment ago; tenants are never deleted
        raise NotFound(f"tenant {tenant}")
    return tuple(row["allowed_currencies"])


async def permit_currencies(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, codes: Iterable[str]
) -> tuple[str, ...]:
    """Add ``codes`` to the tenant's permitted currencies (those already permitted stay)."""
    tenant = await get_tenant(conn, tenant_id)  # the currencies only: no IBAN is opened
    current = tenant.allowed_currencies if tenant is not None else ()
    return await set_currencies(conn, tenant_id, sorted(set(current) | set(codes)))


async def load_master_data(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, *, keys: DataKeys | None = None
) -> TenantMasterData:
    """The tenant's suppliers (their IBANs opened under ``keys``) and permitted
    currencies, read under tenant scope.

    Raises:
        DataKeyShredded, DataKeyNotHere, DataKeyUnavailable: a sealed IBAN that does not
            open (:func:`pipeline.tenants.supplier_ibans.open_ibans`).
    """
    keys = keys or DataKeys(None)
    tenant = await get_tenant(conn, tenant_id)
    currencies = frozenset(tenant.allowed_currencies) if tenant is not None else frozenset()
    rows = await conn.fetch(q("supplier_list_for_tenant"), tenant_id)
    opened = await open_ibans(keys, conn, tenant_id, [r["ibans"] for r in rows])
    accounts = await open_accounts(keys, conn, tenant_id, [r["accounts"] for r in rows])
    idents = await open_identities(keys, conn, tenant_id, rows)
    suppliers = tuple(
        sorted(
            (
                SupplierRecord(
                    name=name, vat_id=vat_id, ibans=ibans, tax_number=tax_number, accounts=held
                )
                for (name, vat_id, tax_number), ibans, held in zip(
                    idents, opened, accounts, strict=True
                )
            ),
            key=_register_order,
        )
    )
    return TenantMasterData(suppliers=suppliers, permitted_currencies=currencies)


def _register_order(r: SupplierRecord) -> tuple[str, bool, str, bool, str]:
    """By name, then VAT id, then tax number, a missing id last."""
    return (r.name, r.vat_id is None, r.vat_id or "", r.tax_number is None, r.tax_number or "")


class MasterDataCache:
    """Per-tenant master data, each entry reused for ``ttl_seconds`` (0 = never reused).

    ``clock`` is a monotonic time source in seconds (injectable for tests).
    """

    def __init__(
        self, ttl_seconds: float = 30.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_seconds < 0:
            raise ValueError("ttl_seconds must be >= 0")
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._entries: dict[uuid.UUID, tuple[float, TenantMasterData]] = {}

    async def get(
        self, conn: asyncpg.Connection, tenant_id: uuid.UUID, *, keys: DataKeys | None = None
    ) -> TenantMasterData:
        """The tenant's master data (IBANs opened under ``keys``), read again once the
        cached copy is older than the TTL."""
        now = self.clock()
        cached = self._entries.get(tenant_id)
        if cached is not None and now - cached[0] < self.ttl_seconds:
            return cached[1]
        data = await load_master_data(conn, tenant_id, keys=keys)
        self._entries[tenant_id] = (now, data)
        return data
