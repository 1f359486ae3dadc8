"""Delivery state machine and dispatcher against real PostgreSQL and real loopback receivers."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from datetime import timedelta

import asyncpg
import pytest

from cluster.delivery import DeliveryActor
from pipeline.clock import ManualClock
from pipeline.database import create_pool
from pipeline.delivery import DeliveryStore, EndpointRegistry, Verifier, delivery_settle_hook
from pipeline.delivery.deliveries import TRANSITIONS, DeliveryState
from pipeline.delivery.egress import EgressGuard, EgressPolicy
from pipeline.delivery.signing import generate_secret
from pipeline.errors import EgressBlocked
from pipeline.jobs import Settled, Success
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from tests.support.delivery import (
    TEST_BOX,
    Canary,
    Receiver,
    dispatcher_for,
    fetch,
    fetchval,
    inbox,
    invoice,
    job_store,
    postings,
    registry_for,
    reserve_receiver,
    succeed_jobs,
)
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


#: The SSRF matrix of the issue: every one must be refused.
SSRF_HOSTS = [
    "127.1",
    "0177.0.0.1",
    "0x7f.1",
    "2130706433",
    "[::1]",
    "[::ffff:7f00:1]",
    "[64:ff9b::7f00:1]",
    "169.254.169.254",
    "100.64.0.1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.0.1",
    "localhost.",
]


def ssrf_urls(port: int) -> list[str]:
    urls = [f"https://{h}:{port}/hook" for h in SSRF_HOSTS]
    return [
        *urls,
        "file:///etc/passwd",
        f"gopher://erp.example.com:{port}/_POST",
        f"https://a.com@127.0.0.1:{port}/hook",
        f"https://erp.example.com:{port}@127.0.0.1:{port}/hook",
    ]


async def delivery_rows(pool: asyncpg.Pool, *tenants: uuid.UUID) -> list[dict[str, object]]:
    return await fetch(
        pool,
        "SELECT * FROM deliveries WHERE tenant_id = ANY($1::uuid[]) ORDER BY created_at, id",
        list(tenants),
    )


async def test_python_and_sql_delivery_state_machines_agree(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        rows = await conn.fetch(q("delivery_state_transition_list"))
        check = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'deliveries_state_check'"
        )
    assert {(DeliveryState(r["from_state"]), DeliveryState(r["to_state"])) for r in rows} == set(
        TRANSITIONS
    )
    for state in DeliveryState:
        assert f"'{state.value}'" in check


async def test_deliveries_commit_with_the_completion_and_only_for_success(
    pool: asyncpg.Pool,
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant, other = await new_tenant(pool), await new_tenant(pool)
    wanted = await registry.register(tenant.id, "http://127.0.0.1:9/a")
    await registry.register(tenant.id, "http://127.0.0.1:9/b", event_types=["other.v1"])
    gone = await registry.register(tenant.id, "http://127.0.0.1:9/c")
    await registry.disable(tenant.id, gone.endpoint.id)
    await registry.register(other.id, "http://127.0.0.1:9/d")

    [job_id] = await succeed_jobs(store, tenant, 1)
    rows = await delivery_rows(pool, tenant.id, other.id)
    assert [(r["endpoint_id"], r["job_id"], r["state"]) for r in rows] == [
        (wanted.endpoint.id, job_id, "pending")
    ]
    body = json.loads(bytes(rows[0]["body"]))  # type: ignore[arg-type]
    assert body["type"] == "extraction.completed.v1"
    assert body["data"]["job_id"] == str(job_id)
    assert body["data"]["result"] == invoice(0)
    assert rows[0]["next_attempt_at"] == clock.now()

    # A review decision delivers nothing; a hook that fails rolls everything back.
    await store.accept(request(tenant))
    [lease] = await store.claim("w")
    await store.succeed(lease, result=invoice(1), decision=JobState.REVIEW_REQUIRED)
    assert len(await delivery_rows(pool, tenant.id)) == 1

    async def explode(conn: asyncpg.Connection, settled: Settled) -> None:
        raise RuntimeError("after the delivery insert")

    store.settle_hooks.add(explode)
    await store.accept(request(tenant))
    [lease] = await store.claim("w")
    with pytest.raises(RuntimeError):
        await store.succeed(lease, result=invoice(2))
    assert len(await delivery_rows(pool, tenant.id)) == 1
    completed = await fetchval(
        pool,
        "SELECT count(*) FROM outbox_events o JOIN extraction_jobs j ON j.id = o.job_id"
        " WHERE o.event_type = 'extraction.completed.v1' AND j.tenant_id = $1",
        tenant.id,
    )
    assert completed == 1

    # The hook is idempotent per (endpoint, job, event).
    async with pool.acquire() as conn:
        await delivery_settle_hook(conn, Settled(job_id, tenant.id, JobState.SUCCEEDED, 3, 1, 1))
    assert len(await delivery_rows(pool, tenant.id)) == 1


async def test_a_batch_settled_together_creates_every_delivery_in_one_transaction(
    dsn: str, pool: asyncpg.Pool
) -> None:
    """succeed_many calls the delivery hook once for the batch: the same deliveries as one
    at a time (one per matching endpoint and SUCCEEDED job, none for review), each body
    its own job's, and one wake-up for the dispatchers when it commits."""
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant = await new_tenant(pool)
    first = await registry.register(tenant.id, "http://127.0.0.1:9/a")
    second = await registry.register(tenant.id, "http://127.0.0.1:9/b")
    for _ in range(3):
        await store.accept(request(tenant))
    a, review, c = await store.claim("w", limit=3)
    wakes: list[str] = []
    listener = await asyncpg.connect(dsn)
    await listener.add_listener("fenceline_deliveries", lambda *args: wakes.append(args[3]))
    try:
        batch = await store.succeed_many(
            [
                Success(a, result=invoice(1)),
                Success(review, result=invoice(2), decision=JobState.REVIEW_REQUIRED),
                Success(c, result=invoice(3)),
            ]
        )
        assert len(batch.settled) == 3 and batch.lost == []
        for _ in range(50):  # the notification arrives after the commit
            if wakes:
                break
            await asyncio.sleep(0.02)
    finally:
        await listener.close()
    rows = await delivery_rows(pool, tenant.id)
    assert sorted((r["job_id"], r["endpoint_id"]) for r in rows) == sorted(
        (job, endpoint)
        for job in (a.job_id, c.job_id)
        for endpoint in (first.endpoint.id, second.endpoint.id)
    )
    for r in rows:
        body = json.loads(bytes(r["body"]))  # type: ignore[arg-type]
        assert body["data"]["job_id"] == str(r["job_id"])
        assert body["data"]["result"] == invoice(1 if r["job_id"] == a.job_id else 3)
    assert len(wakes) == 1 and wakes[0] in {str(a.job_id), str(c.job_id)}


async def test_signed_delivery_reaches_the_pinned_address_with_the_original_host(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    calls: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    registry = registry_for(pool, clock, resolver=resolver)
    secret = generate_secret()
    with Receiver(dsn, [secret], clock=clock) as erp:
        issued = await registry.register(tenant.id, erp.url("erp.test"), secret=secret)
        jobs = await succeed_jobs(store, tenant, 3)
        dispatcher = dispatcher_for(pool, clock=clock, resolver=resolver)
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.claimed == 3 and report.count("delivered") == 3
        # erp.test has no DNS: the request can only have gone to the pinned address.
        assert erp.stats.hosts == [f"erp.test:{erp.port}"] * 3
        # registration + the verification challenge + one resolution per attempt
        assert calls == ["erp.test"] * 5
        assert await postings(pool, erp.ledger) == dict.fromkeys(jobs, 1)
    rows = await delivery_rows(pool, tenant.id)
    assert {r["state"] for r in rows} == {"delivered"}
    assert {r["attempts"] for r in rows} == {1}
    attempts = await DeliveryStore(pool).attempts(tenant.id, rows[0]["id"])  # type: ignore[arg-type]
    assert attempts[0]["outcome"] == "delivered"
    assert attempts[0]["key_ids"] == [issued.key_id]
    assert attempts[0]["address"] == "127.0.0.1"
    assert attempts[0]["signed_timestamp"] == int(clock.now().timestamp())
    # Tenant scoping: the other tenant sees nothing.
    stranger = await new_tenant(pool)
    assert await DeliveryStore(pool).attempts(stranger.id, rows[0]["id"]) == []  # type: ignore[arg-type]


async def test_rotation_signs_with_both_keys_until_the_grace_period_ends(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant = await new_tenant(pool)
    old, new = generate_secret(), generate_secret()

    def only(secret: str) -> Verifier:
        return Verifier([secret], now=lambda: clock.now().timestamp())

    with Receiver(dsn, [old], clock=clock) as erp:
        issued = await registry.register(tenant.id, erp.url(), secret=old)
        rotated = await registry.rotate(
            tenant.id, issued.endpoint.id, grace_seconds=3600, secret=new
        )
        assert (rotated.previous_key_id, rotated.key_id) == ("k1", "k2")
        dispatcher = dispatcher_for(pool, clock=clock)
        # In grace: a receiver knowing either key alone accepts.
        for secret in (old, new):
            erp.app.state.verifier = only(secret)
            await succeed_jobs(store, tenant, 1)
            assert (await dispatcher.run_once()).count("delivered") == 1
        # After grace: the old key no longer signs.
        clock.advance(3601)
        erp.app.state.verifier = only(old)
        [late] = await succeed_jobs(store, tenant, 1)
        assert (await dispatcher.run_once()).count("retry_scheduled") == 1
        assert erp.stats.results.get("unauthorized") == 1
        erp.app.state.verifier = only(new)
        clock.advance(6)  # the first retry is at most 5 s later
        assert (await dispatcher.run_once()).count("delivered") == 1
        await dispatcher.close()
    [delivery] = await DeliveryStore(pool).list_for_job(tenant.id, late)
    attempts = await DeliveryStore(pool).attempts(tenant.id, delivery["id"])
    assert [a["key_ids"] for a in attempts] == [["k2"], ["k2"]]
    keys = await registry.keys(tenant.id, issued.endpoint.id)
    assert [(k["key_id"], k["retired_at"] is not None) for k in keys] == [
        ("k1", True),
        ("k2", False),
    ]
    first = await fetch(
        pool,
        "SELECT a.key_ids FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id"
        " WHERE d.tenant_id = $1 ORDER BY a.started_at LIMIT 1",
        tenant.id,
    )
    assert first[0]["key_ids"] == ["k2", "k1"]


async def test_429_retry_after_is_honoured_and_holds_the_endpoint(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, issued = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    with receiver as erp:
        erp.faults.set("status", status=429, retry_after="3600", remaining=1)
        [job] = await succeed_jobs(store, tenant, 1)
        dispatcher = dispatcher_for(pool, clock=clock)
        assert (await dispatcher.run_once()).count("retry_scheduled") == 1
        [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
        assert row["next_attempt_at"] >= clock.now() + timedelta(seconds=3600)
        assert row["last_status"] == 429
        endpoint = await registry_for(pool).get(tenant.id, issued.endpoint.id)
        assert endpoint.breaker_state == "open"
        # A second job for the same endpoint also waits for the Retry-After.
        await succeed_jobs(store, tenant, 1)
        clock.advance(1800)
        assert (await dispatcher.run_once()).claimed == 0
        clock.advance(1801)
        probe = await dispatcher.run_once()  # half-open: one probe at a time
        assert (probe.claimed, probe.count("delivered")) == (1, 1)
        rest = await dispatcher.run_once()  # the probe closed the breaker
        await dispatcher.close()
        assert rest.count("delivered") == 1
        assert erp.stats.requests == 3
        endpoint = await registry_for(pool).get(tenant.id, issued.endpoint.id)
        assert endpoint.breaker_state == "closed"


async def test_410_disables_the_endpoint_and_redrive_keeps_the_delivery_id(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant = await new_tenant(pool)
    receiver, issued = await reserve_receiver(dsn, registry, tenant, clock=clock)
    with receiver as erp:
        erp.faults.set("status", status=410)
        jobs = await succeed_jobs(store, tenant, 2)
        dispatcher = dispatcher_for(pool, clock=clock, per_endpoint_concurrency=1)
        report = await dispatcher.run_once()
        assert report.count("abandoned") == 1 and erp.stats.requests == 1
        endpoint = await registry.get(tenant.id, issued.endpoint.id)
        assert (endpoint.state, endpoint.disabled_reason) == ("disabled", "gone (HTTP 410)")
        rows = await delivery_rows(pool, tenant.id)
        assert {(r["state"], r["final_reason"]) for r in rows} == {
            ("abandoned", "endpoint_gone"),
            ("abandoned", "endpoint_disabled"),
        }
        kinds = [e["kind"] for e in await registry.events(tenant.id, issued.endpoint.id)]
        assert kinds == ["registered", "verified", "disabled"]
        await succeed_jobs(store, tenant, 1)  # a disabled endpoint gets no new deliveries
        assert len(await delivery_rows(pool, tenant.id)) == 2
        # The ERP comes back; the tenant re-enables and redrives.
        erp.faults.set("none")
        await registry.enable(tenant.id, issued.endpoint.id)
        for r in rows:
            await DeliveryStore(pool, clock=clock).redrive(tenant.id, r["id"])  # type: ignore[arg-type]
        reports = [await dispatcher.run_once() for _ in range(2)]  # one at a time
        await dispatcher.close()
        assert [r.count("delivered") for r in reports] == [1, 1]
        # The 410 fault answered before verification; the redrives carry the same ids.
        assert sorted(erp.stats.delivery_ids) == sorted(str(r["id"]) for r in rows)
        assert await postings(pool, erp.ledger) == dict.fromkeys(jobs, 1)
        # One accepted delivery per job and nothing for the inbox to absorb.
        assert await inbox(pool, erp.ledger) == dict.fromkeys(jobs, (1, 0))


async def test_redirects_are_failures_and_never_followed(dsn: str, pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    async with Canary() as canary:
        with receiver as erp:
            dispatcher = dispatcher_for(pool, clock=clock)
            [job] = await succeed_jobs(store, tenant, 1)
            for location in (
                "http://169.254.169.254/latest/meta-data/iam/",
                f"http://127.0.0.1:{canary.port}/",
            ):
                erp.faults.set("redirect", location=location, remaining=1)
                assert (await dispatcher.run_once()).count("retry_scheduled") == 1
                clock.advance(3600)
            await dispatcher.close()
            assert erp.stats.requests == 2
        assert canary.connections == 0
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    attempts = await DeliveryStore(pool).attempts(tenant.id, row["id"])
    assert [(a["http_status"], a["error_class"]) for a in attempts] == [(302, "redirect")] * 2


async def test_repeated_401_raises_one_auth_alert_per_threshold(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    registry = registry_for(pool, clock)
    tenant = await new_tenant(pool)
    receiver, issued = await reserve_receiver(dsn, registry, tenant, clock=clock)
    with receiver as erp:
        erp.faults.set("status", status=401)
        await succeed_jobs(store, tenant, 1)
        dispatcher = dispatcher_for(pool, clock=clock, auth_alert_after=3, breaker_threshold=10)
        alerts = []
        for _ in range(4):
            assert (await dispatcher.run_once()).count("retry_scheduled") == 1
            kinds = [e["kind"] for e in await registry.events(tenant.id, issued.endpoint.id)]
            alerts.append(kinds.count("auth_alert"))
            clock.advance(3600)  # past each jittered retry (caps 5 s, 60 s, 300 s, 1800 s)
        await dispatcher.close()
    assert alerts == [0, 0, 1, 1]
    auth = dispatcher.metrics.registry.get_sample_value(
        "fenceline_delivery_alerts_total", {"kind": "auth"}
    )
    assert auth == 1.0


async def test_other_4xx_fails_without_retry(dsn: str, pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    with receiver as erp:
        erp.faults.set("status", status=400)
        [job] = await succeed_jobs(store, tenant, 1)
        dispatcher = dispatcher_for(pool, clock=clock)
        assert (await dispatcher.run_once()).count("failed") == 1
        clock.advance(7 * 86400)
        assert (await dispatcher.run_once()).claimed == 0
        await dispatcher.close()
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    assert (row["state"], row["final_reason"], row["attempts"]) == (
        "failed",
        "rejected_http_400",
        1,
    )


async def test_per_endpoint_concurrency_is_bounded_across_dispatchers(
    dsn: str, pool: asyncpg.Pool
) -> None:
    store = job_store(pool)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    jobs = await succeed_jobs(store, tenant, 8)
    with receiver as erp:
        erp.faults.set("hang_after_commit", hang_seconds=0.2)
        pools = [await create_pool(dsn, min_size=1, max_size=4) for _ in range(2)]
        # A generous timeout: on a loaded machine a 2 s one turned a slow answer
        # into a retry scheduled beyond the loop (7 of 8 delivered).
        dispatchers = [
            dispatcher_for(p, per_endpoint_concurrency=2, timeout_seconds=10.0) for p in pools
        ]
        delivered, rounds = 0, []
        deadline = asyncio.get_running_loop().time() + 60
        while delivered < 8 and asyncio.get_running_loop().time() < deadline:
            reports = await asyncio.gather(*(d.run_once() for d in dispatchers))
            rounds.append(reports)
            done = sum(r.count("delivered") for r in reports)
            delivered += done
            if not done:
                await asyncio.sleep(0.05)
        for d, p in zip(dispatchers, pools, strict=True):
            await d.close()
            await p.close()
        assert delivered == 8, rounds
        assert erp.stats.max_in_flight == 2
    assert await postings(pool, erp.ledger) == dict.fromkeys(jobs, 1)


async def test_a_stale_dispatcher_cannot_commit_after_its_lease_was_reaped(
    dsn: str, pool: asyncpg.Pool
) -> None:
    clock = ManualClock()
    store = job_store(pool, clock)
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool, clock), tenant, clock=clock)
    with receiver as erp:
        [job] = await succeed_jobs(store, tenant, 1)
        slow = dispatcher_for(pool, clock=clock, lease_seconds=30)
        other = dispatcher_for(pool, clock=clock)
        seen = {}

        async def meanwhile(claim: object, outcome: object) -> None:
            clock.advance(31)
            seen["other"] = await other.run_once()

        slow.after_response = meanwhile
        report = await slow.run_once()
        await slow.close()
        await other.close()
    assert report.count("stale") == 1
    assert seen["other"].reaped == 1 and seen["other"].count("delivered") == 1
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    # claim (fence 1), reaped (fence 2), claimed again (fence 3): two attempts.
    assert (row["state"], row["fence"], row["attempts"]) == ("delivered", 3, 2)
    attempts = await DeliveryStore(pool).attempts(tenant.id, row["id"])
    assert [a["outcome"] for a in attempts] == ["lease_expired", "delivered"]
    assert erp.stats.delivery_ids == [str(row["id"])] * 2
    assert erp.stats.results == {"accepted": 1, "duplicate": 1}
    assert await postings(pool, erp.ledger) == {job: 1}


async def test_ssrf_matrix_is_rejected_at_registration(pool: asyncpg.Pool) -> None:
    registry = EndpointRegistry(pool, EgressGuard(EgressPolicy()), TEST_BOX)
    tenant = await new_tenant(pool)
    reasons = {}
    for url in ssrf_urls(443):
        with pytest.raises(EgressBlocked) as err:
            await registry.register(tenant.id, url)
        reasons[url] = err.value.reason
    endpoints = "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1"
    assert await fetchval(pool, endpoints, tenant.id) == 0
    assert reasons["https://127.1:443/hook"] == "numeric_host"
    assert reasons["https://[64:ff9b::7f00:1]:443/hook"] == "nat64_loopback"
    assert reasons["https://169.254.169.254:443/hook"] == "metadata"
    assert reasons["file:///etc/passwd"] == "scheme"
    assert reasons["https://a.com@127.0.0.1:443/hook"] == "userinfo"


async def test_ssrf_matrix_is_rejected_at_connect_time(pool: asyncpg.Pool) -> None:
    """Rows that bypassed registration (an older policy, a tampered row, even one marked
    verified) still never connect."""
    tenant = await new_tenant(pool)
    store = job_store(pool)
    async with Canary() as canary:
        urls = [*ssrf_urls(canary.port), f"http://127.0.0.1:{canary.port}/hook"]
        async with pool.acquire() as conn:
            for url in urls:
                endpoint_id = uuid.uuid4()
                await conn.execute(
                    "INSERT INTO webhook_endpoints (id, tenant_id, url, verification,"
                    " verified_at) VALUES ($1, $2, $3, 'verified', now())",
                    endpoint_id,
                    tenant.id,
                    url,
                )
                await conn.execute(
                    "INSERT INTO webhook_endpoint_keys (endpoint_id, key_id, sealed_secret,"
                    " created_at) VALUES ($1, 'k1', $2, now())",
                    endpoint_id,
                    TEST_BOX.seal(generate_secret(), endpoint_id=endpoint_id, key_id="k1"),
                )
        await succeed_jobs(store, tenant, 1)
        policy = EgressPolicy(allowed_ports=frozenset({443, canary.port}))
        dispatcher = dispatcher_for(pool, policy=policy, per_endpoint_concurrency=1)
        report = await dispatcher.run_once()
        await dispatcher.close()
        assert report.count("retry_scheduled") == len(urls)
        assert canary.connections == 0
    rows = await fetch(
        pool,
        "SELECT a.error_class, a.address FROM delivery_attempts a"
        " JOIN deliveries d ON d.id = a.delivery_id WHERE d.tenant_id = $1",
        tenant.id,
    )
    assert rows == [{"error_class": "egress_blocked", "address": None}] * len(urls)
    events = await fetchval(
        pool,
        "SELECT count(*) FROM endpoint_events WHERE kind = 'egress_blocked' AND tenant_id = $1",
        tenant.id,
    )
    assert events == len(urls)


async def test_dns_rebinding_is_blocked_at_connect_time(pool: asyncpg.Pool) -> None:
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])
    calls = []

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    tenant = await new_tenant(pool)
    registry = EndpointRegistry(pool, EgressGuard(EgressPolicy(), rebinding), TEST_BOX)
    issued = await registry.register(tenant.id, "https://erp.rebind.example/hook")  # global
    # Verified while the name still answered a global address (the challenge is
    # guarded the same way: tests/integration/test_endpoint_verification.py).
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE webhook_endpoints SET verification = 'verified', verified_at = now()"
            " WHERE id = $1",
            issued.endpoint.id,
        )
    store = job_store(pool)
    [job] = await succeed_jobs(store, tenant, 1)
    dispatcher = dispatcher_for(pool, resolver=rebinding, policy=EgressPolicy())
    assert (await dispatcher.run_once()).count("retry_scheduled") == 1
    await dispatcher.close()
    assert calls == ["erp.rebind.example"] * 2  # resolved once per use, never again to connect
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    assert row["last_error"].startswith("egress_blocked: loopback")


async def test_delivery_actor_delivers_in_the_background(dsn: str, pool: asyncpg.Pool) -> None:
    tenant = await new_tenant(pool)
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tenant)
    settings = Settings(
        database_url=dsn,
        delivery_allow_loopback_http=True,
        webhook_secret_key=base64.b64encode(bytes(range(32))).decode(),
        delivery_poll_seconds=30.0,  # only the NOTIFY / hand-off can wake it in time
    )
    actor = DeliveryActor(settings, worker_id="actor-test")
    assert await actor.notify("nothing yet") is False
    assert actor.health() == {}
    with receiver as erp:
        await actor.start()
        assert actor.health()["dispatcher"]["running"] is True
        [job] = await succeed_jobs(job_store(pool), tenant, 1)
        assert await actor.notify(str(job)) is True
        assert await asyncio.to_thread(erp.stats.wait_for, "accepted", 1, 10.0)
        await actor.stop()  # waits for the in-flight attempt to commit
    [row] = await DeliveryStore(pool).list_for_job(tenant.id, job)
    assert row["state"] == "delivered"
    assert await postings(pool, erp.ledger) == {job: 1}
