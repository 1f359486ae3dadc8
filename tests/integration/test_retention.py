"""Retention (issue 46, item 1): the pass removes what each tenant's policy says,
from final jobs old enough only, in bounded batches, once; legal holds stop it;
a dry run writes nothing; explain says what went and when; the CLI drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.clock import ManualClock
from pipeline.jobs import (
    JobStore,
    RetentionConfig,
    clear_legal_hold,
    render_explain,
    retention_due,
    run_retention,
    set_legal_hold,
    set_retention_policy,
)
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Tenant
from tests.support.api import (
    asgi_client,
    assert_problem,
    loopback_server,
    settings_for,
    tenant_with_key,
)
from tests.support.console import (
    approve_line_amount,
    invoice_awaiting_review,
    misread_line_amount,
)
from tests.support.delivery import job_store, registry_for
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration

DAY = 86400.0


def later(days: float) -> ManualClock:
    """A clock ``days`` from now (the jobs below finish at the database's now())."""
    return ManualClock(datetime.now(UTC) + timedelta(days=days))


async def settle(
    store: JobStore, tenant: Tenant, n: int, *, decision: JobState = JobState.SUCCEEDED
) -> list[uuid.UUID]:
    """Accept, claim and settle ``n`` jobs of ``tenant`` with a planted result."""
    done: list[uuid.UUID] = []
    for _ in range(n):
        accepted = await store.accept(request(tenant, text=f"INVOICE {uuid.uuid4().hex} IBAN"))
        [lease] = await store.claim(f"w-{accepted.job_id}")
        assert lease.job_id == accepted.job_id
        await store.succeed(
            lease,
            result={"invoice_number": f"PLANTED-{lease.job_id}"},
            validation={"reasons": [{"rule": "x", "value": "PLANTED"}]},
            decision=decision,
        )
        done.append(lease.job_id)
    return done


async def content_of(pool: asyncpg.Pool, job: uuid.UUID) -> dict[str, Any]:
    """What of the job's content and skeleton is there now."""
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT j.state, j.request_hash, d.sha256, d.content, r.result, r.decision,
                      (SELECT count(*) FROM job_events e WHERE e.job_id = j.id) AS events,
                      (SELECT count(*) FROM job_retention_marks m WHERE m.job_id = j.id) AS marks
               FROM extraction_jobs j JOIN documents d ON d.id = j.document_id
               LEFT JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1""",
            job,
        )
    assert row is not None
    return dict(row.items())


async def test_the_pass_removes_content_of_final_jobs_past_the_horizon_only(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    done = await settle(store, tenant, 3)
    [review] = await settle(store, tenant, 1, decision=JobState.REVIEW_REQUIRED)
    unsettled = {
        (await store.accept(request(tenant, text=f"INVOICE open {n}"))).job_id for n in (1, 2)
    }
    [lease] = await store.claim("w-running")  # one RUNNING, the other READY
    [waiting] = unsettled - {lease.job_id}
    running = lease.job_id
    config = RetentionConfig()

    young = await run_retention(pool, config, tenant=tenant.id, clock=later(29))
    assert young.content_jobs == 0 and young.rows == 0

    report = await run_retention(pool, config, tenant=tenant.id, clock=later(31))
    assert report.content_jobs == 3
    assert (report.results, report.documents) == (3, 3)
    for job in done:
        now = await content_of(pool, job)
        assert now["content"] is None and now["result"] == {}
        # The audit skeleton stays: state, digests, decision, events.
        assert now["state"] == "SUCCEEDED" and len(now["sha256"]) == 64
        assert now["request_hash"] and now["decision"] == "SUCCEEDED"
        assert now["events"] >= 3 and now["marks"] == 1
    for job in (review, waiting, running):
        kept = await content_of(pool, job)
        assert kept["content"] is not None and kept["marks"] == 0
    assert "PLANTED" in json.dumps((await content_of(pool, review))["result"])


async def test_a_finished_delivery_loses_its_payload_copy_and_keeps_its_digest(
    pool: asyncpg.Pool,
) -> None:
    store = job_store(pool)
    tenant = await new_tenant(pool)
    await registry_for(pool).register(tenant.id, "http://127.0.0.1:9/erp")
    [finished, pending] = await settle(store, tenant, 2)
    async with pool.acquire() as conn:  # finished: never to be sent again
        await conn.execute(
            "UPDATE deliveries SET state = 'abandoned', final_reason = 'endpoint_gone'"
            " WHERE job_id = $1",
            finished,
        )
    report = await run_retention(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert report.delivery_payloads == 1
    async with pool.acquire() as conn:
        rows = {
            r["job_id"]: (bytes(r["body"]), r["body_sha256"])
            for r in await conn.fetch("SELECT job_id, body, body_sha256 FROM deliveries")
        }
    assert rows[finished][0] == b"" and len(rows[finished][1]) == 64
    assert b"PLANTED" in rows[pending][0]  # a delivery not yet sent keeps its payload


async def test_legal_holds_stop_the_pass_until_released_and_explain_shows_both(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    [held, free] = await settle(store, tenant, 2)
    other = await new_tenant(pool)
    [other_job] = await settle(store, other, 1)
    config = RetentionConfig()
    assert await set_legal_hold(pool, tenant.id, job=held, reason="case 7", actor="op:ann")
    assert not await set_legal_hold(pool, tenant.id, job=held, reason="again", actor="op:ann")
    assert await set_legal_hold(pool, other.id, reason="audit 2026", actor="op:bob")

    report = await run_retention(pool, config, clock=later(31))
    assert report.content_jobs == 1
    assert (await content_of(pool, free))["marks"] == 1
    assert (await content_of(pool, held))["content"] is not None
    assert (await content_of(pool, other_job))["content"] is not None

    assert await clear_legal_hold(pool, tenant.id, job=held, reason="closed", actor="op:ann")
    assert not await clear_legal_hold(pool, tenant.id, job=held, reason="x", actor="op:ann")
    assert await clear_legal_hold(pool, other.id, reason="done", actor="op:bob")
    again = await run_retention(pool, config, clock=later(31))
    assert again.content_jobs == 2
    text = render_explain(await store.explain(held))
    assert "legal hold (job) set by op:ann: case 7" in text
    assert "legal hold (job) cleared by op:ann: closed" in text
    assert "content removed by retention at" in text
    assert "legal hold (tenant) set by op:bob" in render_explain(await store.explain(other_job))


async def test_batches_are_bounded_and_a_second_pass_removes_nothing(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    await settle(store, tenant, 7)
    config = RetentionConfig(batch=3)
    first = await run_retention(pool, config, tenant=tenant.id, clock=later(31))
    assert first.content_jobs == 7
    assert first.content_batches == 3 and first.largest_batch == 3
    second = await run_retention(pool, config, tenant=tenant.id, clock=later(31))
    assert second.content_jobs == 0 and second.rows == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM job_retention_marks") == 7


async def test_a_paced_pass_waits_its_ratio_of_each_batch_between_batches(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    await settle(store, tenant, 7)
    config = RetentionConfig(batch=3, pause_ratio=2.0)
    report = await run_retention(pool, config, tenant=tenant.id, clock=later(31))
    assert report.content_jobs == 7 and report.content_batches == 3
    # Between the three content batches only: none after the last, none for the
    # audit stage's one empty batch.
    first, second = report.batch_seconds[:2]
    assert report.paused_seconds == pytest.approx(2.0 * (first + second))
    assert report.seconds >= report.paused_seconds
    with pytest.raises(ValueError, match="pause_ratio"):
        RetentionConfig(pause_ratio=-1)


async def test_each_tenant_has_its_own_horizons_and_the_audit_stage_follows(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    short, default = await new_tenant(pool), await new_tenant(pool)
    [s_job] = await settle(store, short, 1)
    [d_job] = await settle(store, default, 1)
    await set_retention_policy(pool, short.id, 7, 60)
    config = RetentionConfig()

    at_10 = await run_retention(pool, config, clock=later(10))
    assert at_10.content_jobs == 1
    assert (await content_of(pool, s_job))["marks"] == 1
    assert (await content_of(pool, d_job))["marks"] == 0

    at_61 = await run_retention(pool, config, clock=later(61))
    assert at_61.content_jobs == 1 and at_61.audit_jobs == 1
    assert (await content_of(pool, s_job))["events"] == 0
    assert (await content_of(pool, d_job))["events"] > 0
    at_366 = await run_retention(pool, config, clock=later(366))
    assert at_366.audit_jobs == 1 and at_366.job_events > 0
    assert (await content_of(pool, d_job))["events"] == 0
    text = render_explain(await store.explain(d_job))
    assert "audit history removed by retention at" in text


async def test_a_dry_run_counts_what_the_pass_removes_and_writes_nothing(
    pool: asyncpg.Pool,
) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    await settle(store, tenant, 4)

    async def snapshot() -> list[Any]:
        async with pool.acquire() as conn:
            return [
                await conn.fetchval("SELECT count(*) FROM job_retention_marks"),
                await conn.fetchval("SELECT count(*) FROM documents WHERE content IS NOT NULL"),
                await conn.fetchval("SELECT count(*) FROM extraction_results WHERE result <> '{}'"),
            ]

    before = await snapshot()
    dry = await retention_due(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert await snapshot() == before == [0, 4, 4]
    real = await run_retention(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert (dry.content_jobs, dry.results, dry.documents) == (4, 4, 4)
    assert (real.content_jobs, real.results, real.documents) == (4, 4, 4)


async def test_a_shared_document_keeps_its_text_while_a_job_needs_it(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    text = "INVOICE shared 77"
    first = await store.accept(request(tenant, text=text))
    [lease] = await store.claim("w")
    await store.succeed(lease, result={"invoice_number": "A"})
    await store.accept(request(tenant, text=text))  # the same document, still READY
    await run_retention(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert (await content_of(pool, first.job_id))["content"] == text
    # Content removed, then the same bytes accepted again: the text comes back.
    [lease] = await store.claim("w2")
    await store.succeed(lease, result={"invoice_number": "B"})
    await run_retention(pool, RetentionConfig(), tenant=tenant.id, clock=later(31))
    assert (await content_of(pool, first.job_id))["content"] is None
    third = await store.accept(request(tenant, text=text))
    assert (await content_of(pool, third.job_id))["content"] == text


def fenceline(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FENCELINE_DATABASE_URL": dsn}
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_the_cli_shows_runs_dry_and_holds(pool: asyncpg.Pool, dsn: str) -> None:
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant = await new_tenant(pool)
    [held, free] = await settle(store, tenant, 2)
    async with pool.acquire() as conn:  # ended 40 days ago, as far as retention can tell
        await conn.execute(
            "UPDATE extraction_jobs SET finished_at = now() - interval '40 days'"
            " WHERE tenant_id = $1",
            tenant.id,
        )
    who = ("--tenant", tenant.name)
    hold = fenceline("retention", "hold", *who, "--job", str(held), "--reason", "x", dsn=dsn)
    assert hold.returncode == 0, hold.stderr
    assert (
        fenceline(
            "retention", "hold", *who, "--job", str(held), "--reason", "x", dsn=dsn
        ).returncode
        == 3
    )

    show = fenceline("retention", "show", *who, dsn=dsn)
    assert show.returncode == 0, show.stderr
    shown = json.loads(show.stdout)
    assert shown["policy"]["content_days"] == 30 and shown["policy"]["own"] is False
    assert [h["job_id"] for h in shown["held_jobs"]] == [str(held)]
    assert shown["due"]["content_jobs"] == 1 and shown["due"]["results"] == 1

    dry = fenceline("retention", "run", *who, "--dry-run", dsn=dsn)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["content_jobs"] == 1
    assert (await content_of(pool, free))["marks"] == 0

    ran = fenceline("retention", "run", *who, dsn=dsn)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["content_jobs"] == 1
    assert (await content_of(pool, free))["content"] is None
    assert (await content_of(pool, held))["content"] is not None

    policy = fenceline(
        "retention", "policy", *who, "--content-days", "5", "--audit-days", "90", dsn=dsn
    )
    assert policy.returncode == 0, policy.stderr
    assert json.loads(policy.stdout)["content_days"] == 5


async def test_the_result_of_a_job_whose_content_went_is_410(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    [gone, kept] = await settle(store, tk.tenant, 2)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET finished_at = now() - interval '40 days' WHERE id = $1",
            gone,
        )
    await run_retention(pool, RetentionConfig(), tenant=tk.tenant.id)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r_gone = await client.get(f"/v1/extraction-jobs/{gone}/result", headers=tk.headers)
        r_kept = await client.get(f"/v1/extraction-jobs/{kept}/result", headers=tk.headers)
    body = assert_problem(r_gone, 410, "content_removed")
    assert "removed by retention at" in body["detail"] and "PLANTED" not in r_gone.text
    assert r_kept.status_code == 200 and "PLANTED" in r_kept.text


async def test_the_audit_stage_removes_kafka_records_with_the_job_and_refused_ones_by_age(
    pool: asyncpg.Pool,
) -> None:
    """A Kafka record (pipeline/messaging/kafka_ingress.py) goes with its job's audit
    history; one refused without a job goes once its tenant's audit horizon passed
    since it was received; a tenant under legal hold keeps both."""
    store = JobStore(pool, Settings(duplicate_invoice_check=False))
    tenant, held = await new_tenant(pool), await new_tenant(pool)
    [job] = await settle(store, tenant, 1)
    [held_job] = await settle(store, held, 1)
    async with pool.acquire() as conn:
        for who, jid in ((tenant, job), (held, held_job)):
            await conn.execute(
                "INSERT INTO kafka_ingress_records (tenant_id, topic, kafka_partition,"
                " kafka_offset, job_id, outcome, reason) VALUES"
                " ($1, 'invoices', 0, 0, $2, 'accepted', NULL),"
                " ($1, 'invoices', 0, 1, NULL, 'refused', 'not_json')",
                who.id,
                jid,
            )

    async def records(who: Tenant) -> list[int]:
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT kafka_offset FROM kafka_ingress_records WHERE tenant_id = $1"
                " ORDER BY kafka_offset",
                who.id,
            )
        return [r["kafka_offset"] for r in rows]

    await set_legal_hold(pool, held.id, reason="audit 2026", actor="op:bob")
    config = RetentionConfig()
    assert (await run_retention(pool, config, clock=later(31))).inbox_records == 0
    assert await records(tenant) == [0, 1]  # content went; the audit history stays
    dry = await retention_due(pool, config, tenant=tenant.id, clock=later(366))
    assert dry.inbox_records == 2
    late = await run_retention(pool, config, clock=later(366))
    assert late.audit_jobs == 1 and late.inbox_records == 2
    assert await records(tenant) == []
    assert await records(held) == [0, 1]
    async with pool.acquire() as conn:
        marked = await conn.fetchval(
            "SELECT inbox_records FROM job_retention_marks WHERE job_id = $1", job
        )
    assert marked == 1


async def test_what_reviewers_wrote_goes_with_the_content_and_which_fields_stay(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """A line amount misread, corrected in the console and approved: past the content
    horizon the correction's values before and after and its reasons' details go (as
    erasure empties them), which field changed stays, and explain says so."""
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        job = await invoice_awaiting_review(pool, c, tk, misread=misread_line_amount)
        right = str(job.invoice.truth.line_items[0].line_amount)
        r = await approve_line_amount(c, tk, job, right)
        assert r.status_code == 303, r.text

    async def reviewed() -> tuple[Any, list[str | None]]:
        async with pool.acquire() as conn:
            changes = await conn.fetchval(
                "SELECT changes FROM review_corrections WHERE job_id = $1", job.job_id
            )
            notes = await conn.fetch(
                "SELECT note FROM review_decisions WHERE job_id = $1", job.job_id
            )
        return changes, [n["note"] for n in notes]

    changes, _ = await reviewed()
    assert right in json.dumps(changes)  # the values are there before the pass
    due = await retention_due(pool, RetentionConfig(), tenant=tk.tenant.id, clock=later(31))
    report = await run_retention(pool, RetentionConfig(), tenant=tk.tenant.id, clock=later(31))
    assert report.review_corrections == due.review_corrections == 1
    assert report.review_decisions == due.review_decisions
    changes, notes = await reviewed()
    assert changes == [{"field": "line_items[0].line_amount"}]
    assert all(n == "(removed by retention)" for n in notes)
    text = render_explain(await JobStore(pool).explain(job.job_id))
    assert "line_items[0].line_amount: (values removed)" in text
    assert "review corrections 1" in text
    again = await run_retention(pool, RetentionConfig(), tenant=tk.tenant.id, clock=later(31))
    assert again.review_corrections == 0 and again.rows == 0
