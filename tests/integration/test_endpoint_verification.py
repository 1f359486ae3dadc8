"""Verified endpoints (issue 47, item 4): no delivery before the endpoint echoes a challenge.

Real HTTP on loopback: the reference ERP receiver echoes challenges; a small server
that answers a wrong token stands for an endpoint the tenant does not control.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from pipeline.clock import ManualClock
from pipeline.delivery import (
    EVENT_VERIFICATION,
    DeliveryStore,
    EgressClient,
    EndpointChallenger,
    EndpointRegistry,
    Verifier,
)
from pipeline.delivery.egress import EgressGuard, EgressPolicy
from pipeline.delivery.signing import generate_secret
from tests.support.delivery import (
    DEV_POLICY,
    TEST_BOX,
    Canary,
    Receiver,
    ServerThread,
    dispatcher_for,
    fetch,
    job_store,
    postings,
    registry_for,
    succeed_jobs,
)
from tests.support.jobs import new_tenant

pytestmark = pytest.mark.integration


class WrongEcho:
    """An endpoint that answers every request 200 with a token of its own choosing;
    it records each request's body (to show which were challenges, which deliveries)."""

    def __init__(self, secret: str) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.signed: list[bool] = []
        verifier = Verifier([secret])
        app = FastAPI()

        @app.post("/hook")
        async def hook(request: Request) -> JSONResponse:
            body = await request.body()
            self.signed.append(bool(verifier.verify(request.headers, body)))
            self.bodies.append(json.loads(body))
            return JSONResponse({"challenge": "not-the-token"})

        self.server = ServerThread(app)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/hook"

    def __enter__(self) -> WrongEcho:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


async def endpoint_row(pool: asyncpg.Pool, endpoint_id: uuid.UUID) -> dict[str, Any]:
    [row] = await fetch(
        pool,
        "SELECT url, verification, challenge_failures FROM webhook_endpoints WHERE id = $1",
        endpoint_id,
    )
    return row


async def held(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[tuple[str, int]]:
    rows = await fetch(
        pool, "SELECT state, attempts FROM deliveries WHERE tenant_id = $1", tenant_id
    )
    return sorted((r["state"], r["attempts"]) for r in rows)


async def test_a_wrong_echo_is_refused_and_no_delivery_is_sent(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    tenant = await new_tenant(pool)
    secret = generate_secret()
    with WrongEcho(secret) as endpoint:
        issued = await registry_for(pool, clock).register(tenant.id, endpoint.url(), secret=secret)
        assert issued.endpoint.verification == "pending"
        await succeed_jobs(job_store(pool, clock), tenant, 2)
        dispatcher = dispatcher_for(pool, clock=clock)
        report = await dispatcher.run_once()
        # The back-off holds the next challenge; a later pass sends nothing either.
        again = await dispatcher.run_once()
        await dispatcher.close()
    assert report.claimed == 0 and again.claimed == 0
    # One request reached the endpoint: the signed challenge. No delivery.
    assert [b["type"] for b in endpoint.bodies] == [EVENT_VERIFICATION]
    assert endpoint.signed == [True]
    assert await held(pool, tenant.id) == [("pending", 0), ("pending", 0)]
    row = await endpoint_row(pool, issued.endpoint.id)
    assert (row["verification"], row["challenge_failures"]) == ("pending", 1)
    events = await fetch(
        pool,
        "SELECT kind, detail FROM endpoint_events WHERE endpoint_id = $1 ORDER BY seq",
        issued.endpoint.id,
    )
    assert [e["kind"] for e in events] == ["registered", "verification_failed"]
    assert events[1]["detail"].startswith("wrong_echo")


async def test_held_deliveries_flow_once_the_endpoint_echoes(dsn: str, pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    tenant = await new_tenant(pool)
    secret = generate_secret()
    registry = registry_for(pool, clock)
    with Receiver(dsn, [secret], clock=clock) as erp:
        issued = await registry.register(tenant.id, erp.url(), secret=secret)
        jobs = await succeed_jobs(job_store(pool, clock), tenant, 3)
        assert await held(pool, tenant.id) == [("pending", 0)] * 3
        assert erp.stats.requests == 0
        dispatcher = dispatcher_for(pool, clock=clock)
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert erp.stats.challenges == {"echoed": 1}
        assert report.count("delivered") == 3
        assert await postings(pool, erp.ledger) == dict.fromkeys(jobs, 1)
    assert (await registry.get(tenant.id, issued.endpoint.id)).verification == "verified"
    assert await held(pool, tenant.id) == [("delivered", 1)] * 3


async def test_a_url_change_holds_deliveries_until_the_new_url_echoes(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    tenant = await new_tenant(pool)
    secret = generate_secret()
    registry = registry_for(pool, clock)
    store = job_store(pool, clock)
    with (
        Receiver(dsn, [secret], clock=clock) as first,
        Receiver(dsn, [secret], clock=clock) as second,
        WrongEcho(secret) as stranger,
    ):
        issued = await registry.register(tenant.id, first.url(), secret=secret)
        endpoint_id = issued.endpoint.id
        await succeed_jobs(store, tenant, 1)
        dispatcher = dispatcher_for(pool, clock=clock)
        assert (await dispatcher.run_once()).count("delivered") == 1
        # A URL nobody proved control of: pending again, and the next job's
        # delivery waits (the stranger gets the challenge only, and fails it).
        changed = await registry.change_url(tenant.id, endpoint_id, stranger.url())
        assert changed.verification == "pending" and changed.verified_at is None
        [held_job] = await succeed_jobs(store, tenant, 1)
        assert (await dispatcher.run_once()).claimed == 0
        assert [b["type"] for b in stranger.bodies] == [EVENT_VERIFICATION]
        # The right URL: verified on the next pass, and the held delivery flows there.
        await registry.change_url(tenant.id, endpoint_id, second.url())
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("delivered") == 1
        assert second.stats.challenges == {"echoed": 1}
        assert await postings(pool, second.ledger) == {held_job: 1}
        assert first.stats.challenges == {"echoed": 1} and first.stats.requests == 1
    assert (await endpoint_row(pool, endpoint_id))["verification"] == "verified"
    kinds = await fetch(
        pool,
        "SELECT kind FROM endpoint_events WHERE endpoint_id = $1 ORDER BY seq",
        endpoint_id,
    )
    assert [k["kind"] for k in kinds] == [
        "registered",
        "verified",
        "url_changed",
        "verification_failed",
        "url_changed",
        "verified",
    ]


async def test_an_endpoint_down_at_registration_is_challenged_again_later(
    dsn: str, pool: asyncpg.Pool
) -> None:
    """A failed challenge is not the end: after its back-off the endpoint is challenged
    again, and once it echoes, the deliveries held meanwhile flow."""
    clock = ManualClock()
    tenant = await new_tenant(pool)
    secret = generate_secret()
    erp = Receiver(dsn, [secret], clock=clock)  # its port is bound; nothing answers yet
    issued = await registry_for(pool, clock).register(tenant.id, erp.url(), secret=secret)
    [job] = await succeed_jobs(job_store(pool, clock), tenant, 1)
    dispatcher = dispatcher_for(pool, clock=clock, timeout_seconds=0.5)
    assert (await dispatcher.run_once()).claimed == 0
    assert (await endpoint_row(pool, issued.endpoint.id))["challenge_failures"] == 1
    assert await held(pool, tenant.id) == [("pending", 0)]
    with erp:
        clock.advance(31)
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("delivered") == 1
        assert await postings(pool, erp.ledger) == {job: 1}


async def test_the_back_off_holds_the_next_challenge_until_it_is_due(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    tenant = await new_tenant(pool)
    secret = generate_secret()
    with WrongEcho(secret) as endpoint:
        await registry_for(pool, clock).register(tenant.id, endpoint.url(), secret=secret)
        dispatcher = dispatcher_for(pool, clock=clock)
        await dispatcher.run_once()
        clock.advance(29)
        await dispatcher.run_once()
        assert len(endpoint.bodies) == 1  # the first back-off is 30 s
        clock.advance(2)
        await dispatcher.run_once()
        await dispatcher.close()
    assert len(endpoint.bodies) == 2


async def test_the_challenge_goes_through_the_egress_guard(pool: asyncpg.Pool) -> None:
    """A name that resolved to a global address at registration and to loopback when the
    challenge goes out is never connected to; the endpoint stays pending."""
    tenant = await new_tenant(pool)
    async with Canary() as canary:
        answers = iter([["93.184.216.34"], ["127.0.0.1"]])

        async def rebinding(host: str, port: int) -> list[str]:
            return next(answers)

        policy = EgressPolicy(allowed_ports=frozenset({canary.port}))
        registry = EndpointRegistry(pool, EgressGuard(policy, rebinding), TEST_BOX)
        issued = await registry.register(
            tenant.id, f"https://erp.rebind.example:{canary.port}/hook"
        )
        client = EgressClient(EgressGuard(policy, rebinding), timeout_seconds=2.0)
        result = await EndpointChallenger(pool, client, TEST_BOX).verify(
            tenant.id, issued.endpoint.id
        )
        await client.aclose()
        assert canary.connections == 0
    assert result is not None and (result.verified, result.reason) == (False, "egress_blocked")
    assert (await endpoint_row(pool, issued.endpoint.id))["verification"] == "pending"


async def test_a_verified_endpoint_is_not_challenged_again(dsn: str, pool: asyncpg.Pool) -> None:
    tenant = await new_tenant(pool)
    secret = generate_secret()
    with Receiver(dsn, [secret]) as erp:
        issued = await registry_for(pool).register(tenant.id, erp.url(), secret=secret)
        client = EgressClient(EgressGuard(DEV_POLICY), timeout_seconds=2.0)
        challenger = EndpointChallenger(pool, client, TEST_BOX)
        first = await challenger.verify(tenant.id, issued.endpoint.id)
        second = await challenger.verify(tenant.id, issued.endpoint.id)
        stranger = await new_tenant(pool)
        other = await challenger.verify(stranger.id, issued.endpoint.id)
        await client.aclose()
    assert first is not None and first.verified
    assert second is None and other is None
    assert erp.stats.challenges == {"echoed": 1}
    assert await DeliveryStore(pool).list_for_job(tenant.id, uuid.uuid4()) == []
