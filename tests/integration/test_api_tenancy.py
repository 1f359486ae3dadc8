"""Cross-tenant matrix generated from the app's route table.

Tenant A's key (with every scope) is tried on every route of the app, with
tenant B's resource ids in every path parameter. Each resource route must answer
404 exactly as for a missing resource, and no response may contain any of B's
identifiers or document text. The matrix is derived from ``app.routes``: a route
with a path parameter or a body the matrix does not know fails the test, and a
route that skips the tenant check fails it too (proven below with a leaky route).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.routing import APIRoute

from pipeline.api import create_app
from pipeline.delivery import job_store as delivery_job_store
from pipeline.jobs import JobStore
from pipeline.states import JobState
from tests.support.api import (
    TenantKey,
    add_key,
    loopback_server,
    settings_for,
    settle_leftovers,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn(module_dsn: str) -> str:
    """One database per module; each test starts with no runnable job of another test."""
    return module_dsn


@pytest.fixture(autouse=True)
async def _isolated(module_dsn: str) -> None:
    await settle_leftovers(module_dsn)


#: Routes that are deliberately not tenant resources.
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    # The console's sign-in and its static assets hold no tenant data.
    ("GET", "/console/login"),
    ("POST", "/console/login"),
    ("GET", "/console/static/console.js"),
    ("GET", "/console/static/console.css"),
    # An ERP's acknowledgement: authenticated by the endpoint's signature, not by a
    # tenant's key; a foreign or unknown delivery is a 401 like a bad signature
    # (tests/integration/test_delivery_acknowledgements.py).
    ("POST", "/v1/deliveries/{delivery_id}/acknowledgement"),
}


@dataclass
class Victim:
    tenant: TenantKey
    job_id: uuid.UUID
    state_version: int
    secret_text: str
    idempotency_key: str
    endpoint_id: str
    endpoint_url: str
    endpoint_secret: str
    #: A delivery of B's second (SUCCEEDED) job to that endpoint.
    delivery_id: str

    def markers(self) -> list[str]:
        return [
            str(self.job_id),
            str(self.tenant.tenant.id),
            self.tenant.tenant.name,
            self.secret_text,
            self.idempotency_key,
            self.endpoint_id,
            self.endpoint_url,
            self.endpoint_secret,
            self.delivery_id,
        ]


async def make_victim(pool: asyncpg.Pool, client: httpx.AsyncClient) -> Victim:
    b = await tenant_with_key(pool)
    text = f"B-CONFIDENTIAL-{uuid.uuid4().hex}"
    key = f"b-key-{uuid.uuid4().hex[:8]}"
    r = await client.post(
        "/v1/extraction-jobs",
        json=submission(text),
        headers={**b.headers, "Idempotency-Key": key},
    )
    assert r.status_code == 202
    store = JobStore(pool)
    (lease,) = await store.claim("victim-worker")
    settled = await store.succeed(
        lease,
        result={"supplier": text},
        validation={"reasons": [{"code": "supplier"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    # B's webhook endpoint (a global literal address: no DNS, allowed by the default policy).
    url = f"https://93.184.216.34/hooks/b-{uuid.uuid4().hex}"
    b_operator = await add_key(pool, b, ("operator",))
    r = await client.post("/v1/webhook-endpoints", json={"url": url}, headers=b_operator.headers)
    assert r.status_code == 201, r.text
    endpoint = r.json()
    # A second job of B succeeds after the endpoint exists: it has a delivery.
    r = await client.post("/v1/extraction-jobs", json=submission(f"{text} 2"), headers=b.headers)
    assert r.status_code == 202
    delivering = delivery_job_store(pool)
    (lease2,) = await delivering.claim("victim-worker")
    await delivering.succeed(lease2, result={"supplier": text})
    async with pool.acquire() as conn:
        delivery_id = await conn.fetchval(
            "SELECT id FROM deliveries WHERE job_id = $1", lease2.job_id
        )
    return Victim(
        b,
        lease.job_id,
        settled.state_version,
        text,
        key,
        endpoint["endpoint"]["id"],
        url,
        endpoint["secret"],
        str(delivery_id),
    )


async def _read(client: httpx.AsyncClient, method: str, url: str, **kw: Any) -> tuple[int, str]:
    """Status and body; an event stream is read until its snapshot or for one second."""
    async with client.stream(method, url, **kw) as r:
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            return r.status_code, (await r.aread()).decode()
        text = ""
        try:
            async with asyncio.timeout(1.0):
                async for chunk in r.aiter_text():
                    text += chunk
                    if "event: snapshot" in text:
                        break
        except TimeoutError:
            pass
        return r.status_code, text


async def cross_tenant_violations(
    app: FastAPI, client: httpx.AsyncClient, attacker: TenantKey, victim: Victim
) -> tuple[list[str], set[tuple[str, str]]]:
    """Try every route of ``app`` as ``attacker`` on ``victim``'s resources."""
    # A page that exists in any paged file: page 1 (tests/integration/
    # test_console_page_view.py tries another tenant's uploaded PDF as well).
    path_values = {
        "job_id": str(victim.job_id),
        "endpoint_id": victim.endpoint_id,
        "delivery_id": victim.delivery_id,
        "number": "1",
    }
    endpoint = "/v1/webhook-endpoints/{endpoint_id}"
    bodies: dict[tuple[str, str], dict[str, Any] | None] = {
        # A's own endpoint; B's URL must never show up in A's reads.
        ("POST", "/v1/webhook-endpoints"): {"url": "https://93.184.216.34/hooks/attacker"},
        ("POST", f"{endpoint}/rotate"): None,
        ("POST", f"{endpoint}/disable"): {"reason": "attacker"},
        ("POST", f"{endpoint}/enable"): None,
        ("POST", f"{endpoint}/verify"): None,
        ("POST", f"{endpoint}/test"): None,
        ("POST", "/v1/deliveries/{delivery_id}/resend"): None,
        ("POST", "/console/deliveries/{delivery_id}/resend"): None,
        ("PATCH", endpoint): {"url": "https://93.184.216.34/hooks/attacker"},
        ("POST", "/v1/extraction-jobs/{job_id}/review"): {
            "decision": "approve",
            "note": "attacker",
            "state_version": victim.state_version,
        },
        # Console forms (Bearer callers need no CSRF token; the body is the form).
        ("POST", "/console/logout"): None,
        ("POST", "/console/jobs/{job_id}/correct"): None,
        ("POST", "/console/jobs/{job_id}/reject"): None,
        ("POST", "/console/jobs/{job_id}/redrive"): None,
        ("POST", "/v1/extraction-jobs/{job_id}/redrive"): {"reason": "attacker"},
        ("POST", "/v1/redrives"): {"reason": "attacker"},
        ("POST", "/v1/extraction-jobs/{job_id}/cancel"): {"reason": "attacker"},
        # An operator erases its own tenant only (naming B's is 403: test_erasure.py);
        # its own erasure must touch nothing of B's.
        ("POST", "/v1/tenant-erasures"): {
            "confirm_tenant": str(attacker.tenant.id),
            "max_jobs": 1,
        },
        # Same key and same document as B: A must get its own job, never B's.
        ("POST", "/v1/extraction-jobs"): submission(victim.secret_text),
    }
    extra_headers = {("POST", "/v1/extraction-jobs"): {"Idempotency-Key": victim.idempotency_key}}
    queries = {
        ("GET", "/v1/extraction-jobs"): [{}, {"state": "REVIEW_REQUIRED"}],
        ("GET", "/v1/events"): [{}],
        ("GET", "/console/queue"): [{}, {"supplier": victim.secret_text}],
        ("GET", "/console/queue/rows"): [{}, {"reason": "supplier"}],
    }
    violations: list[str] = []
    covered: set[tuple[str, str]] = set()
    for route in app.routes:
        if not isinstance(route, APIRoute):
            continue  # the OpenAPI document and docs pages
        for method in sorted(route.methods):
            op = (method, route.path)
            if op in PUBLIC:
                continue
            covered.add(op)
            params = [p.name for p in route.dependant.path_params]
            unknown = [p for p in params if p not in path_values]
            if unknown:
                violations.append(f"{op}: path parameters {unknown} not covered by the matrix")
                continue
            if route.body_field is not None or method == "POST":
                if op not in bodies:
                    violations.append(f"{op}: takes a body the matrix does not know")
                    continue
            url = route.path.format(**path_values)
            headers = {**attacker.headers, **extra_headers.get(op, {})}
            for query in queries.get(op, [{}]):
                if op in {("GET", "/v1/events"), ("GET", "/console/events")}:
                    replay = {**headers, "Last-Event-ID": "0"}
                    status, text = await _read(client, method, url, headers=replay)
                    violations += _leaks(op, "replay", text, victim)
                kw: dict[str, Any] = {"headers": headers, "params": query}
                if op in bodies:
                    kw["json"] = bodies[op]
                status, text = await _read(client, method, url, **kw)
                if params and status != 404:
                    violations.append(f"{op}: {status} instead of 404 for another tenant's id")
                if not params and status >= 400:
                    violations.append(f"{op}: {status} for the attacker's own collection")
                # What the attacker sent itself may come back; nothing else of B may.
                sent = str(kw.get("json", "")) + str(headers) + str(query)
                violations += _leaks(op, str(query), text, victim, sent)
    return violations, covered


def _leaks(
    op: tuple[str, str], variant: str, text: str, victim: Victim, sent: str = ""
) -> list[str]:
    return [
        f"{op} {variant}: body contains {m!r}"
        for m in victim.markers()
        if m in text and m not in sent
    ]


async def test_tenant_a_sees_nothing_of_tenant_b_on_any_route(pool: asyncpg.Pool, dsn: str) -> None:
    app = create_app(settings_for(dsn), pool=pool)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        victim = await make_victim(pool, c)
        attacker = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
        # The attacker has its own job, so its collections are not trivially empty.
        own = await c.post("/v1/extraction-jobs", json=submission(), headers=attacker.headers)
        assert own.status_code == 202
        violations, covered = await cross_tenant_violations(app, c, attacker, victim)
        missing = await c.get(f"/v1/extraction-jobs/{uuid.uuid4()}", headers=attacker.headers)
        foreign = await c.get(f"/v1/extraction-jobs/{victim.job_id}", headers=attacker.headers)
    assert violations == []
    assert {
        ("GET", "/v1/extraction-jobs/{job_id}"),
        ("GET", "/v1/extraction-jobs/{job_id}/result"),
        ("GET", "/v1/extraction-jobs/{job_id}/events"),
        ("POST", "/v1/extraction-jobs/{job_id}/review"),
        ("GET", "/v1/extraction-jobs"),
        ("GET", "/v1/events"),
        ("POST", "/v1/extraction-jobs"),
        ("POST", "/v1/webhook-endpoints"),
        ("GET", "/v1/webhook-endpoints"),
        ("GET", "/v1/webhook-endpoints/{endpoint_id}"),
        ("POST", "/v1/webhook-endpoints/{endpoint_id}/rotate"),
        ("POST", "/v1/webhook-endpoints/{endpoint_id}/disable"),
        ("POST", "/v1/webhook-endpoints/{endpoint_id}/enable"),
        ("POST", "/v1/webhook-endpoints/{endpoint_id}/verify"),
        ("PATCH", "/v1/webhook-endpoints/{endpoint_id}"),
        ("GET", "/console/queue"),
        ("GET", "/console/queue/rows"),
        ("GET", "/console/jobs/{job_id}"),
        ("GET", "/console/jobs/{job_id}/state"),
        ("GET", "/console/jobs/{job_id}/timeline"),
        ("GET", "/console/jobs/{job_id}/events"),
        ("GET", "/console/jobs/{job_id}/pages/{number}.png"),
        ("POST", "/console/jobs/{job_id}/correct"),
        ("POST", "/console/jobs/{job_id}/reject"),
        ("GET", "/console/dashboard"),
        ("GET", "/console/dashboard/body"),
        ("GET", "/console/jobs"),
        ("POST", "/console/jobs/{job_id}/redrive"),
        ("GET", "/console/dead-letters"),
        ("GET", "/console/deliveries"),
        ("GET", "/console/endpoints/{endpoint_id}"),
        ("GET", "/console/deliveries/{delivery_id}"),
        ("POST", "/console/deliveries/{delivery_id}/resend"),
        ("GET", "/v1/deliveries"),
        ("GET", "/v1/deliveries/{delivery_id}"),
        ("POST", "/v1/deliveries/{delivery_id}/resend"),
        ("POST", "/v1/webhook-endpoints/{endpoint_id}/test"),
        ("GET", "/console/events"),
        ("POST", "/v1/extraction-jobs/{job_id}/redrive"),
        ("POST", "/v1/redrives"),
        ("POST", "/v1/extraction-jobs/{job_id}/cancel"),
        ("POST", "/v1/tenant-erasures"),
    } <= covered
    # Another tenant's job reads exactly like a missing one.
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    # B's job is untouched by the attempted review and cancellation.
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT state, state_version FROM extraction_jobs WHERE id = $1", victim.job_id
        )
        jobs_of_b = await conn.fetchval(
            "SELECT count(*) FROM extraction_jobs WHERE tenant_id = $1", victim.tenant.tenant.id
        )
        endpoint = await conn.fetchrow(
            "SELECT state, url, verification FROM webhook_endpoints WHERE id = $1",
            uuid.UUID(victim.endpoint_id),
        )
        keys = await conn.fetch(
            "SELECT key_id, retired_at FROM webhook_endpoint_keys WHERE endpoint_id = $1",
            uuid.UUID(victim.endpoint_id),
        )
        delivery = tuple(
            await conn.fetchrow(
                "SELECT state, attempts FROM deliveries WHERE id = $1",
                uuid.UUID(victim.delivery_id),
            )
        )
        kinds = [
            r["kind"]
            for r in await conn.fetch(
                "SELECT kind FROM endpoint_events WHERE endpoint_id = $1 ORDER BY seq",
                uuid.UUID(victim.endpoint_id),
            )
        ]
    assert (row["state"], row["state_version"]) == ("REVIEW_REQUIRED", victim.state_version)
    assert jobs_of_b == 2
    # B's delivery was not resent (it waits, unattempted, for B's endpoint's verification).
    assert delivery == ("pending", 0)
    assert kinds == ["registered"]
    # B's endpoint was neither disabled, rotated, re-pointed nor challenged by the attempts.
    assert endpoint["state"] == "active" and "attacker" not in endpoint["url"]
    assert endpoint["verification"] == "pending"
    assert [(k["key_id"], k["retired_at"]) for k in keys] == [("k1", None)]


async def test_a_route_without_a_tenant_check_fails_the_matrix(
    pool: asyncpg.Pool, dsn: str
) -> None:
    app = create_app(settings_for(dsn), pool=pool)

    @app.get("/v1/extraction-jobs/{job_id}/leak")
    async def leak(job_id: uuid.UUID, request: Request) -> dict[str, str]:
        async with pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT id, tenant_id FROM extraction_jobs WHERE id = $1", job_id
            )
        return {"job_id": str(row["id"]), "tenant_id": str(row["tenant_id"])}

    @app.get("/v1/webhook-endpoints/{endpoint_id}/leak")
    async def endpoint_leak(endpoint_id: uuid.UUID) -> dict[str, str]:
        async with pool.acquire() as conn:
            url = await conn.fetchval(
                "SELECT url FROM webhook_endpoints WHERE id = $1", endpoint_id
            )
        return {"url": url}

    @app.get("/v1/documents/{document_id}")
    async def unknown_param(document_id: uuid.UUID) -> dict[str, str]:
        return {}

    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        victim = await make_victim(pool, c)
        attacker = await tenant_with_key(pool, scopes=("jobs", "review", "operator"))
        violations, _ = await cross_tenant_violations(app, c, attacker, victim)
    assert any("/leak" in v and "instead of 404" in v for v in violations), violations
    assert any("/leak" in v and str(victim.job_id) in v for v in violations), violations
    assert any("endpoint_id}/leak" in v and victim.endpoint_url in v for v in violations)
    assert any("document_id" in v for v in violations), violations
