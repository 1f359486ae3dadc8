"""The tenant's delivery log (issue 47, item 6): ``/v1/deliveries`` and test events.

Real PostgreSQL, the reference ERP receiver as a real loopback HTTP server, the API
in process. Tenant scoping and keyset pages; a resend is a new attempt under the same
delivery id that the ERP deduplicates (one posting); refusals write nothing; a test
event is signed, goes through the egress guard, and is never an ERP posting.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.delivery.claims import Claim
from pipeline.delivery.egress_client import HttpOutcome
from pipeline.documents import FolderStore
from pipeline.jobs import EraseRequest, erase_job
from tests.support.api import (
    TenantKey,
    add_key,
    asgi_client,
    assert_problem,
    loopback_server,
    settings_for,
    tenant_with_key,
)
from tests.support.console import console_login, form_token
from tests.support.delivery import (
    dispatcher_for,
    fetch,
    fetchval,
    job_store,
    postings,
    registry_for,
    reserve_receiver,
    succeed_jobs,
)

pytestmark = pytest.mark.integration

#: The key tests/support/delivery.py seals endpoint secrets with, as the API reads it.
KEK = base64.b64encode(bytes(range(32))).decode()


def api(dsn: str, pool: asyncpg.Pool, **settings: Any) -> httpx.AsyncClient:
    return asgi_client(create_app(settings_for(dsn, webhook_secret_key=KEK, **settings), pool=pool))


async def _deliveries_of(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> list[dict[str, Any]]:
    return await fetch(
        pool,
        "SELECT id, job_id, endpoint_id, state, updated_at, attempts FROM deliveries"
        " WHERE tenant_id = $1 ORDER BY created_at DESC, id",
        tenant_id,
    )


async def test_the_log_is_tenant_scoped_filtered_and_paged_by_keyset(
    pool: asyncpg.Pool, dsn: str
) -> None:
    a = await tenant_with_key(pool)
    b = await tenant_with_key(pool)
    reg = registry_for(pool)
    ends = [
        (await reg.register(a.tenant.id, f"https://93.184.216.34/a{i}")).endpoint.id
        for i in range(2)
    ]
    await reg.register(b.tenant.id, "https://93.184.216.34/b")
    store = job_store(pool)
    jobs = await succeed_jobs(store, a.tenant, 3)
    [b_job] = await succeed_jobs(store, b.tenant, 1)
    mine = await _deliveries_of(pool, a.tenant.id)
    [theirs] = await _deliveries_of(pool, b.tenant.id)
    assert len(mine) == 6 and theirs["job_id"] == b_job

    async with api(dsn, pool) as c:
        first = (await c.get("/v1/deliveries", params={"limit": 4}, headers=a.headers)).json()
        second = await c.get(
            "/v1/deliveries", params={"limit": 4, "cursor": first["next_cursor"]}, headers=a.headers
        )
        by_job = await c.get("/v1/deliveries", params={"job_id": str(jobs[0])}, headers=a.headers)
        by_end = await c.get(
            "/v1/deliveries", params={"endpoint_id": str(ends[1])}, headers=a.headers
        )
        pending = await c.get("/v1/deliveries", params={"state": "pending"}, headers=a.headers)
        delivered = await c.get("/v1/deliveries", params={"state": "delivered"}, headers=a.headers)
        foreign_job = await c.get(
            "/v1/deliveries", params={"job_id": str(b_job)}, headers=a.headers
        )
        foreign = await c.get(f"/v1/deliveries/{theirs['id']}", headers=a.headers)
        missing = await c.get(f"/v1/deliveries/{uuid.uuid4()}", headers=a.headers)
        own = await c.get(f"/v1/deliveries/{mine[0]['id']}", headers=a.headers)
        bad_cursor = await c.get("/v1/deliveries", params={"cursor": "bm90LWEtY3Vyc29y"},
                                 headers=a.headers)  # fmt: skip
        unknown_state = await c.get("/v1/deliveries", params={"state": "x"}, headers=a.headers)

    assert second.status_code == 200
    page2 = second.json()
    assert first["next_cursor"] and page2["next_cursor"] is None
    listed = [d["id"] for d in first["items"] + page2["items"]]
    assert listed == [str(d["id"]) for d in mine]  # newest first, nothing skipped or repeated
    assert {d["job_id"] for d in by_job.json()["items"]} == {str(jobs[0])}
    assert len(by_job.json()["items"]) == 2
    assert {d["endpoint_id"] for d in by_end.json()["items"]} == {str(ends[1])}
    assert len(by_end.json()["items"]) == 3
    assert len(pending.json()["items"]) == 6 and delivered.json()["items"] == []
    assert foreign_job.json() == {"items": [], "next_cursor": None}
    assert_problem(foreign, 404, "not_found")
    assert foreign.json() == missing.json()
    assert str(b.tenant.id) not in foreign.text and str(theirs["id"]) not in foreign.text
    assert own.status_code == 200
    assert own.json()["attempt_log"] == [] and own.json()["resendable"] is True
    assert_problem(bad_cursor, 400, "invalid_cursor")
    assert unknown_state.status_code == 422


async def _delivered_once(
    pool: asyncpg.Pool, dsn: str
) -> tuple[Any, TenantKey, TenantKey, uuid.UUID, uuid.UUID]:
    """A receiver, a tenant (jobs key, operator key) whose one job was delivered once."""
    tk = await tenant_with_key(pool)
    op = await add_key(pool, tk, ("operator",))
    receiver, _ = await reserve_receiver(dsn, registry_for(pool), tk.tenant)
    receiver.__enter__()
    [job_id] = await succeed_jobs(job_store(pool), tk.tenant, 1)
    report = await dispatcher_for(pool).run_once()  # verifies the endpoint, then delivers
    assert report.outcomes == {"delivered": 1}
    delivery_id = await fetchval(pool, "SELECT id FROM deliveries WHERE job_id = $1", job_id)
    return receiver, tk, op, job_id, delivery_id


async def test_resend_is_a_new_attempt_of_the_same_delivery_and_the_erp_posts_once(
    pool: asyncpg.Pool, dsn: str
) -> None:
    receiver, tk, op, job_id, delivery_id = await _delivered_once(pool, dsn)
    try:
        async with api(dsn, pool) as c:
            by_jobs_key = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=tk.headers)
            one = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
            two = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
            report = await dispatcher_for(pool).run_once()
            detail = (await c.get(f"/v1/deliveries/{delivery_id}", headers=tk.headers)).json()
        inbox = await fetch(
            pool,
            "SELECT delivery_id, duplicates FROM erp_inbox WHERE ledger = $1",
            receiver.ledger,
        )
        posted = await postings(pool, receiver.ledger)
        seen = list(receiver.stats.delivery_ids)
    finally:
        receiver.__exit__()
    assert_problem(by_jobs_key, 403, "scope")
    assert one.status_code == 202 and two.status_code == 202
    assert (one.json()["state"], one.json()["attempts"]) == ("pending", 1)
    assert report.outcomes == {"delivered": 1}  # two resends before the dispatcher: one attempt
    assert (detail["state"], detail["attempts"], detail["id"]) == ("delivered", 2, str(delivery_id))
    log = detail["attempt_log"]
    assert [(x["attempt"], x["outcome"], x["http_status"]) for x in log] == [
        (1, "delivered", 200),
        (2, "delivered", 200),
    ]
    assert {x["webhook_id"] for x in log} == {str(delivery_id)}
    assert all(x["latency_ms"] >= 0 and x["signature_key_ids"] == ["k1"] for x in log)
    assert all(isinstance(x["webhook_timestamp"], int) and x["finished_at"] for x in log)
    # The ERP saw the same webhook-id twice and posted the invoice once.
    assert seen == [str(delivery_id)] * 2
    assert inbox == [{"delivery_id": str(delivery_id), "duplicates": 1}]
    assert posted == {job_id: 1}
    events = await fetch(
        pool, "SELECT detail FROM endpoint_events WHERE kind = 'resent' ORDER BY seq"
    )
    assert [e["detail"] for e in events] == [f"delivery {delivery_id} by key:{op.key_id}"] * 2


async def test_a_resend_is_refused_in_flight_after_erasure_or_retention_and_writes_nothing(
    pool: asyncpg.Pool, dsn: str, tmp_path: Any
) -> None:
    receiver, tk, op, job_id, delivery_id = await _delivered_once(pool, dsn)
    answers: list[httpx.Response] = []
    try:
        async with api(dsn, pool) as c:
            dispatcher = dispatcher_for(pool)

            async def resend_while_in_flight(claim: Claim, _: HttpOutcome) -> None:
                answers.append(
                    await c.post(f"/v1/deliveries/{claim.id}/resend", headers=op.headers)
                )

            dispatcher.after_response = resend_while_in_flight
            assert (
                await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
            ).is_success
            assert (await dispatcher.run_once()).outcomes == {"delivered": 1}

            # Retention empties a finished delivery's body (pipeline/jobs/retention.py).
            [other] = await succeed_jobs(job_store(pool), tk.tenant, 1)
            dispatcher.after_response = None
            await dispatcher.run_once()
            kept = await fetchval(pool, "SELECT id FROM deliveries WHERE job_id = $1", other)
            await fetchval(pool, "UPDATE deliveries SET body = '' WHERE id = $1 RETURNING id", kept)
            removed = await c.post(f"/v1/deliveries/{kept}/resend", headers=op.headers)

            await erase_job(pool, tk.tenant.id, job_id, EraseRequest("test"), FolderStore(tmp_path))
            erased_before = await _deliveries_of(pool, tk.tenant.id)
            erased = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
            after = await _deliveries_of(pool, tk.tenant.id)
            shown = (await c.get(f"/v1/deliveries/{kept}", headers=tk.headers)).json()
    finally:
        receiver.__exit__()
    [in_flight] = answers
    body = assert_problem(in_flight, 409, "in_flight")
    assert body["state"] == "in_flight"
    assert_problem(removed, 410, "body_removed")
    assert "retention" in removed.json()["detail"]
    assert_problem(erased, 410, "body_erased")
    assert "erased" in erased.json()["detail"]
    assert after == erased_before  # the refused resend wrote nothing
    assert shown["body_available"] is False and shown["resendable"] is False
    resent = await fetchval(pool, "SELECT count(*) FROM endpoint_events WHERE kind = 'resent'")
    assert resent == 1  # only the resend that was taken


async def test_a_resend_to_a_disabled_endpoint_is_refused(pool: asyncpg.Pool, dsn: str) -> None:
    receiver, tk, op, _job_id, delivery_id = await _delivered_once(pool, dsn)
    try:
        endpoint_id = await fetchval(
            pool, "SELECT endpoint_id FROM deliveries WHERE id = $1", delivery_id
        )
        await registry_for(pool).disable(tk.tenant.id, endpoint_id, "paused")
        before = await _deliveries_of(pool, tk.tenant.id)
        async with api(dsn, pool) as c:
            r = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
            other = await tenant_with_key(pool, scopes=("operator",))
            foreign = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=other.headers)
    finally:
        receiver.__exit__()
    assert_problem(r, 409, "endpoint_disabled")
    assert_problem(foreign, 404, "not_found")
    assert await _deliveries_of(pool, tk.tenant.id) == before


async def test_a_test_event_is_signed_guarded_and_never_an_erp_posting(
    pool: asyncpg.Pool, dsn: str
) -> None:
    receiver, tk, op, job_id, _delivery_id = await _delivered_once(pool, dsn)
    try:
        endpoint_id = await fetchval(
            pool, "SELECT id FROM webhook_endpoints WHERE tenant_id = $1", tk.tenant.id
        )
        pending = await registry_for(pool).register(tk.tenant.id, "https://93.184.216.34/new")
        path = f"/v1/webhook-endpoints/{endpoint_id}/test"
        async with api(dsn, pool, delivery_allow_loopback_http=True) as c:
            by_jobs_key = await c.post(path, headers=tk.headers)
            sent = await c.post(path, headers=op.headers)
            unverified = await c.post(
                f"/v1/webhook-endpoints/{pending.endpoint.id}/test", headers=op.headers
            )
            other = await tenant_with_key(pool, scopes=("operator",))
            foreign = await c.post(path, headers=other.headers)
        requests_after_test = receiver.stats.requests
        async with api(dsn, pool) as c:  # the production egress policy: loopback refused
            blocked = await c.post(path, headers=op.headers)
        inbox = await fetch(
            pool,
            "SELECT delivery_id, event_type, job_id FROM erp_inbox WHERE ledger = $1"
            " ORDER BY received_at",
            receiver.ledger,
        )
        posted = await postings(pool, receiver.ledger)
        requests_after_blocked = receiver.stats.requests
    finally:
        receiver.__exit__()
    assert_problem(by_jobs_key, 403, "scope")
    assert sent.status_code == 200, sent.text
    out = sent.json()
    assert out["delivered"] is True and out["http_status"] == 200
    assert out["webhook_id"].startswith("tst_") and out["event_type"] == "endpoint.test.v1"
    assert out["signature_key_ids"] == ["k1"]
    # The receiver verified its signature (it answers 401 otherwise) and posted nothing.
    assert inbox[-1] == {"delivery_id": out["webhook_id"], "event_type": "endpoint.test.v1",
                         "job_id": None}  # fmt: skip
    assert posted == {job_id: 1}
    assert_problem(unverified, 409, "not_verified")
    assert_problem(foreign, 404, "not_found")
    b = blocked.json()
    assert (b["delivered"], b["http_status"], b["error_class"]) == (False, None, "egress_blocked")
    assert requests_after_blocked == requests_after_test  # nothing reached the receiver
    events = await fetch(
        pool, "SELECT kind, detail FROM endpoint_events WHERE kind = 'tested' ORDER BY seq"
    )
    assert [e["detail"].split(":")[0] for e in events] == [out["webhook_id"], b["webhook_id"]]


async def test_erasing_a_job_whose_delivery_waits_after_a_resend_reports_it_sent(
    pool: asyncpg.Pool, dsn: str, tmp_path: Any
) -> None:
    receiver, tk, op, job_id, delivery_id = await _delivered_once(pool, dsn)
    try:
        async with api(dsn, pool) as c:
            r = await c.post(f"/v1/deliveries/{delivery_id}/resend", headers=op.headers)
        assert r.status_code == 202 and r.json()["state"] == "pending"
        erased = await erase_job(
            pool, tk.tenant.id, job_id, EraseRequest("test"), FolderStore(tmp_path)
        )
        state = await fetchval(pool, "SELECT state FROM deliveries WHERE id = $1", delivery_id)
    finally:
        receiver.__exit__()
    # The resend is stopped, and the copy the ERP received first is reported, not hidden.
    assert state == "abandoned"
    assert erased.deliveries_abandoned == (delivery_id,)
    assert erased.deliveries_sent == (delivery_id,)


async def test_the_console_resend_needs_the_session_token_the_scope_and_a_resendable_delivery(
    pool: asyncpg.Pool, dsn: str
) -> None:
    receiver, tk, op, _job_id, delivery_id = await _delivered_once(pool, dsn)
    reviewer = await add_key(pool, tk, ("jobs", "review"))
    both = await add_key(pool, tk, ("review", "operator"))
    path = f"/console/deliveries/{delivery_id}/resend"
    app = create_app(settings_for(dsn, webhook_secret_key=KEK), pool=pool)
    try:
        async with loopback_server(app) as base, httpx.AsyncClient(base_url=base) as c:
            await console_login(c, both)
            page = await c.get(f"/console/deliveries/{delivery_id}")
            without_token = await c.post(path, data={})
            unchanged = await _deliveries_of(pool, tk.tenant.id)
            by_reviewer = await c.post(path, headers=reviewer.headers)
            taken = await c.post(path, data={"csrf_token": form_token(page.text)})
            shown = await c.get(taken.headers["location"])
            endpoint_id = await fetchval(
                pool, "SELECT endpoint_id FROM deliveries WHERE id = $1", delivery_id
            )
            await registry_for(pool).disable(tk.tenant.id, endpoint_id, "paused")
            before = await _deliveries_of(pool, tk.tenant.id)
            refused = await c.post(path, headers=op.headers)
            refused_page = await c.get(f"/console/deliveries/{delivery_id}")
            after = await _deliveries_of(pool, tk.tenant.id)
    finally:
        receiver.__exit__()
    assert 'class="resend"' in page.text
    assert without_token.status_code == 403 and unchanged[0]["state"] == "delivered"
    assert by_reviewer.status_code == 403
    assert taken.status_code == 303
    assert taken.headers["location"] == f"/console/deliveries/{delivery_id}?flash=resent"
    assert "Resend queued" in shown.text and 'id="delivery-state">pending' in shown.text
    assert refused.status_code == 409 and "endpoint is disabled" in refused.text
    assert after == before
    assert 'class="resend"' not in refused_page.text and 'id="no-resend"' in refused_page.text
