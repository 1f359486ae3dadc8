"""ERP acknowledgements (issue 47, item 3): signature, replay window, idempotence and
the overdue alert, over real HTTP on loopback.

The reference ERP receiver takes the deliveries (the dispatcher POSTs them); the
Fenceline API runs under uvicorn on loopback and receives the acknowledgements,
signed here with the endpoint's secret, or sent by the receiver's own
acknowledger (:mod:`benchmarks.erp_acknowledger`) at once, late or never.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import CollectorRegistry

from benchmarks.erp_acknowledger import AckPlan
from pipeline.api.app import create_app
from pipeline.clock import ManualClock
from pipeline.delivery import (
    ACK_TRANSITIONS,
    EVENT_ACKNOWLEDGEMENT,
    AckMetrics,
    AckState,
    OverdueAcknowledgements,
)
from pipeline.delivery.signing import generate_secret, webhook_headers
from pipeline.jobs import JobStore
from pipeline.jobs.explain import render_explain
from pipeline.queries import q
from tests.support.api import TenantKey, loopback_server, settings_for, tenant_with_key
from tests.support.delivery import (
    Receiver,
    dispatcher_for,
    fetch,
    fetchval,
    job_store,
    postings,
    registry_for,
    succeed_jobs,
)

pytestmark = pytest.mark.integration

#: The key-encryption key TEST_BOX seals with, so the API opens the same secrets.
KEK = base64.b64encode(bytes(range(32))).decode()
WINDOW = 60
OVERDUE = "fenceline_delivery_ack_overdue_total"


@dataclass
class World:
    api: httpx.AsyncClient
    tenant: TenantKey
    endpoint_id: uuid.UUID
    secret: str
    deliveries: list[uuid.UUID]
    jobs: list[uuid.UUID]
    erp: Receiver


@asynccontextmanager
async def world(
    dsn: str,
    pool: asyncpg.Pool,
    *,
    n: int = 1,
    plan: dict[str, Any] | None = None,
    window: int | None = WINDOW,
) -> AsyncIterator[World]:
    """The API on loopback, a verified endpoint asking for acknowledgements within
    :data:`WINDOW`, and ``n`` jobs delivered to the reference ERP (which, with
    ``plan``, acknowledges them itself)."""
    tenant = await tenant_with_key(pool, scopes=("jobs", "operator"))
    secret = generate_secret()
    app = create_app(settings_for(dsn, webhook_secret_key=KEK), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base) as api:
        ack = AckPlan(base, secret, **plan) if plan is not None else None
        with Receiver(dsn, [secret], acknowledge=ack) as erp:
            issued = await registry_for(pool).register(
                tenant.tenant.id, erp.url(), secret=secret, ack_window_seconds=window
            )
            jobs = await succeed_jobs(job_store(pool), tenant.tenant, n)
            dispatcher = dispatcher_for(pool)
            delivered = 0
            for _ in range(n):  # at most 4 in flight per endpoint
                delivered += (await dispatcher.run_once()).count("delivered")
                if delivered == n:
                    break
            await dispatcher.close()
            assert delivered == n
            rows = await fetch(
                pool,
                "SELECT id FROM deliveries WHERE endpoint_id = $1 ORDER BY created_at, id",
                issued.endpoint.id,
            )
            yield World(api, tenant, issued.endpoint.id, secret, [r["id"] for r in rows], jobs, erp)


def ack_body(delivery_id: uuid.UUID, outcome: str = "accepted", **data: Any) -> bytes:
    return json.dumps(
        {
            "type": EVENT_ACKNOWLEDGEMENT,
            "timestamp": datetime.now(UTC).isoformat(),
            "data": {"delivery_id": str(delivery_id), "outcome": outcome, **data},
        }
    ).encode()


async def post_ack(
    w: World,
    delivery_id: uuid.UUID,
    body: bytes,
    *,
    secret: str | None = None,
    msg_id: str | None = None,
    ts: int | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = headers or webhook_headers(
        [secret or w.secret],
        msg_id or f"ack_{uuid.uuid4().hex}",
        int(time.time()) if ts is None else ts,
        body,
    )
    return await w.api.post(
        f"/v1/deliveries/{delivery_id}/acknowledgement",
        content=body,
        headers={**sent, "content-type": "application/json"},
    )


async def ack_row(pool: asyncpg.Pool, delivery_id: uuid.UUID) -> dict[str, Any]:
    [row] = await fetch(
        pool,
        "SELECT state, ack_state, ack_reason, acknowledged_at, ack_due_at, ack_overdue_at"
        " FROM deliveries WHERE id = $1",
        delivery_id,
    )
    return row


async def messages(pool: asyncpg.Pool, delivery_id: uuid.UUID) -> list[tuple[str, str]]:
    rows = await fetch(
        pool,
        "SELECT outcome, effect FROM delivery_acknowledgements WHERE delivery_id = $1"
        " ORDER BY received_at, message_id",
        delivery_id,
    )
    return [(r["outcome"], r["effect"]) for r in rows]


async def test_python_and_sql_acknowledgement_state_machines_agree(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with pool.acquire() as conn:
        rows = await conn.fetch(q("delivery_ack_transition_list"))
        check = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'deliveries_ack_state_check'"
        )
    assert {(AckState(r["from_state"]), AckState(r["to_state"])) for r in rows} == set(
        ACK_TRANSITIONS
    )
    for state in AckState:
        assert f"'{state.value}'" in check
    # The guard refuses a move the table lacks: a final outcome never changes.
    async with world(dsn, pool) as w:
        [d] = w.deliveries
        assert (await post_ack(w, d, ack_body(d))).status_code == 200
        for state in ("awaiting", "overdue", "rejected"):
            with pytest.raises(asyncpg.CheckViolationError, match="acknowledgement transition"):
                await pool.execute(
                    "UPDATE deliveries SET ack_state = $2, ack_reason = 'x',"
                    " ack_overdue_at = now() WHERE id = $1",
                    d,
                    state,
                )


async def test_only_the_endpoints_signature_acknowledges_a_delivery(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with world(dsn, pool) as w:
        [d] = w.deliveries
        row = await ack_row(pool, d)
        assert (row["state"], row["ack_state"]) == ("delivered", "awaiting")
        assert row["ack_due_at"] is not None
        body = ack_body(d)
        # Another secret, another tenant's endpoint's secret, a body changed after
        # signing, an unknown delivery: all the same 401, nothing recorded.
        other = await tenant_with_key(pool)
        foreign = generate_secret()
        await registry_for(pool).register(
            other.tenant.id, "http://127.0.0.1:9/x", secret=foreign, ack_window_seconds=WINDOW
        )
        refused = [
            await post_ack(w, d, body, secret=generate_secret()),
            await post_ack(w, d, body, secret=foreign),
            await post_ack(
                w,
                d,
                ack_body(d, "rejected", reason="forged"),
                headers=webhook_headers([w.secret], "ack_x", int(time.time()), body),
            ),
            await post_ack(w, uuid.uuid4(), ack_body(uuid.uuid4())),
        ]
        assert [r.status_code for r in refused] == [401] * 4
        assert {r.json()["reason"] for r in refused} == {"no_matching_signature"}
        assert (await ack_row(pool, d))["ack_state"] == "awaiting"
        # Unsigned: refused before anything is read.
        bare = await w.api.post(f"/v1/deliveries/{d}/acknowledgement", content=body)
        assert (bare.status_code, bare.json()["reason"]) == (401, "missing_headers")

        ok = await post_ack(w, d, body)
        assert ok.status_code == 200, ok.text
        assert {k: ok.json()[k] for k in ("outcome", "effect", "late")} == {
            "outcome": "accepted",
            "effect": "recorded",
            "late": False,
        }
        row = await ack_row(pool, d)
        assert (row["ack_state"], row["acknowledged_at"] is not None) == ("accepted", True)
        assert await messages(pool, d) == [("accepted", "recorded")]
        key = await fetchval(
            pool, "SELECT key_id FROM delivery_acknowledgements WHERE delivery_id = $1", d
        )
        assert key == "k1"
        exposed = (await w.api.get("/metrics")).text
        counted = "fenceline_delivery_acknowledgements_total"
        assert f'{counted}{{effect="recorded",outcome="accepted"}} 1.0' in exposed
        assert f'{counted}{{effect="no_matching_signature",outcome="refused"}} 4.0' in exposed


async def test_the_replay_window_refuses_stale_messages_and_a_replay_changes_nothing(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with world(dsn, pool) as w:
        [d] = w.deliveries
        body = ack_body(d)
        now = int(time.time())
        stale = await post_ack(w, d, body, msg_id="ack_1", ts=now - 301)
        early = await post_ack(w, d, body, msg_id="ack_1", ts=now + 301)
        assert (stale.status_code, stale.json()["reason"]) == (401, "timestamp_too_old")
        assert (early.status_code, early.json()["reason"]) == (401, "timestamp_in_future")
        assert (await ack_row(pool, d))["ack_state"] == "awaiting"

        headers = webhook_headers([w.secret], "ack_1", now, body)
        first = await post_ack(w, d, body, headers=headers)
        at = (await ack_row(pool, d))["acknowledged_at"]
        # The same signed request again, inside the window: the same answer, no new row.
        again = await post_ack(w, d, body, headers=headers)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert await messages(pool, d) == [("accepted", "recorded")]
        assert (await ack_row(pool, d))["acknowledged_at"] == at


async def test_acknowledgements_are_idempotent_and_the_first_outcome_stands(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with world(dsn, pool, n=2) as w:
        d, e = w.deliveries
        first = await post_ack(w, d, ack_body(d), msg_id="ack_m1")
        assert first.json()["effect"] == "recorded"
        # The same message id with another body: refused, whatever it says.
        reused = await post_ack(w, d, ack_body(d, "rejected", reason="wrong VAT"), msg_id="ack_m1")
        assert (reused.status_code, reused.json()["reason"]) == (409, "message_conflict")
        # The same message id for another delivery of the endpoint: refused too.
        moved = await post_ack(w, e, ack_body(e), msg_id="ack_m1")
        assert (moved.status_code, moved.json()["reason"]) == (409, "message_conflict")
        # Another message with the recorded outcome repeats it; another outcome is refused.
        repeat = await post_ack(w, d, ack_body(d), msg_id="ack_m2")
        assert (repeat.status_code, repeat.json()["effect"]) == (200, "repeated")
        assert repeat.json()["acknowledged_at"] == first.json()["acknowledged_at"]
        turned = await post_ack(w, d, ack_body(d, "duplicate"), msg_id="ack_m3")
        assert (turned.status_code, turned.json()["reason"]) == (
            409,
            "conflicting_acknowledgement",
        )
        assert (await ack_row(pool, d))["ack_state"] == "accepted"
        assert await messages(pool, d) == [("accepted", "recorded"), ("accepted", "repeated")]

        # A rejection needs its reason; with one, it is recorded as sent.
        bare = await post_ack(w, e, ack_body(e, "rejected"))
        assert (bare.status_code, bare.json()["reason"]) == (400, "invalid")
        rejected = await post_ack(w, e, ack_body(e, "rejected", reason="unknown supplier"))
        assert rejected.json()["outcome"] == "rejected"
        row = await ack_row(pool, e)
        assert (row["ack_state"], row["ack_reason"]) == ("rejected", "unknown supplier")


async def test_a_missing_acknowledgement_alerts_once_and_a_late_one_still_settles(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with world(dsn, pool, n=2) as w:
        d, e = w.deliveries
        metrics = AckMetrics(CollectorRegistry())
        start = datetime.now(UTC)

        def overdue_pass(after: float) -> OverdueAcknowledgements:
            return OverdueAcknowledgements(
                pool, clock=ManualClock(start + timedelta(seconds=after)), metrics=metrics
            )

        assert (await overdue_pass(WINDOW / 2).run_once()).overdue == 0
        assert (await post_ack(w, d, ack_body(d))).status_code == 200
        # The window ran out for e alone: one alert. Later passes add none.
        assert (await overdue_pass(WINDOW + 5).run_once()).overdue == 1
        assert (await overdue_pass(WINDOW + 60).run_once()).overdue == 0
        assert metrics.registry.get_sample_value(OVERDUE) == 1
        alerts = await fetch(
            pool,
            "SELECT detail FROM endpoint_events WHERE endpoint_id = $1 AND kind = 'ack_overdue'",
            w.endpoint_id,
        )
        assert len(alerts) == 1 and str(e) in alerts[0]["detail"]
        assert (await ack_row(pool, e))["ack_state"] == "overdue"
        assert (await ack_row(pool, d))["ack_state"] == "accepted"

        # The dashboard shows it; the deliveries page filters by it.
        board = await w.api.get("/console/dashboard/body", headers=w.tenant.headers)
        assert board.status_code == 200
        assert 'data-ack-state="overdue"' in board.text
        listed = await w.api.get("/console/deliveries?ack=overdue", headers=w.tenant.headers)
        assert f'data-delivery="{e}"' in listed.text and f'data-delivery="{d}"' not in listed.text

        # The late acknowledgement settles it; it does not alert again.
        late = await post_ack(w, e, ack_body(e))
        assert (late.status_code, late.json()["late"], late.json()["effect"]) == (
            200,
            True,
            "recorded",
        )
        row = await ack_row(pool, e)
        assert row["ack_state"] == "accepted" and row["ack_overdue_at"] is not None
        assert (await overdue_pass(2 * WINDOW).run_once()).overdue == 0
        assert metrics.registry.get_sample_value(OVERDUE) == 1

        # explain shows the acknowledgement and its history.
        job = await fetchval(pool, "SELECT job_id FROM deliveries WHERE id = $1", e)
        text = render_explain(await JobStore(pool).explain(job))
        assert "acknowledgement: accepted" in text
        assert "overdue (alerted)" in text
        assert "accepted (recorded)" in text


async def test_the_reference_erp_acknowledges_at_once_late_or_never_and_nothing_twice(
    dsn: str, pool: asyncpg.Pool
) -> None:
    plan = {"at_once": 0.6, "late": 0.2, "late_seconds": 0.3, "seed": 3}
    async with world(dsn, pool, n=30, plan=plan) as w:
        choice = AckPlan("http://unused", w.secret, **plan).choose
        by = {c: {d for d in w.deliveries if choice(str(d)) == c} for c in ("at_once", "late")}
        expected = by["at_once"] | by["late"]
        never = set(w.deliveries) - expected

        async def settled() -> set[uuid.UUID]:
            rows = await fetch(
                pool,
                "SELECT id FROM deliveries WHERE endpoint_id = $1 AND ack_state = 'accepted'",
                w.endpoint_id,
            )
            return {r["id"] for r in rows}

        deadline = time.monotonic() + 20
        while await settled() != expected:
            assert time.monotonic() < deadline, "acknowledgements did not arrive"
            await asyncio.sleep(0.1)
        future = ManualClock(datetime.now(UTC) + timedelta(seconds=WINDOW + 5))
        overdue_pass = OverdueAcknowledgements(pool, clock=future)

        async def alerts() -> int:
            return int(
                await fetchval(
                    pool,
                    "SELECT count(*) FROM endpoint_events"
                    " WHERE endpoint_id = $1 AND kind = 'ack_overdue'",
                    w.endpoint_id,
                )
            )

        await overdue_pass.run_once()
        assert await alerts() == len(never)
        await overdue_pass.run_once()
        assert await alerts() == len(never)  # once each
        overdue = await fetch(
            pool,
            "SELECT id FROM deliveries WHERE endpoint_id = $1 AND ack_state = 'overdue'",
            w.endpoint_id,
        )
        assert {r["id"] for r in overdue} == never
        # One recorded message per acknowledged delivery; each job posted once.
        recorded = await fetchval(
            pool,
            "SELECT count(*) FROM delivery_acknowledgements WHERE endpoint_id = $1",
            w.endpoint_id,
        )
        assert recorded == len(expected)
        assert await postings(pool, w.erp.ledger) == dict.fromkeys(w.jobs, 1)


async def test_an_endpoint_that_asks_for_none_takes_no_acknowledgement(
    dsn: str, pool: asyncpg.Pool
) -> None:
    async with world(dsn, pool, window=None) as w:
        [d] = w.deliveries
        r = await post_ack(w, d, ack_body(d))
        assert (r.status_code, r.json()["reason"]) == (409, "not_expected")
        row = await ack_row(pool, d)
        assert (row["state"], row["ack_state"], row["ack_due_at"]) == ("delivered", None, None)
        assert await messages(pool, d) == []
        # Nothing awaits, so nothing alerts.
        future = ManualClock(datetime.now(UTC) + timedelta(days=31))
        await OverdueAcknowledgements(pool, clock=future).run_once()
        assert (await ack_row(pool, d))["ack_state"] is None
        alerts = await fetchval(
            pool,
            "SELECT count(*) FROM endpoint_events WHERE endpoint_id = $1 AND kind = 'ack_overdue'",
            w.endpoint_id,
        )
        assert alerts == 0
