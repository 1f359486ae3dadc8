"""The delivery body tells the ERP which account it pays (docs/delivery.md, ``payee_account``):
the IBAN the result states, the national account it states (contract v3's
``payee_account``, on file for the supplier), the supplier's account on file where the
invoice states none (pipeline/validation/payee.py), or none at all (a credit note, a
supplier that collects)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from pipeline.clock import ManualClock
from tests.support.delivery import fetch, invoice, job_store, registry_for
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

_EVIDENCE = {"page": 1, "start": 0, "end": 22, "quote": "DE89370400440532013000"}
RESULTS: list[tuple[dict[str, Any], str]] = [
    ({"iban": {"value": "DE89370400440532013000", "evidence": _EVIDENCE}}, "iban"),
    ({"iban": None}, "on_file"),
    (
        {
            "iban": None,
            "payee_account": {"scheme": "SE:BANKGIRO", "id": "50501055", "evidence": _EVIDENCE},
        },
        "national",
    ),
    ({}, "on_file"),
    ({"iban": None, "payment_means": {"value": "59", "evidence": _EVIDENCE}}, "collected"),
    ({"iban": None, "document_type": "credit_note"}, "none"),
]


async def test_the_body_says_which_account_the_erp_pays(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    await registry_for(pool, clock).register(tenant.id, "http://127.0.0.1:9/a", event_types=[])
    want = {}
    for n, (fields, payee) in enumerate(RESULTS):
        accepted = await store.accept(request(tenant))
        [lease] = await store.claim(f"w-{n}")
        assert lease.job_id == accepted.job_id
        await store.succeed(lease, result={**invoice(n), **fields})
        want[str(lease.job_id)] = payee
    rows = await fetch(pool, "SELECT body FROM deliveries WHERE tenant_id = $1", tenant.id)
    bodies = [json.loads(bytes(r["body"]))["data"] for r in rows]
    assert {b["job_id"]: b["payee_account"] for b in bodies} == want
