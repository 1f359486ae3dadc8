"""Tenant spend: what a token costs, what admission holds, what attempts used.

``tenant_spend`` has two columns per tenant and budget period, and admission
checks their sum against the tenant's ``spend_budget``:

* ``reserved``: spend held for work not yet settled. Every admission (the
  acceptance, and each re-drive) adds the job's estimate and writes a
  ``spend_reservations`` row in the same transaction; once the job settles the
  :class:`~pipeline.tenants.SpendReconciler` releases the row and takes its
  amount off again. Invariant: ``reserved`` equals the sum of the open rows.
* ``reconciled``: spend the attempts used. Each ended attempt is charged once
  (``spend_charges``, keyed by job and fence): its reported prompt and completion
  tokens at its model's two prices (:mod:`pipeline.pricing`). An attempt whose
  usage is unknown while the provider may have billed it (timed out, lease lost
  or expired, drained, cancelled) is charged at its reservation, marked
  ``estimated``, as admission keeps it; once the attempt reports (a late result)
  the reconciler replaces the estimate with the usage. Invariant: ``reconciled``
  equals the sum of the charges.

So a failed job holds nothing after it settles beyond what its attempts used,
and a job cheaper than its estimate frees the difference. Money is
:class:`~decimal.Decimal` end to end (``numeric(18, 6)`` in the database).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_CEILING, Decimal

import asyncpg

from pipeline.pricing import ModelPrice
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.settings import Settings

MICRO = Decimal("0.000001")


def cost_of(tokens: int, price_per_1k: Decimal) -> Decimal:
    """Spend for ``tokens`` at ``price_per_1k``, rounded up to 1e-6.

    The same rounding as ``spend_charge_attempts`` applies in SQL, so a charge
    computed here and one written there agree to the micro-unit.
    """
    raw = Decimal(tokens) * price_per_1k / Decimal(1000)
    return raw.quantize(MICRO, rounding=ROUND_CEILING)


def estimate_cost(tokens: int, settings: Settings) -> Decimal:
    """The spend reserved for a job's token estimate at the default prices.

    The estimate (``pipeline.tenants.estimate_tokens``) ends with the output
    reserve, priced as completion tokens; the rest is the prompt.
    """
    output = min(tokens, settings.output_reserve_tokens)
    return settings.prices().default.cost(tokens - output, output)


@dataclass(frozen=True)
class TenantSpend:
    """One tenant's spend in one budget period."""

    period_start: datetime
    #: Held for unsettled work (open reservations).
    reserved: Decimal
    #: What the attempts reported, charged at the token price.
    reconciled: Decimal
    #: Every reservation of the period, released or not.
    reserved_total: Decimal
    #: The part of ``reserved_total`` released after its job settled.
    released_total: Decimal
    open_reservations: int
    charged_tokens: int
    charges: int
    #: Charges of attempts whose usage is unknown, at their reservation.
    estimated_charges: int
    estimated_amount: Decimal
    #: Estimated charges since replaced by the usage their attempt reported.
    replaced_estimates: int

    @property
    def spent(self) -> Decimal:
        """What admission checks against the budget."""
        return self.reserved + self.reconciled


async def reserve_spend(
    conn: asyncpg.Connection,
    *,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    amount: Decimal,
    period: str,
    now: datetime | None,
) -> uuid.UUID:
    """Hold ``amount`` for ``job_id`` in the current period; returns the reservation id.

    Must run in the transaction that admits the job (accept or re-drive), so the
    reservation exists exactly when the job does.
    """
    rid = await conn.fetchval(
        q("spend_reserve_for_job"), uuid.uuid4(), job_id, tenant_id, period, now, amount
    )
    if rid is None:  # pragma: no cover - an INSERT without ON CONFLICT returns its row
        raise RuntimeError(f"reservation of job {job_id} was not written")
    return rid  # type: ignore[no-any-return]


async def spend_for_tenant(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, period: str, now: datetime | None = None
) -> TenantSpend:
    """The tenant's spend in the period containing ``now`` (the database's now if None)."""
    row = await conn.fetchrow(q("spend_get_for_tenant"), tenant_id, period, now)
    return from_record(
        TenantSpend,
        row,
        convert={
            "reserved": Decimal,
            "reconciled": Decimal,
            "reserved_total": Decimal,
            "released_total": Decimal,
            "open_reservations": int,
            "charged_tokens": int,
            "charges": int,
            "estimated_charges": int,
            "estimated_amount": Decimal,
            "replaced_estimates": int,
        },
    )


@dataclass(frozen=True)
class ModelSpend:
    """One tenant's charges of one period for one model at one pair of prices."""

    #: As the attempts recorded it; None for attempts that never answered.
    model: str | None
    #: None on charges written before prompt and completion were priced apart.
    prices: ModelPrice | None
    charges: int
    prompt_tokens: int
    completion_tokens: int
    amount: Decimal
    estimated_charges: int
    estimated_amount: Decimal


async def spend_by_model(
    conn: asyncpg.Connection, tenant_id: uuid.UUID, period: str, now: datetime | None = None
) -> list[ModelSpend]:
    """The tenant's charges of the period containing ``now``, per model and prices."""
    rows = await conn.fetch(q("spend_charges_by_model"), tenant_id, period, now)
    out = []
    for r in rows:
        priced = r["prompt_price_per_1k"] is not None and r["completion_price_per_1k"] is not None
        out.append(
            ModelSpend(
                model=r["model"],
                prices=(
                    ModelPrice(
                        prompt_per_1k=r["prompt_price_per_1k"],
                        completion_per_1k=r["completion_price_per_1k"],
                    )
                    if priced
                    else None
                ),
                charges=int(r["charges"]),
                prompt_tokens=int(r["prompt_tokens"]),
                completion_tokens=int(r["completion_tokens"]),
                amount=Decimal(r["amount"]),
                estimated_charges=int(r["estimated_charges"]),
                estimated_amount=Decimal(r["estimated_amount"]),
            )
        )
    return out
