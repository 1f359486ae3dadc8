"""Drivers end to end over the fake provider (real HTTP on loopback) and real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from benchmarks.fake_provider import FakeProvider
from benchmarks.invoices.generator import (
    GeneratedInvoice,
    Variant,
    generate_corpus,
    generate_invoice,
)
from pipeline.extraction import (
    OpenAICompatibleEngine,
    answer_for,
    document_in_prompt,
    shown_document,
)
from pipeline.invoice import ReasonCode
from pipeline.jobs import AcceptRequest, DocumentIn, JobStore
from pipeline.retry import RetryPolicy
from pipeline.settings import Settings
from pipeline.tenants import MasterDataCache, create_api_key, upsert_supplier
from pipeline.validation import VALIDATION_POLICY_VERSION
from pipeline.validation.policy import MALFORMED_OUTPUT
from pipeline.worker import AttemptRunner, DriverLoop, WorkerConfig
from tests.support.drivers import answer_from_corpus, submit_corpus, wait_settled
from tests.support.jobs import new_tenant
from tests.support.outbound import Listener, connects_to, outbound

pytestmark = pytest.mark.integration

TODAY = datetime.now(UTC).date()

VARIANTS = (
    Variant.CLEAN,
    Variant.ARITHMETIC_OFF_BY_CENT,
    Variant.HOMOGLYPH_SUPPLIER,
    Variant.INVENTED_IBAN,
    Variant.PROMPT_INJECTION,
    Variant.FABRICATED_EVIDENCE,
)


def fast_store(pool: asyncpg.Pool) -> JobStore:
    policy = RetryPolicy(
        max_attempts=4, base_seconds=0.05, cap_seconds=0.2, next_attempt_margin_seconds=1
    )
    return JobStore(pool, Settings(lease_seconds=30), policy=policy)


async def run_drivers(
    store: JobStore,
    engine: OpenAICompatibleEngine,
    n_jobs: int,
    drivers: int = 2,
    master_data: MasterDataCache | None = None,
) -> list[asyncpg.Record]:
    loops = []
    for i in range(drivers):
        cfg = WorkerConfig(
            worker_id=f"d{i}",
            concurrency=3,
            idle_poll_seconds=0.1,
            max_output_tokens=2048,
            heartbeat_seconds=5,
        )
        loop = DriverLoop(AttemptRunner(store, engine, cfg, master_data=master_data))
        await loop.start()
        loops.append(loop)
    try:
        return await wait_settled(store.pool, n_jobs, timeout=90)
    finally:
        for loop in loops:
            await loop.stop(grace_seconds=5)


async def test_drivers_decide_each_invoice_as_validation_expects(pool: asyncpg.Pool) -> None:
    corpus = generate_corpus(18, seed=100, variants=VARIANTS, max_line_items=6, anchor=TODAY)
    store = fast_store(pool)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            rows = await run_drivers(store, engine, len(jobs))
        calls = fake.calls()
    got = {r["id"]: r["state"] for r in rows}
    for job_id, inv in jobs.items():
        assert got[job_id] == inv.expected_decision.value, (inv.variant, got[job_id])
    assert len(calls) == len(jobs)  # one provider call per job: nothing retried needlessly
    assert Counter(got.values())["SUCCEEDED"] == sum(
        1 for inv in jobs.values() if inv.expected_decision.value == "SUCCEEDED"
    )
    # Every decision names the policy version it was made under.
    assert {r["validation_policy"] for r in rows} == {VALIDATION_POLICY_VERSION}


async def test_429_storm_backs_off_and_bounds_calls(pool: asyncpg.Pool) -> None:
    corpus = generate_corpus(6, seed=7, max_line_items=3, anchor=TODAY)
    store = fast_store(pool)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        fake.set_faults({"script": [{"kind": "429", "count": 8, "retry_after": "1"}]})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            rows = await run_drivers(store, engine, len(jobs))
        calls = fake.calls()
    assert {r["state"] for r in rows} == {"SUCCEEDED"}
    per_job_max = 4
    assert len(calls) <= per_job_max * len(jobs)
    assert sum(1 for c in calls if c.status == 429) == 8
    explained = [await store.explain(j) for j in jobs]
    retried = [e for e in explained if len(e["attempts"]) > 1]
    assert retried, "the storm must have forced retries"
    for e in retried:
        a0 = e["attempts"][0]
        assert a0["outcome"] == "retry_scheduled" and a0["error_class"] == "rate_limited"
        # Retry-After: 1 is honoured: the next attempt starts at least 1 s later.
        gap = (e["attempts"][1]["started_at"] - a0["ended_at"]).total_seconds()
        assert gap >= 0.99


async def test_malformed_output_retries_then_fails_terminal(pool: asyncpg.Pool) -> None:
    corpus = generate_corpus(2, seed=3, max_line_items=2, anchor=TODAY)
    store = fast_store(pool)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    with FakeProvider(answer=lambda _body: {"not": "an invoice"}) as fake:
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            rows = await run_drivers(store, engine, len(jobs), drivers=1)
        calls = fake.calls()
    assert {r["state"] for r in rows} == {"FAILED_TERMINAL"}
    assert {r["terminal_reason"] for r in rows} == {"attempts_exhausted"}
    assert {r["last_error_class"] for r in rows} == {"malformed_output"}
    assert len(calls) == 4 * len(jobs)


async def test_malformed_output_exhausted_goes_to_review_when_settings_say_so(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """FENCELINE_MALFORMED_EXHAUSTED_STATE=review reaches the deployed driver: after the
    last malformed attempt the job awaits review holding the raw output, marked as not
    schema-valid (so review can only reject it), instead of failing terminally."""
    from cluster.drivers import EngineSpec, TaskDriver

    corpus = generate_corpus(2, seed=3, max_line_items=2, anchor=TODAY)
    settings = Settings(
        database_url=dsn,
        malformed_exhausted_state="review",
        max_attempts=3,
        retry_base_seconds=0.05,
        retry_cap_seconds=0.2,
        next_attempt_margin_seconds=1,
        lease_seconds=30,
    )
    store = JobStore(pool, settings)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    with FakeProvider(answer=lambda _body: {"not": "an invoice"}) as fake:
        driver = TaskDriver(
            settings,
            WorkerConfig(worker_id="r0", concurrency=2, idle_poll_seconds=0.1, heartbeat_seconds=5),
            EngineSpec(kind="openai", base_url=fake.base_url, model="fake-model"),
        )
        assert driver.health() == {}
        await driver.start()
        try:
            health = driver.health()
            assert list(health) == ["scheduler", "driver"]
            assert all(h["running"] for h in health.values())
            rows = await wait_settled(pool, len(jobs), timeout=90)
        finally:
            await driver.stop(grace_seconds=5)
        calls = fake.calls()
    assert {r["state"] for r in rows} == {"REVIEW_REQUIRED"}
    assert {r["attempt"] for r in rows} == {3}
    assert {r["validation_policy"] for r in rows} == {VALIDATION_POLICY_VERSION}
    assert len(calls) == 3 * len(jobs)
    async with pool.acquire() as conn:
        results = await conn.fetch(
            "SELECT result, validation, decision FROM extraction_results"
            " WHERE job_id = ANY($1::uuid[])",
            list(jobs),
        )
    assert len(results) == len(jobs)
    for r in results:
        assert r["decision"] == "REVIEW_REQUIRED"
        assert json.loads(r["result"]["raw_output"]) == {"not": "an invoice"}
        assert r["validation"]["schema_valid"] is False
        assert [x["code"] for x in r["validation"]["reasons"]] == [MALFORMED_OUTPUT]


def _answer_with(pairs: list[tuple[GeneratedInvoice, Any]]) -> Callable[[dict[str, Any]], Any]:
    """A fake-provider answer: the given answer for the document the prompt shows."""

    def answer(body: dict[str, Any]) -> Any:
        shown = document_in_prompt(body["messages"])
        found = [reply for inv, reply in pairs if shown_document(inv.ocr_text) == shown]
        return found[0] if found else "{}"

    return answer


async def test_prompt_injection_through_a_driver_changes_no_decision_and_calls_no_url(
    pool: asyncpg.Pool,
) -> None:
    """Invoices whose OCR text tells the model to fetch a loopback listener's URL go
    through real drivers (fake provider over HTTP, real PostgreSQL). The listener
    accepts no connection, the audit hook sees no connect to it from this process,
    and each decision and its reasons equal those of the same invoice without the
    injection. A model that obeys the injection (its IBAN) is caught by master data."""
    listener = Listener()
    try:
        store = fast_store(pool)
        tenant = await new_tenant(pool)
        pairs: list[tuple[GeneratedInvoice, Any]] = []
        injected, clean = [], []
        for seed, index in ((21, 0), (22, 3), (23, 5)):
            inj = generate_invoice(
                seed,
                Variant.PROMPT_INJECTION,
                injection_url=listener.url,
                injection_index=index,
                max_line_items=4,
                anchor=TODAY,
            )
            assert listener.url in inj.ocr_text
            ref = generate_invoice(seed, max_line_items=4, anchor=TODAY)
            assert listener.url not in ref.ocr_text
            pairs += [(inj, answer_for(inj.truth, inj.ocr_text))]
            pairs += [(ref, answer_for(ref.truth, ref.ocr_text))]
            injected.append(inj)
            clean.append(ref)
        obedient = generate_invoice(
            24,
            Variant.PROMPT_INJECTION,
            injection_url=listener.url,
            max_line_items=4,
            anchor=TODAY,
        )
        pairs.append((obedient, answer_for(obedient.candidate, obedient.ocr_text)))
        # Each clean twin is the same supplier invoice as its injected copy: under one
        # tenant the second to commit would be held as a duplicate, so the twins
        # belong to a tenant of their own with the same master data.
        twin = await new_tenant(pool)
        jobs = await submit_corpus(store, tenant, injected, prefix="pair")
        jobs |= await submit_corpus(store, twin, clean, prefix="pair")
        jobs |= await submit_corpus(store, tenant, [obedient], prefix="obedient")
        with outbound() as events, FakeProvider(answer=_answer_with(pairs)) as fake:
            async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
                await run_drivers(store, engine, len(jobs), drivers=1)
            assert fake.port is not None
            provider_port = fake.port
        assert listener.accepted() == 0
        assert connects_to(events, listener.port) == []
        # The hook was recording while the driver ran: it saw the calls to the provider.
        assert connects_to(events, provider_port)
    finally:
        listener.close()
    by_invoice = {}
    async with pool.acquire() as conn:
        for job_id, inv in jobs.items():
            row = await conn.fetchrow(
                "SELECT j.state, r.validation FROM extraction_jobs j"
                " JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1",
                job_id,
            )
            by_invoice[id(inv)] = (row["state"], row["validation"]["reasons"])
    for inj, ref in zip(injected, clean, strict=True):
        assert by_invoice[id(ref)][0] == "SUCCEEDED"
        assert by_invoice[id(inj)] == by_invoice[id(ref)], inj.seed
    state, reasons = by_invoice[id(obedient)]
    assert state == "REVIEW_REQUIRED"
    assert ReasonCode.IBAN_NOT_REGISTERED.value in {r["code"] for r in reasons}


async def test_suppliers_added_later_are_seen_after_the_master_data_ttl(
    pool: asyncpg.Pool,
) -> None:
    """A driver re-reads a tenant's master data once its cached copy is older than the
    TTL: a supplier added after the first job is unknown only until then."""
    now = [1000.0]
    cache = MasterDataCache(30.0, clock=lambda: now[0])
    inv = generate_invoice(31, max_line_items=3, anchor=TODAY)
    store = fast_store(pool)
    tenant = await new_tenant(pool, allowed_currencies=(inv.currency,))
    seen: list[uuid.UUID] = []

    async def decide(key: str) -> tuple[str, set[str]]:
        acc = await store.accept(AcceptRequest(tenant.id, key, DocumentIn(inv.ocr_text)))
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            loop = DriverLoop(
                AttemptRunner(
                    store,
                    engine,
                    WorkerConfig(worker_id="ttl", idle_poll_seconds=0.1),
                    master_data=cache,
                )
            )
            await loop.start()
            try:
                await wait_settled(pool, len(seen) + 1, timeout=60)
            finally:
                await loop.stop(grace_seconds=5)
        async with pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT j.state, r.validation FROM extraction_jobs j"
                " JOIN extraction_results r ON r.job_id = j.id WHERE j.id = $1",
                acc.job_id,
            )
        seen.append(acc.job_id)
        if row["state"] == "REVIEW_REQUIRED":
            # The same invoice is submitted again next: a reviewer rejects this
            # copy, so the next one is judged on its own, not held as its duplicate.
            async with pool.acquire() as conn, conn.transaction():
                key_id, _ = await create_api_key(conn, tenant.id, scopes=("review",))
                version = await conn.fetchval(
                    "SELECT state_version FROM extraction_jobs WHERE id = $1", acc.job_id
                )
                rejected = await store.decide_review(
                    conn,
                    job_id=acc.job_id,
                    tenant_id=tenant.id,
                    key_id=key_id,
                    decision="reject",
                    note="supplier unknown",
                    state_version=version,
                )
                assert rejected is not None
        return row["state"], {r["code"] for r in row["validation"]["reasons"]}

    with FakeProvider(answer=answer_from_corpus([inv])) as fake:
        first = await decide("before")
        async with pool.acquire() as conn:
            await upsert_supplier(conn, tenant.id, inv.supplier)
        now[0] += 29.0
        cached = await decide("within-ttl")
        now[0] += 1.0
        fresh = await decide("after-ttl")
    assert first == ("REVIEW_REQUIRED", {ReasonCode.SUPPLIER_UNKNOWN.value})
    assert cached == first  # the cached copy is still in use inside the TTL
    assert fresh == ("SUCCEEDED", set())


async def test_truncated_answers_are_charged_and_recorded_not_refunded(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """A truncated answer failed the attempt, but the provider did (and billed) the
    work: admission settles the grant with the reported usage, and the attempt
    row records it, so TPM windows and cost reports count those tokens."""
    from cluster.admission import ActorGate, AdmissionActor, AdmissionClient, LocalActorHandle

    corpus = generate_corpus(2, seed=5, max_line_items=2, anchor=TODAY)
    store = fast_store(pool)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    actor = AdmissionActor({"scope": "truncated", "max_in_flight": 2}, database_url=dsn)
    await actor.start()
    script = [{"kind": "malformed", "malformed": "truncated", "count": 4 * len(jobs)}]
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        fake.set_faults({"script": script})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            gate = ActorGate(AdmissionClient(LocalActorHandle(actor), scope="truncated"))
            cfg = WorkerConfig(worker_id="t0", concurrency=2, idle_poll_seconds=0.1)
            loop = DriverLoop(AttemptRunner(store, engine, cfg, admission=gate))
            await loop.start()
            try:
                rows = await wait_settled(pool, len(jobs), timeout=90)
            finally:
                await loop.stop(grace_seconds=5)
                await actor.stop()
        calls = fake.calls()
    assert {r["last_error_class"] for r in rows} == {"malformed_output"}
    assert len(calls) == 4 * len(jobs)
    provider_tokens = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    async with pool.acquire() as conn:
        ledger = await conn.fetch(
            "SELECT outcome, charged_tokens FROM admission_grants WHERE scope = 'truncated'"
        )
        attempts = await conn.fetch(
            "SELECT prompt_tokens, completion_tokens FROM job_attempts"
            " WHERE job_id = ANY($1::uuid[])",
            list(jobs),
        )
    assert len(ledger) == len(calls)
    assert {r["outcome"] for r in ledger} == {"reconciled"}
    assert sum(r["charged_tokens"] for r in ledger) == provider_tokens
    assert len(attempts) == len(calls)
    assert sum(a["prompt_tokens"] + a["completion_tokens"] for a in attempts) == provider_tokens


async def test_a_call_after_a_long_admission_wait_keeps_its_full_timeout(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """One permit, two jobs, a provider that takes 2.5 s, a 2 s lease renewed every
    0.4 s: the second job waits for the permit longer than its first lease lasted.
    Its call was bounded by that first ``lease_until`` (the heartbeats' renewals were
    never seen), so it got a 1 s timeout, timed out and was retried; now it runs under
    the attempt timeout and both jobs succeed at their first call."""
    from cluster.admission import ActorGate, AdmissionActor, AdmissionClient, LocalActorHandle

    corpus = generate_corpus(2, seed=11, max_line_items=2, anchor=TODAY)
    policy = RetryPolicy(
        max_attempts=4, base_seconds=0.05, cap_seconds=0.2, next_attempt_margin_seconds=1
    )
    store = JobStore(pool, Settings(lease_seconds=2), policy=policy)
    tenant = await new_tenant(pool)
    jobs = await submit_corpus(store, tenant, corpus)
    actor = AdmissionActor({"scope": "one-permit", "max_in_flight": 1}, database_url=dsn)
    await actor.start()
    with FakeProvider(answer=answer_from_corpus(corpus)) as fake:
        fake.set_faults({"latency": {"dist": "fixed", "a": 2.5}})
        async with OpenAICompatibleEngine(fake.base_url, "fake-model") as engine:
            gate = ActorGate(AdmissionClient(LocalActorHandle(actor), scope="one-permit"))
            cfg = WorkerConfig(
                worker_id="w0",
                concurrency=2,
                idle_poll_seconds=0.1,
                heartbeat_seconds=0.4,
                attempt_timeout_seconds=20,
                commit_margin_seconds=0.5,
            )
            loop = DriverLoop(AttemptRunner(store, engine, cfg, admission=gate))
            await loop.start()
            try:
                rows = await wait_settled(pool, len(jobs), timeout=60)
            finally:
                await loop.stop(grace_seconds=5)
                await actor.stop()
        calls = fake.calls()
    assert {r["state"] for r in rows} == {"SUCCEEDED"}
    assert len(calls) == len(jobs)  # no call timed out and was made again
    assert {r["attempt"] for r in rows} == {1}
