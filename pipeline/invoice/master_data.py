"""A tenant's master data: what it knows of its suppliers independently of any document.

Validation holds an extraction against it (the supplier on file, its VAT id and
IBANs, the currencies the tenant accepts); the tenants package stores and loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SupplierRecord:
    """One supplier in a tenant's master data; ``ibans`` empty means "not on file"."""

    name: str
    vat_id: str
    ibans: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TenantMasterData:
    """What a tenant knows independently of any document."""

    suppliers: tuple[SupplierRecord, ...]
    permitted_currencies: frozenset[str] = field(default_factory=frozenset)
