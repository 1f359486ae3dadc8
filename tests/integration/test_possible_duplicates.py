"""Possible duplicate invoices (issue 47, item 5).

Near misses of the exact identity go to review ``possible_duplicate`` naming the
other job: the same supplier and number with another total, or the same supplier,
total and issue date with a number printed differently. Invoices that only look
alike (another supplier, a number that normalises differently) are not held; two
near duplicates racing leave one owner; the keys table holds no invoice number.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import uuid
from typing import Any

import asyncpg
import pytest

from pipeline.jobs import AcceptRequest, DocumentIn, JobStore, Success
from pipeline.jobs.near_duplicates import near_key_secret
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Tenant
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration

ACME = "DE 123 456 789"
OTHER = "FR 98 765 432 109"


def invoice(
    number: str, gross: str = "1210.00", date: str = "2026-11-02", vat: str = ACME
) -> dict[str, Any]:
    return {
        "supplier": {"name": {"value": "ACME GmbH"}, "vat_id": {"value": vat}},
        "invoice_number": {"value": number},
        "gross_total": {"value": gross},
        "currency": {"value": "EUR"},
        "issue_date": {"value": date},
    }


async def settle_in_turn(
    store: JobStore, tenant: Tenant, results: list[dict[str, Any]]
) -> list[tuple[uuid.UUID, JobState, list[dict[str, Any]]]]:
    """Each result settled by a job of its own, one after the other: (job, state, reasons)."""
    out = []
    for result in results:
        await store.accept(AcceptRequest(tenant.id, uuid.uuid4().hex, DocumentIn("an invoice")))
        [lease] = await store.claim("w")
        settled = await store.succeed(lease, result=result)
        async with store.pool.acquire() as conn:
            validation = await conn.fetchval(
                "SELECT validation FROM extraction_results WHERE job_id = $1", lease.job_id
            )
        out.append((lease.job_id, settled.state, validation.get("reasons") or []))
    return out


@pytest.mark.parametrize(
    ("second", "match"),
    [
        (invoice("INV-0042", gross="1300.00"), "number"),  # an amended total
        # exact, on the same issue date: not near (a newer one is a possible amendment,
        # tests/integration/test_invoice_versions.py)
        (invoice("INV-0042", gross="1210.00"), None),
        (invoice("42"), "formatted"),
        (invoice("inv 0042"), "formatted"),
        (invoice("Nr. 42"), "formatted"),
        (invoice("RE-00042"), "formatted"),
        (invoice("INV/00/42"), "formatted"),
    ],
)
async def test_a_near_duplicate_goes_to_review_naming_the_other_job(
    pool: asyncpg.Pool, second: dict[str, Any], match: str | None
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    (first, s1, _), (job, state, reasons) = await settle_in_turn(
        store, tenant, [invoice("INV-0042"), second]
    )
    assert s1 is JobState.SUCCEEDED
    assert state is JobState.REVIEW_REQUIRED
    [reason] = reasons
    if match is None:  # same supplier, number and total: the exact check says so first
        assert reason["code"] == "duplicate_invoice"
        return
    assert reason["code"] == "possible_duplicate"
    assert reason["other_job_id"] == str(first) and reason["match"] == match
    async with pool.acquire() as conn:
        last_error = await conn.fetchval(
            "SELECT last_error FROM extraction_jobs WHERE id = $1", job
        )
        deliveries = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE job_id = $1"
            " AND event_type = 'extraction.completed.v1'",
            job,
        )
    assert last_error == f"possible_duplicate of job {first}"
    assert deliveries == 0


@pytest.mark.parametrize(
    "second",
    [
        invoice("INV-0042", gross="1300.00", vat=OTHER),  # same number, another supplier
        invoice("INV-0042", vat=OTHER),  # everything the same but the supplier
        invoice("42", vat=OTHER),
        invoice("INV-0043"),  # another number that normalises differently
        invoice("INV-4200"),
        invoice("INV-0042-1", gross="99.00"),
        invoice("42", gross="1210.01"),  # a formatted number, another total
        invoice("42", date="2026-11-03"),  # ... another issue date
    ],
)
async def test_an_invoice_that_only_looks_alike_is_not_held(
    pool: asyncpg.Pool, second: dict[str, Any]
) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    settled = await settle_in_turn(store, tenant, [invoice("INV-0042"), second])
    assert [(state, reasons) for _, state, reasons in settled] == [
        (JobState.SUCCEEDED, []),
        (JobState.SUCCEEDED, []),
    ]


async def test_another_tenants_invoice_is_never_a_near_duplicate(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings())
    one, two = await new_tenant(pool), await new_tenant(pool)
    [(_, s1, _)] = await settle_in_turn(store, one, [invoice("INV-0042")])
    [(_, s2, _)] = await settle_in_turn(store, two, [invoice("42", gross="5.00")])
    [(_, s3, _)] = await settle_in_turn(store, two, [invoice("0042")])
    assert (s1, s2, s3) == (JobState.SUCCEEDED, JobState.SUCCEEDED, JobState.SUCCEEDED)


async def test_near_duplicates_committing_at_once_leave_one_owner(pool: asyncpg.Pool) -> None:
    """The primary key of the near keys decides a race: one SUCCEEDED, the rest held."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    results = [invoice(n) for n in ("INV-0077", "77", "Nr. 077", "inv 77", "RE77", "0077")]
    for i in range(len(results)):
        await store.accept(AcceptRequest(tenant.id, f"r{i}", DocumentIn(f"copy {i}")))
    leases = await store.claim("w", limit=len(results))
    settled = await asyncio.gather(
        *(store.succeed(lease, result=r) for lease, r in zip(leases, results, strict=True))
    )
    states = sorted(s.state.value for s in settled)
    assert states == ["REVIEW_REQUIRED"] * 5 + ["SUCCEEDED"]
    [owner] = [s.job_id for s in settled if s.state is JobState.SUCCEEDED]
    async with pool.acquire() as conn:
        errors = await conn.fetch(
            "SELECT last_error FROM extraction_jobs WHERE tenant_id = $1 AND id <> $2",
            tenant.id,
            owner,
        )
    assert {r["last_error"] for r in errors} == {f"possible_duplicate of job {owner}"}


async def test_a_batch_flags_near_duplicates_as_one_at_a_time_does(pool: asyncpg.Pool) -> None:
    """Group commit claims near keys too: of two jobs of one batch sharing a key, the
    first in job order owns it, and the number key is found before the formatted one."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    for i in range(3):
        await store.accept(AcceptRequest(tenant.id, f"b{i}", DocumentIn(f"doc {i}")))
    a, b, c = sorted(await store.claim("w", limit=3), key=lambda le: le.job_id)
    batch = await store.succeed_many(
        [
            Success(c, result=invoice("INV-0042")),
            Success(b, result=invoice("INV-0042", gross="1.00")),
            Success(a, result=invoice("0042")),
        ]
    )
    async with pool.acquire() as conn:
        errors = dict(
            await conn.fetch(
                "SELECT id, last_error FROM extraction_jobs WHERE tenant_id = $1", tenant.id
            )
        )
    assert batch.lost == []
    assert errors == {
        a.job_id: None,
        b.job_id: None,
        # c shares its number with b (another total) and its formatted key with a
        c.job_id: f"possible_duplicate of job {b.job_id}",
    }


async def test_the_keys_table_holds_no_invoice_number(pool: asyncpg.Pool) -> None:
    """Keys are HMACs under the server secret: no number, supplier or amount in clear,
    and not an unkeyed hash of them either."""
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    numbers = ["INV-2026-000123", "FACT-77881"]
    await settle_in_turn(store, tenant, [invoice(n) for n in numbers])
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT row_to_json(n)::text AS text, key_hash FROM invoice_near_keys n"
            " WHERE tenant_id = $1",
            tenant.id,
        )
        secret = await near_key_secret(conn, Settings())
    assert len(rows) == 4  # a number key and a formatted key per invoice
    # The text of a row (uuids, hex of the hash) is only searched for what hex and
    # uuids cannot hold by chance; the hash's bytes for every part of the values.
    in_text = [*numbers, "2026000123", "DE123456789", "ACME"]
    in_bytes = [*in_text, "77881", "123", "1210"]
    for row in rows:
        raw = bytes(row["key_hash"])
        assert len(raw) == 32
        assert not [n for n in in_text if n.casefold() in row["text"].casefold()]
        assert not [n for n in in_bytes if n.encode() in raw]
    number_keys = {bytes(r["key_hash"]) for r in rows}
    for n in numbers:
        msg = "\x1f".join(("number", str(tenant.id), "vat:DE123456789", n)).encode()
        assert hmac.new(secret, msg, hashlib.sha256).digest() in number_keys
        assert hashlib.sha256(msg).digest() not in number_keys


async def test_a_rejected_jobs_near_keys_pass_to_the_next_job(pool: asyncpg.Pool) -> None:
    store = JobStore(pool, Settings())
    tenant = await new_tenant(pool)
    await store.accept(AcceptRequest(tenant.id, "first", DocumentIn("an invoice")))
    [lease] = await store.claim("w")
    review = JobState.REVIEW_REQUIRED
    await store.succeed(lease, result=invoice("INV-0042"), decision=review)
    async with pool.acquire() as conn:  # a reviewer rejected its result
        await conn.execute(
            "UPDATE extraction_jobs SET state = 'FAILED_TERMINAL', terminal_reason = 'rejected'"
            " WHERE id = $1",
            lease.job_id,
        )
    [(_, state, reasons)] = await settle_in_turn(store, tenant, [invoice("INV-0042", gross="9.00")])
    assert (state, reasons) == (JobState.SUCCEEDED, [])
