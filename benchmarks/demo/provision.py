"""The demo's tenants: their API keys, console keys, supplier master data and the
reference ERP's webhook endpoint, provisioned before any invoice is sent."""

from __future__ import annotations

from collections import Counter

from benchmarks.demo.corpus import TENANTS
from benchmarks.invoices.generator import GeneratedInvoice
from pipeline.settings import Settings

#: What the demo's console keys may do: review and correct, and see the dashboard.
CONSOLE_SCOPES = ("jobs", "operator", "review")


def review_key_name(tenant: str) -> str:
    """Where :func:`provision` puts a tenant's console key in its ``keys``."""
    return f"review:{tenant}"


def console_lines(
    intake_url: str, review_keys: dict[str, str], work: list[tuple[str, GeneratedInvoice]]
) -> list[str]:
    """The console's URL and each tenant's console key, with how many of its invoices
    a faithful reading sends to review (those wait there after the run)."""
    expected = Counter(t for t, inv in work if inv.truth_decision.value == "REVIEW_REQUIRED")
    lines = [f"console: {intake_url}/console  (sign in with the tenant's review key)"]
    for tenant, key in review_keys.items():
        lines.append(
            f"  {tenant:<12} {key}  ({expected.get(tenant, 0)} invoice(s) expected in review)"
        )
    return lines


async def provision(
    settings: Settings, erp_url: str, work: list[tuple[str, GeneratedInvoice]]
) -> tuple[dict[str, str], list[str]]:
    """Tenants, API keys, supplier master data and webhook endpoints; returns keys, secrets.

    Besides its ``jobs`` key (``keys[name]``), every tenant gets a console key with the
    ``review`` and ``operator`` scopes (``keys[review_key_name(name)]``): the console is
    tenant-scoped, and the invoices expected to go to review belong to whichever
    tenant the corpus gives them, so one tenant's key would not show them all.
    """
    from pipeline.data_keys import DataKeys
    from pipeline.database import create_pool
    from pipeline.delivery import EndpointRegistry, SecretBox, guard_from_settings
    from pipeline.tenants import create_api_key, create_tenant, permit_currencies, upsert_supplier

    keys: dict[str, str] = {}
    secrets: list[str] = []
    pool = await create_pool(settings.database_url, max_size=2)
    try:
        registry = EndpointRegistry(pool, guard_from_settings(settings), SecretBox(None))
        ids = {}
        async with pool.acquire() as conn:
            for name, weight in TENANTS:
                t = await create_tenant(conn, name, weight=weight)
                ids[name] = t.id
                keys[name] = (await create_api_key(conn, t.id))[1]
                keys[review_key_name(name)] = (
                    await create_api_key(conn, t.id, scopes=CONSOLE_SCOPES)
                )[1]
            sealing = DataKeys.from_settings(settings)  # the register's IBANs sealed at rest
            for tenant, inv in work:
                await upsert_supplier(conn, ids[tenant], inv.supplier, keys=sealing)
                await permit_currencies(conn, ids[tenant], [inv.currency])
        for name, _ in TENANTS:
            issued = await registry.register(ids[name], erp_url, description="demo ERP")
            secrets.append(issued.secret)
    finally:
        await pool.close()
    return keys, secrets
