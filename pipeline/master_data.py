"""Tenant master data (suppliers, permitted currencies) for the validation policy."""

from __future__ import annotations

import uuid

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
