"""Tenant master data (suppliers, permitted currencies) for the validation policy.

Drivers read it through a :class:`MasterDataCache`: a tenant's record is reused
for ``ttl_seconds`` and then read again, so a supplier or currency added with
``fenceline suppliers add`` / ``fenceline tenants currencies`` reaches every
running driver within that time, without a restart.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import asyncpg

from pipeline.queries import q
from pipeline.tenants import get_tenant
from pipeline.validation import SupplierRecord, TenantMasterData


async def upsert_supplier(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, record: SupplierRecord
) -> uuid.UUID:
    """Insert or update a supplier, keyed by (tenant, VAT id)."""
    got: uuid.UUID = await conn.fetchval(
        q("supplier_upsert"),
        uuid.uuid4(),
        tenant_id,
        record.name,
        record.vat_id,
        sorted(record.ibans),
    )
    return got


async def load_master_data(conn: asyncpg.Connection, tenant_id: uuid.UUID) -> TenantMasterData:
    """The tenant's suppliers and permitted currencies, read under tenant scope."""
    tenant = await get_tenant(conn, tenant_id)
    currencies = frozenset(tenant.allowed_currencies) if tenant is not None else frozenset()
    rows = await conn.fetch(q("supplier_list_for_tenant"), tenant_id)
    suppliers = tuple(
        SupplierRecord(name=r["name"], vat_id=r["vat_id"], ibans=frozenset(r["ibans"]))
        for r in rows
    )
    return TenantMasterData(suppliers=suppliers, permitted_currencies=currencies)


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

    async def get(self, conn: asyncpg.Connection, tenant_id: uuid.UUID) -> TenantMasterData:
        """The tenant's master data, read again once the cached copy is older than the TTL."""
        now = self.clock()
        cached = self._entries.get(tenant_id)
        if cached is not None and now - cached[0] < self.ttl_seconds:
            return cached[1]
        data = await load_master_data(conn, tenant_id)
        self._entries[tenant_id] = (now, data)
        return data
