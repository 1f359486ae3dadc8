"""A review approval through the deployed API creates its ERP delivery (issue 8).

A review approval is the only way a REVIEW_REQUIRED job becomes SUCCEEDED, and it
commits ``extraction.completed.v1`` through the API's own job store. The
deliveries must be created in that transaction, by the apps as they are deployed:
the Serve ingress (``deployments/intake.py`` builds the app inside the replica)
and ``uvicorn --factory pipeline.api.app:app_from_env``. Each runs here under a real
uvicorn on loopback with its own pool, exactly as built by its factory.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from deployments.intake import IntakeIngress
from pipeline.api.app import app_from_env
from pipeline.jobs import EVENT_COMPLETED, JobStore
from pipeline.states import JobState
from tests.support.api import TenantKey, loopback_server, submission, tenant_with_key
from tests.support.delivery import fetch, invoice, registry_for

pytestmark = pytest.mark.integration


def serve_ingress_app(dsn: str, _: pytest.MonkeyPatch) -> FastAPI:
    return IntakeIngress({"database_url": dsn}).__serve_build_asgi_app__()


def uvicorn_factory_app(dsn: str, monkeypatch: pytest.MonkeyPatch) -> FastAPI:
    monkeypatch.setenv("FENCELINE_DATABASE_URL", dsn)
    return app_from_env()


async def awaiting_review(
    client: httpx.AsyncClient, store: JobStore, tk: TenantKey
) -> tuple[uuid.UUID, int]:
    """A job of ``tk`` accepted over HTTP and settled REVIEW_REQUIRED by a driver."""
    r = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    assert r.status_code == 202, r.text
    (lease,) = await store.claim("driver")
    assert str(lease.job_id) == r.json()["job_id"]
    settled = await store.succeed(
        lease,
        result=invoice(1),
        validation={"reasons": [{"code": "arithmetic"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    return lease.job_id, settled.state_version


@pytest.mark.parametrize("make_app", [serve_ingress_app, uvicorn_factory_app])
async def test_an_approval_creates_one_pending_delivery_and_a_rejection_none(
    pool: asyncpg.Pool,
    dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    make_app: Callable[[str, pytest.MonkeyPatch], FastAPI],
) -> None:
    tk = await tenant_with_key(pool, scopes=("jobs", "review"))
    stranger = await tenant_with_key(pool)
    registry = registry_for(pool)
    active = await registry.register(tk.tenant.id, "http://127.0.0.1:9/erp")
    await registry.register(tk.tenant.id, "http://127.0.0.1:9/other", event_types=["other.v1"])
    off = await registry.register(tk.tenant.id, "http://127.0.0.1:9/off")
    await registry.disable(tk.tenant.id, off.endpoint.id)
    await registry.register(stranger.tenant.id, "http://127.0.0.1:9/stranger")
    store = JobStore(pool)  # the driver's store; review decisions use the app's own
    app = make_app(dsn, monkeypatch)
    async with loopback_server(app) as base, httpx.AsyncClient(base_url=base, timeout=10) as c:
        approved, v1 = await awaiting_review(c, store, tk)
        rejected, v2 = await awaiting_review(c, store, tk)
        decisions = [
            await c.post(
                f"/v1/extraction-jobs/{job}/review",
                json={"decision": decision, "note": "checked by hand", "state_version": v},
                headers=tk.headers,
            )
            for job, v, decision in ((approved, v1, "approve"), (rejected, v2, "reject"))
        ]
    assert [d.status_code for d in decisions] == [200, 200], [d.text for d in decisions]
    assert [d.json()["state"] for d in decisions] == ["SUCCEEDED", "FAILED_TERMINAL"]
    rows = await fetch(
        pool,
        "SELECT * FROM deliveries WHERE tenant_id = ANY($1::uuid[]) ORDER BY created_at",
        [tk.tenant.id, stranger.tenant.id],
    )
    # Exactly one: the active endpoint that takes the event, for the approved job only.
    assert [(r["endpoint_id"], r["job_id"], r["state"], r["attempts"]) for r in rows] == [
        (active.endpoint.id, approved, "pending", 0)
    ]
    body = json.loads(bytes(rows[0]["body"]))
    assert (body["type"], body["data"]["job_id"]) == (EVENT_COMPLETED, str(approved))
    assert body["data"]["result"] == invoice(1)
    # ... committed with the completion event of that same job.
    events = await fetch(
        pool,
        "SELECT job_id FROM outbox_events WHERE event_type = $1 AND job_id = ANY($2::uuid[])",
        EVENT_COMPLETED,
        [approved, rejected],
    )
    assert [e["job_id"] for e in events] == [approved]
