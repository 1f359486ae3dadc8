"""Invoice versions (issue 47, item 1).

An invoice is identified by tenant, supplier, number and document type. A later job
of the same identity with a newer issue date or an amendment marker is a possible
amendment: REVIEW_REQUIRED ``possible_amendment`` naming the earlier job, or, under
the tenant policy ``auto_supersede``, a new version superseding it. Two versions
racing through the commit path decide once; the ERP (the reference receiver on
loopback HTTP) receives ``invoice.superseded.v1`` for the old job before the new
job's result, whether the supersede came from the policy or from a reviewer.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api.app import app_from_env
from pipeline.errors import VersionConflict
from pipeline.jobs import (
    EVENT_COMPLETED,
    EVENT_SUPERSEDED,
    AcceptRequest,
    DocumentIn,
    JobStore,
    Success,
    set_version_policy,
)
from pipeline.jobs.records import ReviewDecided
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Tenant, create_api_key
from tests.support.api import loopback_server, tenant_with_key
from tests.support.delivery import dispatcher_for, fetch, job_store, registry_for, reserve_receiver
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration

#: How often the race runs: each round two versions commit at once.
RACE_ROUNDS = 12


def invoice(
    number: str = "INV-0042",
    gross: str = "1210.00",
    date: str = "2026-11-02",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": "DE 123 456 789"}},
        "invoice_number": {"value": number},
        "gross_total": {"value": gross},
        "currency": {"value": "EUR"},
        "issue_date": {"value": date},
        **extra,
    }


async def policy(pool: asyncpg.Pool, tenant: Tenant, name: str) -> None:
    async with pool.acquire() as conn:
        await set_version_policy(conn, tenant.id, name)


async def settle(store: JobStore, tenant: Tenant, result: dict[str, Any]) -> uuid.UUID:
    """One job of ``tenant`` accepted, claimed and settled with ``result``."""
    await store.accept(AcceptRequest(tenant.id, uuid.uuid4().hex, DocumentIn("an invoice")))
    [lease] = await store.claim("w")
    await store.succeed(lease, result=result)
    return lease.job_id


async def job(pool: asyncpg.Pool, job_id: uuid.UUID) -> tuple[str, list[dict[str, Any]]]:
    """(state, validation reasons) of a job."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT j.state, r.validation FROM extraction_jobs j"
            " JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1",
            job_id,
        )
    return row["state"], row["validation"].get("reasons") or []


async def approve(
    pool: asyncpg.Pool, store: JobStore, tenant: Tenant, job_id: uuid.UUID
) -> ReviewDecided | None:
    """A reviewer of ``tenant`` approves ``job_id`` at the state version it has now."""
    async with pool.acquire() as conn:
        key_id, _ = await create_api_key(conn, tenant.id, scopes=("review",))
        async with conn.transaction():
            version = await conn.fetchval(
                "SELECT state_version FROM extraction_jobs WHERE id = $1", job_id
            )
            return await store.decide_review(
                conn,
                job_id=job_id,
                tenant_id=tenant.id,
                key_id=key_id,
                decision="approve",
                note="the correction replaces the first issue",
                state_version=version,
            )


async def versions(pool: asyncpg.Pool, tenant: Tenant) -> list[tuple[int, Any, Any, Any]]:
    """(version, job, supersedes, superseded_by) of the tenant's invoice versions."""
    rows = await fetch(
        pool,
        "SELECT version, job_id, supersedes, superseded_by FROM invoice_versions"
        " WHERE tenant_id = $1 ORDER BY version",
        tenant.id,
    )
    return [(r["version"], r["job_id"], r["supersedes"], r["superseded_by"]) for r in rows]


@pytest.mark.parametrize(
    ("second", "marker"),
    [
        (invoice(date="2026-11-20"), "newer_issue_date"),
        (invoice(gross="1300.00", date="2026-11-20"), "newer_issue_date"),
        (invoice(document_title={"value": "Rechnungskorrektur"}), "title:rechnungskorrektur"),
        (invoice(gross="99.00", document_title={"value": "Corrected invoice"}), "title:corrected"),
        (invoice(preceding_invoice={"value": "INV-0042"}), "preceding_invoice"),
    ],
)
async def test_a_later_version_goes_to_review_naming_the_earlier_job(
    pool: asyncpg.Pool, second: dict[str, Any], marker: str
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    first = await settle(store, tenant, invoice())
    later = await settle(store, tenant, second)
    state, reasons = await job(pool, later)
    assert (await job(pool, first))[0] == "SUCCEEDED"
    assert state == "REVIEW_REQUIRED"
    [reason] = reasons
    assert reason["code"] == "possible_amendment"
    assert (reason["other_job_id"], reason["version"], reason["marker"]) == (str(first), 1, marker)
    # Nothing superseded until a reviewer says so; the earlier job stays the current version.
    assert await versions(pool, tenant) == [(1, first, None, None)]


#: The title rule's reason for a page titled as a corrected invoice, read from its text.
CORRECTED_PAGE = {
    "decision": "REVIEW_REQUIRED",
    "reasons": [
        {
            "code": "credit_note_unsupported_on_text",
            "field": "document_type",
            "detail": "the page is titled 'Rechnungskorrektur Nr. 5'",
            "rule": "validation.correction_title",
        }
    ],
}


async def test_a_page_titled_as_a_correction_names_the_invoice_it_amends(
    pool: asyncpg.Pool,
) -> None:
    """A result read from the text holds no title: the title rule's reason is its marker,
    so a corrected invoice with the same issue date names the job it amends, alone
    and in a batch."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    first = await settle(store, tenant, invoice())
    await store.accept(AcceptRequest(tenant.id, "one", DocumentIn("the correction")))
    [lease] = await store.claim("w")
    await store.succeed(
        lease, result=invoice(), validation=CORRECTED_PAGE, decision=JobState.REVIEW_REQUIRED
    )
    for i in range(2):
        await store.accept(AcceptRequest(tenant.id, f"b{i}", DocumentIn(f"doc {i}")))
    a, b = await store.claim("w", limit=2)
    await store.succeed_many(
        [
            Success(a, result=invoice(), validation=CORRECTED_PAGE,
                    decision=JobState.REVIEW_REQUIRED),
            Success(b, result=invoice(number="INV-0099")),
        ]
    )  # fmt: skip
    for later in (lease.job_id, a.job_id):
        state, reasons = await job(pool, later)
        assert state == "REVIEW_REQUIRED"
        assert [r["code"] for r in reasons] == [
            "credit_note_unsupported_on_text",
            "possible_amendment",
        ]
        assert (reasons[1]["other_job_id"], reasons[1]["marker"]) == (
            str(first),
            "printed_correction_title",
        )
    assert (await job(pool, b.job_id))[0] == "SUCCEEDED"
    # Without the title's reason the same result is the same invoice again.
    again = await settle(store, tenant, invoice())
    assert [r["code"] for r in (await job(pool, again))[1]] == ["duplicate_invoice"]


@pytest.mark.parametrize(
    ("second", "code"),
    [
        (invoice(), "duplicate_invoice"),  # the same invoice again
        (invoice(gross="1300.00"), "possible_duplicate"),  # another total, same date
        (invoice(date="2026-10-01"), "duplicate_invoice"),  # an older issue date
    ],
)
async def test_the_same_issue_date_stays_a_duplicate(
    pool: asyncpg.Pool, second: dict[str, Any], code: str
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    await policy(pool, tenant, "auto_supersede")  # not an amendment either way
    first = await settle(store, tenant, invoice())
    later = await settle(store, tenant, second)
    state, [reason] = await job(pool, later)
    assert (state, reason["code"], reason["other_job_id"]) == ("REVIEW_REQUIRED", code, str(first))
    assert await versions(pool, tenant) == [(1, first, None, None)]


async def test_another_document_type_or_number_is_another_invoice(pool: asyncpg.Pool) -> None:
    """Neither is a version of the first: each is version 1 of its own identity (the
    duplicate checks, which know no document type, still see the credit note)."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    first = await settle(store, tenant, invoice())
    credit = await settle(
        store, tenant, invoice(gross="10.00", date="2026-11-20", document_type="credit_note")
    )
    other = await settle(store, tenant, invoice(number="INV-0043", date="2026-11-20"))
    assert (await job(pool, other))[0] == "SUCCEEDED"
    assert "possible_amendment" not in [r["code"] for r in (await job(pool, credit))[1]]
    rows = await fetch(
        pool,
        "SELECT job_id, document_type, version FROM invoice_versions WHERE tenant_id = $1",
        tenant.id,
    )
    assert {(r["job_id"], r["document_type"], r["version"]) for r in rows} == {
        (first, "invoice", 1),
        (credit, "credit_note", 1),
        (other, "invoice", 1),
    }


async def test_auto_supersede_makes_the_later_job_the_next_version(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    await policy(pool, tenant, "auto_supersede")
    first = await settle(store, tenant, invoice())
    second = await settle(store, tenant, invoice(date="2026-11-20"))
    third = await settle(store, tenant, invoice(gross="1300.00", date="2026-11-25"))
    assert [(await job(pool, j)) for j in (second, third)] == [("SUCCEEDED", [])] * 2
    assert await versions(pool, tenant) == [
        (1, first, None, second),
        (2, second, first, third),
        (3, third, second, None),
    ]
    # A copy of a superseded version is still held, by the current one.
    copy = await settle(store, tenant, invoice())
    state, [reason] = await job(pool, copy)
    assert (state, reason["other_job_id"]) == ("REVIEW_REQUIRED", str(third))


async def test_two_versions_racing_decide_once(pool: asyncpg.Pool) -> None:
    """Two amendments of one invoice commit at once, many times over: each time exactly
    one supersedes the first version; the other decides against the winner (the same
    newer date, so a duplicate of it), and the first version is superseded once."""
    store = JobStore(pool, Settings())
    for round_ in range(RACE_ROUNDS):
        tenant = await new_tenant(pool)
        await policy(pool, tenant, "auto_supersede")
        first = await settle(store, tenant, invoice())
        for i in range(2):
            await store.accept(AcceptRequest(tenant.id, f"v{i}", DocumentIn(f"version {i}")))
        leases = await store.claim("w", limit=2)
        gross = ("1300.00", "1300.00") if round_ % 2 else ("1300.00", "1400.00")
        settled = await asyncio.gather(
            *(
                store.succeed(lease, result=invoice(gross=g, date="2026-11-20"))
                for lease, g in zip(leases, gross, strict=True)
            )
        )
        winners = [s.job_id for s in settled if s.state is JobState.SUCCEEDED]
        assert len(winners) == 1, f"round {round_}: {settled}"
        [winner] = winners
        [loser] = [s.job_id for s in settled if s.job_id != winner]
        state, [reason] = await job(pool, loser)
        assert state == "REVIEW_REQUIRED"
        assert reason["code"] == ("duplicate_invoice" if round_ % 2 else "possible_duplicate")
        assert reason["other_job_id"] == str(winner)
        assert await versions(pool, tenant) == [(1, first, None, winner), (2, winner, first, None)]


async def test_two_approved_amendments_supersede_once(pool: asyncpg.Pool) -> None:
    """Two possible amendments of one version, approved at once: one supersedes it, the
    other's approval is refused (VersionConflict) and changes nothing."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    first = await settle(store, tenant, invoice())
    a = await settle(store, tenant, invoice(date="2026-11-20"))
    b = await settle(store, tenant, invoice(gross="1300.00", date="2026-11-21"))

    outcomes = await asyncio.gather(
        approve(pool, store, tenant, a), approve(pool, store, tenant, b), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["ReviewDecided", "VersionConflict"]
    [won] = [j for j, o in zip((a, b), outcomes, strict=True) if not isinstance(o, Exception)]
    [lost] = [j for j in (a, b) if j != won]
    assert isinstance(outcomes[(a, b).index(lost)], VersionConflict)
    assert [(await job(pool, j))[0] for j in (won, lost)] == ["SUCCEEDED", "REVIEW_REQUIRED"]
    assert await versions(pool, tenant) == [(1, first, None, won), (2, won, first, None)]


@pytest.mark.parametrize("rule", ["review", "auto_supersede"])
async def test_a_batch_decides_versions_as_one_at_a_time_does(
    pool: asyncpg.Pool, rule: str
) -> None:
    """Group commit runs the version step too: a possible amendment in a batch is held
    (review) or supersedes (auto_supersede, with the supersede delivery created and
    the new version's delivery held behind it); the rest of the batch is untouched."""
    store = job_store(pool)
    tenant = await new_tenant(pool)
    await policy(pool, tenant, rule)
    await registry_for(pool).register(tenant.id, "http://127.0.0.1:9/erp")
    first = await settle(store, tenant, invoice())
    for i in range(2):
        await store.accept(AcceptRequest(tenant.id, f"b{i}", DocumentIn(f"doc {i}")))
    a, b = await store.claim("w", limit=2)
    batch = await store.succeed_many(
        [
            Success(a, result=invoice(date="2026-11-20")),
            Success(b, result=invoice(number="INV-0099")),
        ]
    )
    by_job = {s.job_id: s for s in batch.settled}
    assert by_job[b.job_id].state is JobState.SUCCEEDED
    deliveries = await fetch(
        pool,
        "SELECT job_id, event_type, after_id IS NOT NULL AS held FROM deliveries"
        " WHERE tenant_id = $1 AND job_id <> $2",
        tenant.id,
        b.job_id,
    )
    got = {(r["job_id"], r["event_type"], r["held"]) for r in deliveries}
    if rule == "review":
        state, [reason] = await job(pool, a.job_id)
        assert (state, reason["code"]) == ("REVIEW_REQUIRED", "possible_amendment")
        assert got == {(first, EVENT_COMPLETED, False)}
        assert set(await versions(pool, tenant)) == {
            (1, first, None, None),
            (1, b.job_id, None, None),
        }
        return
    assert by_job[a.job_id].state is JobState.SUCCEEDED
    assert by_job[a.job_id].supersedes == first
    assert got == {
        (first, EVENT_COMPLETED, False),
        (first, EVENT_SUPERSEDED, False),
        (a.job_id, EVENT_COMPLETED, True),
    }


async def test_an_auto_superseding_job_held_for_another_reason_withdraws_on_approval(
    pool: asyncpg.Pool,
) -> None:
    """Under auto_supersede a later version that validation holds for review supersedes
    at commit; the ERP hears of it when a reviewer approves: the old job's withdrawal,
    then the new job, as for an approved possible amendment."""
    store = job_store(pool)
    tenant = await new_tenant(pool)
    await policy(pool, tenant, "auto_supersede")
    await registry_for(pool).register(tenant.id, "http://127.0.0.1:9/erp")
    first = await settle(store, tenant, invoice())
    await store.accept(AcceptRequest(tenant.id, "held", DocumentIn("a later version")))
    [lease] = await store.claim("w")
    await store.succeed(
        lease,
        result=invoice(date="2026-11-20"),
        validation={"reasons": [{"code": "arithmetic"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    assert await versions(pool, tenant) == [
        (1, first, None, lease.job_id),
        (2, lease.job_id, first, None),
    ]
    decided = await approve(pool, store, tenant, lease.job_id)
    assert decided is not None and decided.settled.supersedes == first
    rows = await fetch(
        pool,
        "SELECT job_id, event_type, after_id IS NOT NULL AS held FROM deliveries"
        " WHERE tenant_id = $1",
        tenant.id,
    )
    assert {(r["job_id"], r["event_type"], r["held"]) for r in rows} == {
        (first, EVENT_COMPLETED, False),
        (first, EVENT_SUPERSEDED, False),
        (lease.job_id, EVENT_COMPLETED, True),
    }


async def test_a_superseded_version_waiting_for_review_cannot_be_approved(
    pool: asyncpg.Pool,
) -> None:
    """The first version waits for review (validation); a later one is approved and
    supersedes it; approving the first now would deliver an outdated invoice, so it is
    refused and stays in review (a reviewer rejects it)."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    await store.accept(AcceptRequest(tenant.id, "v1", DocumentIn("the first issue")))
    [lease] = await store.claim("w")
    await store.succeed(
        lease,
        result=invoice(),
        validation={"reasons": [{"code": "arithmetic"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    later = await settle(store, tenant, invoice(date="2026-11-20"))
    assert (await approve(pool, store, tenant, later)) is not None
    with pytest.raises(VersionConflict, match=f"superseded by job {later}"):
        await approve(pool, store, tenant, lease.job_id)
    assert (await job(pool, lease.job_id))[0] == "REVIEW_REQUIRED"


async def test_a_late_approval_over_the_api_is_409_version_conflict(
    pool: asyncpg.Pool, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two possible amendments of one version: the first approval over the API
    supersedes it; the second is 409 ``version_conflict`` and leaves its job in review."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    store = JobStore(pool, Settings())
    first = await settle(store, tk.tenant, invoice())
    a = await settle(store, tk.tenant, invoice(date="2026-11-20"))
    b = await settle(store, tk.tenant, invoice(date="2026-11-21"))
    monkeypatch.setenv("FENCELINE_DATABASE_URL", dsn)
    app = app_from_env()
    answers = []
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        for job_id in (a, b):
            version = (
                await fetch(pool, "SELECT state_version FROM extraction_jobs WHERE id = $1", job_id)
            )[0]["state_version"]
            answers.append(
                await c.post(
                    f"/v1/extraction-jobs/{job_id}/review",
                    json={"decision": "approve", "note": "ok", "state_version": version},
                    headers=tk.headers,
                )
            )
    assert [r.status_code for r in answers] == [200, 409], [r.text for r in answers]
    assert answers[1].json()["reason"] == "version_conflict"
    assert [(await job(pool, j))[0] for j in (a, b)] == ["SUCCEEDED", "REVIEW_REQUIRED"]
    assert await versions(pool, tk.tenant) == [(1, first, None, a), (2, a, first, None)]


async def erp_rows(pool: asyncpg.Pool, ledger: str) -> list[tuple[str, Any, Any]]:
    """(event type, job of a posting or superseded job, superseded by) in ERP arrival order."""
    rows = await fetch(
        pool,
        "SELECT i.event_type, coalesce(i.job_id, s.job_id) AS job, s.superseded_by"
        " FROM erp_inbox i LEFT JOIN erp_supersessions s"
        "   ON s.ledger = i.ledger AND s.delivery_id = i.delivery_id"
        " WHERE i.ledger = $1 ORDER BY i.received_at, i.delivery_id",
        ledger,
    )
    return [(r["event_type"], r["job"], r["superseded_by"]) for r in rows]


@pytest.mark.parametrize("path", ["auto_supersede", "review"])
async def test_the_erp_receives_the_supersede_before_the_new_version(
    pool: asyncpg.Pool, dsn: str, path: str
) -> None:
    """The corrected invoice has the same total, so the reference ERP, which refuses a
    second posting of one supplier invoice, posts it only after the withdrawal of the
    first: the new version's delivery is held until the supersede is delivered."""
    store = job_store(pool)
    tenant = await new_tenant(pool)
    await policy(pool, tenant, path if path == "auto_supersede" else "review")
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    with receiver as erp:
        dispatcher = dispatcher_for(pool, per_endpoint_concurrency=4)
        first = await settle(store, tenant, invoice())
        assert (await dispatcher.run_once()).count("delivered") == 1
        corrected = invoice(document_title={"value": "Rechnungskorrektur"})
        second = await settle(store, tenant, corrected)
        if path == "review":
            assert (await job(pool, second))[0] == "REVIEW_REQUIRED"
            assert (await dispatcher.run_once()).claimed == 0  # nothing before review
            decided = await approve(pool, store, tenant, second)
            assert decided is not None and decided.settled.supersedes == first
        pending = await fetch(
            pool,
            "SELECT job_id, event_type, after_id IS NOT NULL AS held FROM deliveries"
            " WHERE tenant_id = $1 AND state = 'pending' ORDER BY event_type",
            tenant.id,
        )
        assert [(r["job_id"], r["event_type"], r["held"]) for r in pending] == [
            (second, EVENT_COMPLETED, True),
            (first, EVENT_SUPERSEDED, False),
        ]
        # One pass with room for both: only the withdrawal goes; the new version waits.
        assert (await dispatcher.run_once()).count("delivered") == 1
        assert (await dispatcher.run_once()).count("delivered") == 1
        await dispatcher.close()
        ledger = erp.ledger
        assert erp.stats.results.get("duplicate_invoice", 0) == 0
    assert await erp_rows(pool, ledger) == [
        (EVENT_COMPLETED, first, None),
        (EVENT_SUPERSEDED, first, second),
        (EVENT_COMPLETED, second, None),
    ]
    posted = await fetch(
        pool,
        "SELECT job_id, posted_at IS NOT NULL AS posted, superseded_by FROM erp_postings"
        " WHERE ledger = $1 ORDER BY accepted_at",
        ledger,
    )
    assert [(p["job_id"], p["posted"], p["superseded_by"]) for p in posted] == [
        (first, True, second),
        (second, True, None),
    ]
    [body] = await fetch(
        pool, "SELECT body FROM deliveries WHERE event_type = $1", EVENT_SUPERSEDED
    )
    data = json.loads(bytes(body["body"]))["data"]
    assert (data["job_id"], data["superseded_by"], data["version"]) == (
        str(first),
        str(second),
        2,
    )


async def test_an_operator_sets_the_version_policy_with_the_cli(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await new_tenant(pool)

    def fenceline(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cluster.cli", "tenants", "version-policy", *args],
            env={**os.environ, "FENCELINE_DATABASE_URL": dsn},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = fenceline("--tenant-id", str(tenant.id), "auto_supersede")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["invoice_version_policy"] == "auto_supersede"
    refused = fenceline("--tenant-id", str(tenant.id), "sometimes")
    assert refused.returncode == 2
    policy = await fetch(
        pool, "SELECT invoice_version_policy AS p FROM tenants WHERE id = $1", tenant.id
    )
    assert policy == [{"p": "auto_supersede"}]
