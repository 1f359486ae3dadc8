"""A tenant's master data: what it knows of its suppliers independently of any document.

Validation holds an extraction against it (the supplier on file, its VAT id or tax
number and IBANs, the currencies the tenant accepts); the tenants package stores and
loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SupplierRecord:
    """One supplier in a tenant's master data; ``ibans`` empty means "not on file".

    A supplier is known by its VAT id, its tax number (EN 16931 BT-32: a seller without
    VAT id, or one not subject to VAT, states its tax registration instead), or both;
    ``None`` is "not on file". The store refuses a record with neither.
    """

    name: str
    vat_id: str | None
    ibans: frozenset[str] = frozenset()
    tax_number: str | None = None
    #: National accounts on file (EN 16931 BT-84 that is no IBAN: a Swedish bankgiro),
    #: each canonical ``SCHEME:ID`` (:mod:`pipeline.invoice.national_accounts`); an
    #: invoice stating one is accepted only where it is here.
    accounts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TenantMasterData:
    """What a tenant knows independently of any document."""

    suppliers: tuple[SupplierRecord, ...]
    permitted_currencies: frozenset[str] = field(default_factory=frozenset)
