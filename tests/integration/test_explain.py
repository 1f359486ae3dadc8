"""``fenceline explain`` shows everything one job went through (issue 20, item 6).

One job with a retry (a 429), admission grants (one refunded, one reconciled), a
review that approves it, and an ERP delivery to the reference receiver: each
section of the explanation lists exactly those, and the rendered text names them.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from pipeline.admission import AdmissionLedger, Grant, PriorityClass, Reconciliation
from pipeline.admission.grants import GrantOutcome
from pipeline.clock import ManualClock
from pipeline.errors import ProviderRateLimited
from pipeline.jobs import SECTIONS, render_explain
from pipeline.states import JobState
from pipeline.tenants import create_api_key
from pipeline.usage import AttemptUsage
from tests.support.delivery import dispatcher_for, job_store, registry_for, reserve_receiver
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


async def grant(ledger: AdmissionLedger, tenant: uuid.UUID, job: uuid.UUID, fence: int) -> str:
    g = Grant(
        grant_id=str(uuid.uuid4()),
        scope="pool:short",
        tenant=str(tenant),
        priority=PriorityClass.STANDARD,
        prompt_tokens=900,
        max_output_tokens=300,
        reserved_tokens=1200,
        granted_at=0.0,
        job_id=str(job),
        fence=fence,
    )
    await ledger.record_grant(g)
    return g.grant_id


async def test_explain_lists_the_retry_grants_review_and_delivery_of_one_job(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    ledger = AdmissionLedger(pool, clock)
    tenant = await new_tenant(pool)
    receiver, issued = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    job = (await store.accept(request(tenant))).job_id

    # Attempt 1: admitted, the provider answers 429, the grant is refunded.
    [first] = await store.claim("driver-a")
    g1 = await grant(ledger, tenant.id, job, first.fence)
    await ledger.record_settlement(
        Reconciliation(g1, str(tenant.id), GrantOutcome.REFUNDED, 1200, 0, False)
    )
    await store.retry_or_fail(first, ProviderRateLimited("429 from provider", retry_after=1.0))
    clock.advance(120)

    # Attempt 2: admitted, answered, reconciled with the reported usage; held for review.
    [second] = await store.claim("driver-b")
    assert second.job_id == job
    g2 = await grant(ledger, tenant.id, job, second.fence)
    await ledger.record_settlement(
        Reconciliation(g2, str(tenant.id), GrantOutcome.RECONCILED, 1200, 1040, True, 900, 140)
    )
    await store.succeed(
        second,
        result={"invoice_number": "INV-7"},
        validation={"reasons": [{"code": "supplier_unknown"}], "schema_valid": True},
        decision=JobState.REVIEW_REQUIRED,
        usage=AttemptUsage(prompt_tokens=900, completion_tokens=140, engine="fake"),
    )
    async with pool.acquire() as conn, conn.transaction():
        key_id, _ = await create_api_key(conn, tenant.id, scopes=("review",))
        version = await conn.fetchval(
            "SELECT state_version FROM extraction_jobs WHERE id = $1", job
        )
        decided = await store.decide_review(
            conn,
            job_id=job,
            tenant_id=tenant.id,
            key_id=key_id,
            decision="approve",
            note="supplier checked by phone",
            state_version=version,
        )
    assert decided is not None
    with receiver:
        dispatcher = dispatcher_for(pool, clock=clock)
        assert (await dispatcher.run_once()).count("delivered") == 1
        await dispatcher.close()

    data = await store.explain(job)
    assert set(SECTIONS) <= set(data)
    assert [(e["from_state"], e["to_state"]) for e in data["events"]] == [
        (None, "READY"),
        ("READY", "RUNNING"),
        ("RUNNING", "RETRY_SCHEDULED"),
        ("RETRY_SCHEDULED", "RUNNING"),
        ("RUNNING", "REVIEW_REQUIRED"),
        ("REVIEW_REQUIRED", "SUCCEEDED"),
    ]
    attempts = data["attempts"]
    assert [(a["fence"], a["worker_id"], a["outcome"]) for a in attempts] == [
        (first.fence, "driver-a", "retry_scheduled"),
        (second.fence, "driver-b", "review_required"),
    ]
    assert attempts[0]["error_class"] == "rate_limited"
    assert (attempts[1]["prompt_tokens"], attempts[1]["completion_tokens"]) == (900, 140)
    assert [(g["fence"], g["outcome"], g["charged_tokens"]) for g in data["admission"]] == [
        (first.fence, "refunded", 0),
        (second.fence, "reconciled", 1040),
    ]
    assert [o["event_type"] for o in data["outbox"]] == [
        "extraction.requested.v1",
        "extraction.review_required.v1",
        "extraction.completed.v1",
    ]
    [delivery] = data["deliveries"]
    assert (delivery["state"], delivery["attempts"]) == ("delivered", 1)
    [sent] = delivery["attempt_history"]
    assert (sent["outcome"], sent["http_status"], sent["key_ids"]) == (
        "delivered",
        200,
        [issued.key_id],
    )
    [review] = data["reviews"]
    assert (review["decision"], review["note"], review["to_state"]) == (
        "approve",
        "supplier checked by phone",
        "SUCCEEDED",
    )
    assert review["api_key_id"] == key_id
    assert data["redrives"] == [] and data["inbox"] == []

    text = render_explain(data)
    for heading in ("events:", "attempts:", "admission:", "outbox:", "deliveries:", "reviews:"):
        assert f"\n{heading}\n" in text, heading
    assert "inbox: none" in text and "redrives: none" in text
    assert "worker driver-a: retry_scheduled rate_limited" in text
    assert "-> refunded" in text and "-> reconciled" in text
    assert f"delivery {delivery['id']}" in text and "HTTP 200" in text
    assert "approve by key" in text and "supplier checked by phone" in text
