"""The reference ERP receiver over real HTTP on loopback, with real PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.clock import ManualClock
from pipeline.delivery import VerificationKey
from pipeline.delivery.signing import generate_secret, sign, webhook_headers
from pipeline.jobs import EVENT_COMPLETED, EVENT_CREDIT_NOTE_CREATED
from tests.support.delivery import Receiver, fetch, invoice, postings

pytestmark = pytest.mark.integration

GRACE = 3600


def event(job_id: uuid.UUID | None = None, **data: Any) -> bytes:
    body = {
        "type": EVENT_COMPLETED,
        "timestamp": "2026-11-30T10:00:00.000000Z",
        "data": {"job_id": str(job_id or uuid.uuid4()), "result": invoice(7), **data},
    }
    return json.dumps(body, separators=(", ", ": ")).encode()


class Erp:
    """A receiver accepting ``new`` and, until the grace period ends, ``old``."""

    def __init__(self, dsn: str) -> None:
        self.clock = ManualClock()
        self.old, self.new = generate_secret(), generate_secret()
        grace_end = self.clock.now().timestamp() + GRACE
        keys = [
            VerificationKey(self.new, "k2"),
            VerificationKey(self.old, "k1", not_after=grace_end),
        ]
        self.receiver = Receiver(dsn, keys, clock=self.clock)
        self.url = self.receiver.url()
        self.http = httpx.AsyncClient(timeout=5.0)

    def now(self) -> int:
        return int(self.clock.now().timestamp())

    async def post(
        self,
        body: bytes,
        msg_id: str | None = None,
        *,
        secrets: tuple[str, ...] | None = None,
        timestamp: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
        ts = self.now() if timestamp is None else timestamp
        h = (
            headers
            if headers is not None
            else webhook_headers(list(secrets or (self.new,)), msg_id, ts, body)
        )
        return await self.http.post(self.url, content=body, headers=h)


@pytest.fixture
def erp(dsn: str) -> Iterator[Erp]:
    e = Erp(dsn)
    with e.receiver:
        yield e


async def test_signature_vectors_accept_and_reject_exactly_and_never_500(erp: Erp) -> None:
    body = event()
    now = erp.now()

    def hdr(msg_id: str, signature: str, ts: int | None = None) -> dict[str, str]:
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(now if ts is None else ts),
            "webhook-signature": signature,
        }

    good = sign(erp.new, "msg_a", now, body)
    flipped = bytearray(body)
    flipped[40] ^= 0x01
    reserialised = json.dumps(json.loads(body), separators=(",", ":")).encode()
    assert reserialised != body and json.loads(reserialised) == json.loads(body)
    cases: list[tuple[str, int, dict[str, Any]]] = [
        ("valid", 200, {"body": body, "msg_id": "msg_a", "headers": hdr("msg_a", good)}),
        # Same id, timestamp and signature as the valid case: only one body byte differs.
        ("flipped byte", 401, {"body": bytes(flipped), "headers": hdr("msg_a", good)}),
        ("re-serialised JSON", 401, {"body": reserialised, "headers": hdr("msg_a", good)}),
        ("changed id", 401, {"body": body, "headers": hdr("msg_other", good)}),
        ("timestamp -301 s", 401, {"body": body, "timestamp": now - 301}),
        ("timestamp +301 s", 401, {"body": body, "timestamp": now + 301}),
        ("timestamp -299 s", 200, {"body": body, "timestamp": now - 299}),
        ("v1 without comma", 401, {"body": body, "headers": hdr("msg_c", good.replace(",", ""))}),
        ("bad base64", 401, {"body": body, "headers": hdr("msg_d", "v1,not*base64!")}),
        ("unknown version only", 401, {"body": body, "headers": hdr("msg_e", "v9," + good[3:])}),
        ("empty signature", 401, {"body": body, "headers": hdr("msg_f", "")}),
        ("timestamp not a number", 401, {"body": body, "headers": hdr("msg_g", good, ts=None)}),
        ("no headers", 401, {"body": body, "headers": {}}),
        ("both keys (rotation)", 200, {"body": body, "secrets": (erp.new, erp.old)}),
        ("old key within grace", 200, {"body": body, "secrets": (erp.old,)}),
        ("unknown key", 401, {"body": body, "secrets": (generate_secret(),)}),
        ("valid signature, not JSON", 400, {"body": b"{not json"}),
        ("valid signature, wrong shape", 400, {"body": b'{"type": 1}'}),
    ]
    cases[11][2]["headers"]["webhook-timestamp"] = "12e3"
    got = {}
    for name, _, kw in cases:
        response = await erp.post(kw.pop("body"), **kw)
        got[name] = response.status_code
        assert response.status_code != 500, name
    assert got == {name: status for name, status, _ in cases}

    erp.clock.advance(GRACE + 1)  # the receiver's grace for the old key has ended
    late = await erp.post(body, secrets=(erp.old,))
    assert (late.status_code, late.json()["reason"]) == (401, "no_matching_signature")
    assert (await erp.post(body, secrets=(erp.new, erp.old))).status_code == 200
    await erp.http.aclose()


async def test_redelivery_is_deduplicated_and_posts_once(erp: Erp, pool: asyncpg.Pool) -> None:
    job = uuid.uuid4()
    body = event(job)
    first = await erp.post(body, "msg_same")
    erp.clock.advance(30)  # a retry carries a fresh timestamp and the same id
    second = await erp.post(body, "msg_same")
    await erp.http.aclose()
    assert (first.status_code, first.json()["result"]) == (200, "accepted")
    assert (second.status_code, second.json()["result"]) == (200, "duplicate")
    [row] = await fetch(pool, "SELECT * FROM erp_inbox WHERE delivery_id = 'msg_same'")
    assert (row["duplicates"], row["conflicts"], row["job_id"]) == (1, 0, job)
    assert row["applied_at"] is not None
    # The duplicate never ran the posting step: one application, one effect.
    [posting] = await fetch(pool, "SELECT * FROM erp_postings WHERE job_id = $1", job)
    assert (posting["applications"], posting["effect_count"]) == (1, 1)
    assert await postings(pool, erp.receiver.ledger) == {job: 1}


async def test_same_id_with_a_different_payload_is_rejected_and_alerts(
    erp: Erp, pool: asyncpg.Pool
) -> None:
    job = uuid.uuid4()
    assert (await erp.post(event(job), "msg_x")).status_code == 200
    forged = await erp.post(event(job, note="different"), "msg_x")
    metrics = (await erp.http.get(erp.url.replace("/webhooks/fenceline", "/metrics"))).text
    await erp.http.aclose()
    assert forged.status_code == 409
    assert "fenceline_erp_digest_conflicts_total 1.0" in metrics
    [row] = await fetch(pool, "SELECT * FROM erp_inbox WHERE delivery_id = 'msg_x'")
    assert (row["duplicates"], row["conflicts"]) == (0, 1)
    [posting] = await fetch(pool, "SELECT * FROM erp_postings WHERE job_id = $1", job)
    assert "note" not in json.dumps(posting["invoice"])
    assert posting["effect_count"] == 1


async def test_one_job_under_two_delivery_ids_is_posted_once(erp: Erp, pool: asyncpg.Pool) -> None:
    job = uuid.uuid4()
    assert (await erp.post(event(job), "msg_1")).json()["result"] == "accepted"
    assert (await erp.post(event(job), "msg_2")).json()["result"] == "accepted"
    await erp.http.aclose()
    [posting] = await fetch(pool, "SELECT * FROM erp_postings WHERE job_id = $1", job)
    # The job guard absorbed the second posting, and the double posting stays visible:
    # without that guard the ERP would have posted this invoice twice.
    assert (posting["deliveries_seen"], posting["applications"], posting["effect_count"]) == (
        2,
        2,
        1,
    )
    assert await postings(pool, erp.receiver.ledger) == {job: 2}


async def test_unknown_event_types_are_kept_without_an_effect(erp: Erp, pool: asyncpg.Pool) -> None:
    body = json.dumps({"type": "extraction.something_new.v1", "data": {}}).encode()
    response = await erp.post(body, "msg_new_type")
    await erp.http.aclose()
    assert response.status_code == 200
    assert await postings(pool, erp.receiver.ledger) == {}
    [row] = await fetch(pool, "SELECT * FROM erp_inbox WHERE delivery_id = 'msg_new_type'")
    assert row["event_type"] == "extraction.something_new.v1"


async def test_oversized_bodies_are_refused_before_verification(erp: Erp) -> None:
    response = await erp.post(b"x" * ((1 << 20) + 1))
    await erp.http.aclose()
    assert response.status_code == 413


async def test_lost_responses_are_committed_before_they_are_lost(
    erp: Erp, pool: asyncpg.Pool
) -> None:
    jobs = [uuid.uuid4(), uuid.uuid4(), uuid.uuid4()]
    erp.receiver.faults.set("status_after_commit", remaining=1, status=500)
    assert (await erp.post(event(jobs[2]), "msg_500")).status_code == 500
    erp.receiver.faults.set("drop_after_commit", remaining=1)
    with pytest.raises(httpx.RemoteProtocolError):
        response = await erp.post(event(jobs[0]), "msg_drop")
        await response.aread()
    erp.receiver.faults.set("hang_after_commit", remaining=1, hang_seconds=2.0)
    with pytest.raises(httpx.ReadTimeout):
        await erp.http.post(
            erp.url,
            content=event(jobs[1]),
            headers=webhook_headers([erp.new], "msg_hang", erp.now(), event(jobs[1])),
            timeout=0.3,
        )
    # Both were durably accepted and posted; the retries are duplicates.
    assert (await erp.post(event(jobs[0]), "msg_drop")).json()["result"] == "duplicate"
    assert (await erp.post(event(jobs[1]), "msg_hang")).json()["result"] == "duplicate"
    assert (await erp.post(event(jobs[2]), "msg_500")).json()["result"] == "duplicate"
    await erp.http.aclose()
    assert await postings(pool, erp.receiver.ledger) == dict.fromkeys(jobs, 1)


async def test_a_duplicate_finishes_a_posting_its_first_arrival_never_applied(
    erp: Erp, pool: asyncpg.Pool
) -> None:
    """The receiver crashed between the inbox commit and the posting step."""
    job = uuid.uuid4()
    body = event(job)
    ledger = erp.receiver.ledger
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO erp_inbox (ledger, delivery_id, payload_digest, event_type, job_id)"
            " VALUES ($1, 'msg_crashed', $2, $3, $4)",
            ledger,
            hashlib.sha256(body).hexdigest(),
            EVENT_COMPLETED,
            job,
        )
        await conn.execute(
            "INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice)"
            " VALUES ($1, $2, 'msg_crashed', '{}'::jsonb)",
            ledger,
            job,
        )
    retried = await erp.post(body, "msg_crashed")
    again = await erp.post(body, "msg_crashed")
    await erp.http.aclose()
    assert [r.json()["result"] for r in (retried, again)] == ["duplicate", "duplicate"]
    [posting] = await fetch(pool, "SELECT * FROM erp_postings WHERE job_id = $1", job)
    assert (posting["applications"], posting["effect_count"]) == (1, 1)


async def test_postings_accepted_before_a_crash_are_applied_at_start(
    dsn: str, pool: asyncpg.Pool
) -> None:
    job = uuid.uuid4()
    ledger = "crashed"
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO erp_inbox (ledger, delivery_id, payload_digest, event_type, job_id)"
            " VALUES ($1, 'msg_c', repeat('0', 64), $2, $3)",
            ledger,
            EVENT_COMPLETED,
            job,
        )
        await conn.execute(
            "INSERT INTO erp_postings (ledger, job_id, delivery_id, invoice)"
            " VALUES ($1, $2, 'msg_c', '{}'::jsonb)",
            ledger,
            job,
        )
    assert await postings(pool, ledger) == {job: 0}
    with Receiver(dsn, [generate_secret()], ledger=ledger):
        pass
    assert await postings(pool, ledger) == {job: 1}


async def test_cli_receiver_subprocess_with_the_fault_api(dsn: str, pool: asyncpg.Pool) -> None:
    secret = generate_secret()
    argv = ["--port", "0", "--database-url", dsn, "--ledger", "cli", "--enable-fault-api"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.erp_receiver", *argv],
        stdout=subprocess.PIPE,
        env={**os.environ, "FENCELINE_ERP_SECRETS": secret},
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        base = url.rsplit("/webhooks", 1)[0]
        job = uuid.uuid4()
        body = event(job)
        async with httpx.AsyncClient(timeout=5) as http:
            fault = await http.post(f"{base}/_fault", json={"mode": "down", "remaining": 1})
            assert fault.json() == {"mode": "down"}
            statuses = []
            for _ in range(2):
                headers = webhook_headers([secret], "msg_cli", int(time.time()), body)
                statuses.append((await http.post(url, content=body, headers=headers)).status_code)
            stats = (await http.get(f"{base}/_stats")).json()
        assert statuses == [503, 200]
        assert stats["results"] == {"fault_down": 1, "accepted": 1}
        assert await postings(pool, "cli") == {job: 1}
    finally:
        proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it captured.
        assert proc.wait(15) in (0, -signal.SIGTERM)


def credit_note(job_id: uuid.UUID, credited: uuid.UUID | None, number: str = "CN-1") -> bytes:
    result = {**invoice(7), "invoice_number": number, "document_type": "credit_note"}
    credits = None if credited is None else {"job_id": str(credited), "invoice_number": "INV-7"}
    body = {
        "type": EVENT_CREDIT_NOTE_CREATED,
        "timestamp": "2026-11-30T10:00:00.000000Z",
        "data": {"job_id": str(job_id), "result": result, "credited_invoice": credits},
    }
    return json.dumps(body, separators=(", ", ": ")).encode()


async def test_a_credit_note_is_posted_as_a_credit_of_a_posted_invoice_only(
    erp: Erp, pool: asyncpg.Pool
) -> None:
    """A credit for an invoice the ledger never posted is refused (409, nothing kept);
    one for a posted invoice is posted once, as a credit naming it; one that credits no
    invoice is posted unlinked. A credit note's result under the invoice event type is
    no credit note to the ERP, and a credit note event whose result is none is refused."""
    invoice_job, credit_job, free_job = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    early = await erp.post(credit_note(credit_job, invoice_job), "msg_early")
    assert (early.status_code, early.json()["result"]) == (409, "credited_invoice_unknown")
    assert await fetch(pool, "SELECT 1 FROM erp_inbox WHERE delivery_id = 'msg_early'") == []
    assert (await erp.post(event(invoice_job), "msg_invoice")).status_code == 200
    for msg in ("msg_credit", "msg_credit"):  # the second: a duplicate of the same delivery
        assert (await erp.post(credit_note(credit_job, invoice_job), msg)).status_code == 200
    assert (await erp.post(credit_note(free_job, None, "CN-2"), "msg_free")).status_code == 200
    mislabelled = json.loads(credit_note(uuid.uuid4(), None, "CN-3"))
    mislabelled["data"]["result"].pop("document_type")
    wrong = await erp.post(json.dumps(mislabelled).encode(), "msg_wrong")
    assert wrong.status_code == 400
    rows = await fetch(
        pool,
        "SELECT job_id, kind, credits_job_id, applications, effect_count FROM erp_postings"
        " WHERE ledger = $1 ORDER BY accepted_at",
        erp.receiver.ledger,
    )
    assert [tuple(r.values()) for r in rows] == [
        (invoice_job, "invoice", None, 1, 1),
        (credit_job, "credit_note", invoice_job, 1, 1),
        (free_job, "credit_note", None, 1, 1),
    ]
