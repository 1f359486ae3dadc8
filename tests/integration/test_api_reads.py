"""Status, result, listing and review routes against the real PostgreSQL."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from pipeline.api import create_app
from pipeline.errors import ProviderRateLimited
from pipeline.jobs import EVENT_COMPLETED, EVENT_FAILED, JobStore
from pipeline.queries import q
from pipeline.states import JobState
from pipeline.usage import AttemptUsage
from pipeline.validation import unvalidated_outcome
from tests.support.api import (
    add_key,
    asgi_client,
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


async def _post(client, tk, text: str | None = None) -> uuid.UUID:  # type: ignore[no-untyped-def]
    r = await client.post("/v1/extraction-jobs", json=submission(text), headers=tk.headers)
    assert r.status_code == 202, r.text
    return uuid.UUID(r.json()["job_id"])


async def test_status_shows_summary_to_owner_and_retry_details_to_operator(
    pool: asyncpg.Pool, dsn: str
) -> None:
    owner = await tenant_with_key(pool)
    operator = await add_key(pool, owner, ("jobs", "operator"))
    app = create_app(settings_for(dsn), pool=pool)
    store = JobStore(pool)
    async with asgi_client(app) as client:
        job_id = await _post(client, owner)
        (lease,) = await store.claim("worker-7")
        await store.retry_or_fail(
            lease,
            ProviderRateLimited("429 from provider", retry_after=30),
            usage=AttemptUsage(12, 0),
        )
        mine = (await client.get(f"/v1/extraction-jobs/{job_id}", headers=owner.headers)).json()
        ops = (await client.get(f"/v1/extraction-jobs/{job_id}", headers=operator.headers)).json()
    assert mine["state"] == ops["state"] == "RETRY_SCHEDULED"
    assert mine["state_version"] == 3
    assert mine["attempts"] == {"count": 1, "max_attempts": 5}
    assert mine["operational"] is None
    assert "worker-7" not in str(mine) and "429 from provider" not in str(mine)
    details = ops["operational"]
    assert details["last_error_class"] == "rate_limited"
    assert details["attempts"][0]["worker_id"] == "worker-7"
    assert details["attempts"][0]["outcome"] == "retry_scheduled"
    assert details["attempts"][0]["prompt_tokens"] == 12


async def test_result_is_409_until_there_is_one(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    store = JobStore(pool)
    async with asgi_client(app) as client:
        job_id = await _post(client, tk)
        early = await client.get(f"/v1/extraction-jobs/{job_id}/result", headers=tk.headers)
        (lease,) = await store.claim("w")
        await store.succeed(lease, result={"total": "10.00", "currency": "EUR"})
        done = await client.get(f"/v1/extraction-jobs/{job_id}/result", headers=tk.headers)
        status = await client.get(f"/v1/extraction-jobs/{job_id}", headers=tk.headers)
    assert early.status_code == 409 and early.json()["reason"] == "result_not_available"
    assert early.json()["state"] == "READY"
    assert done.status_code == 200
    assert done.json()["result"] == {"total": "10.00", "currency": "EUR"}
    assert done.json()["decision"] == "SUCCEEDED"
    assert status.json()["result_url"] == f"/v1/extraction-jobs/{job_id}/result"


async def test_list_pages_with_a_keyset_cursor_and_filters_by_state(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    store = JobStore(pool)
    async with asgi_client(app) as client:
        ids = [await _post(client, tk) for _ in range(7)]
        (lease,) = await store.claim("w")
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params: dict[str, str | int] = {"limit": 3}
            if cursor:
                params["cursor"] = cursor
            r = await client.get("/v1/extraction-jobs", params=params, headers=tk.headers)
            assert r.status_code == 200
            page = r.json()
            pages += 1
            seen += [i["job_id"] for i in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
            # A job accepted between pages never shifts the pages already seen.
            if pages == 1:
                ids.append(await _post(client, tk))
        running = await client.get(
            "/v1/extraction-jobs", params={"state": "RUNNING"}, headers=tk.headers
        )
        bad = await client.get(
            "/v1/extraction-jobs", params={"cursor": "bm90LWEtY3Vyc29y"}, headers=tk.headers
        )
    assert pages == 3
    assert seen == [str(i) for i in reversed(ids[:7])]
    assert [i["job_id"] for i in running.json()["items"]] == [str(lease.job_id)]
    assert bad.status_code == 400 and bad.json()["reason"] == "invalid_cursor"


async def _review_required(store: JobStore) -> tuple[uuid.UUID, int]:
    (lease,) = await store.claim("w")
    settled = await store.succeed(
        lease,
        result={"total": "10.00"},
        validation={"reasons": [{"code": "arithmetic"}]},
        decision=JobState.REVIEW_REQUIRED,
    )
    return lease.job_id, settled.state_version


@pytest.mark.parametrize(
    ("decision", "state", "event"),
    [("approve", "SUCCEEDED", EVENT_COMPLETED), ("reject", "FAILED_TERMINAL", EVENT_FAILED)],
)
async def test_review_decision_is_conditional_audited_and_emits_an_event(
    pool: asyncpg.Pool, dsn: str, decision: str, state: str, event: str
) -> None:
    tk = await tenant_with_key(pool)
    reviewer = await add_key(pool, tk, ("jobs", "review"))
    store = JobStore(pool)
    settled_hooks: list[JobState] = []

    async def hook(conn: asyncpg.Connection, s) -> None:  # type: ignore[no-untyped-def]
        settled_hooks.append(s.state)

    app = create_app(settings_for(dsn), pool=pool, settle_hooks=[hook])
    async with asgi_client(app) as client:
        await _post(client, tk)
        job_id, version = await _review_required(store)
        shown = (await client.get(f"/v1/extraction-jobs/{job_id}", headers=tk.headers)).json()
        url = f"/v1/extraction-jobs/{job_id}/review"
        body = {"decision": decision, "note": "checked totals by hand", "state_version": version}
        no_scope = await client.post(url, json=body, headers=tk.headers)
        stale = await client.post(
            url, json={**body, "state_version": version - 1}, headers=reviewer.headers
        )
        ok = await client.post(url, json=body, headers=reviewer.headers)
        twice = await client.post(url, json=body, headers=reviewer.headers)
        after = (await client.get(f"/v1/extraction-jobs/{job_id}", headers=tk.headers)).json()
    assert shown["state"] == "REVIEW_REQUIRED" and shown["review_reasons"] == "arithmetic"
    assert no_scope.status_code == 403
    assert stale.status_code == 409 and stale.json()["state_version"] == version
    assert ok.status_code == 200, ok.text
    assert ok.json()["state"] == state and ok.json()["state_version"] == version + 1
    assert twice.status_code == 409 and twice.json()["state"] == state
    assert after["state"] == state and after["finished_at"] is not None
    async with pool.acquire() as conn:
        audit = await conn.fetch("SELECT * FROM review_decisions WHERE job_id = $1", job_id)
        events = await conn.fetch(
            "SELECT event_type, payload FROM outbox_events WHERE job_id = $1 ORDER BY created_at",
            job_id,
        )
    assert len(audit) == 1
    assert audit[0]["api_key_id"] == reviewer.key_id and audit[0]["note"] == body["note"]
    assert (audit[0]["from_state_version"], audit[0]["to_state_version"]) == (
        version,
        version + 1,
    )
    assert events[-1]["event_type"] == event and events[-1]["payload"]["review"] == decision
    # The job store's settle hooks (e.g. delivery creation) ran for the review too.
    assert settled_hooks[-1] == JobState(state)


async def test_review_refuses_to_approve_raw_output_that_failed_schema_validation(
    pool: asyncpg.Pool, dsn: str
) -> None:
    """A job sent to review because every answer was malformed holds the raw output:
    approving it would deliver what no rule checked, so approve is a 409 problem
    (in the API and in the conditional update itself) and only reject moves it on."""
    tk = await tenant_with_key(pool)
    reviewer = await add_key(pool, tk, ("jobs", "review"))
    store = JobStore(pool)
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        job_id = await _post(client, tk)
        (lease,) = await store.claim("w")
        result, validation = unvalidated_outcome('{"not": "an invoice"}', "supplier: missing")
        settled = await store.succeed(
            lease, result=result, validation=validation, decision=JobState.REVIEW_REQUIRED
        )
        version = settled.state_version
        url = f"/v1/extraction-jobs/{job_id}/review"
        body = {"decision": "approve", "note": "looks fine to me", "state_version": version}
        approve = await client.post(url, json=body, headers=reviewer.headers)
        after = (await client.get(f"/v1/extraction-jobs/{job_id}", headers=tk.headers)).json()
        async with pool.acquire() as conn:
            direct = await conn.fetchrow(
                q("job_decide_review_if_pending"), job_id, tk.tenant.id, version, "SUCCEEDED"
            )
        rejection = {**body, "decision": "reject", "note": "not an invoice"}
        reject = await client.post(url, json=rejection, headers=reviewer.headers)
    assert approve.status_code == 409, approve.text
    assert approve.headers["content-type"] == "application/problem+json"
    assert approve.json()["reason"] == "result_not_approvable"
    assert approve.json()["state"] == "REVIEW_REQUIRED"
    assert (after["state"], after["state_version"]) == ("REVIEW_REQUIRED", version)
    assert direct is None  # the SQL guard holds even without the service's check
    assert reject.status_code == 200, reject.text
    assert reject.json()["state"] == "FAILED_TERMINAL"
    async with pool.acquire() as conn:
        audit = await conn.fetch("SELECT decision FROM review_decisions WHERE job_id = $1", job_id)
        events = await conn.fetch("SELECT event_type FROM outbox_events WHERE job_id = $1", job_id)
    assert [a["decision"] for a in audit] == ["reject"]
    assert EVENT_COMPLETED not in {e["event_type"] for e in events}
