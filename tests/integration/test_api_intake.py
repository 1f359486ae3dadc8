"""POST /v1/extraction-jobs against the real PostgreSQL: durability, idempotency, input."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.api.app import MULTIPART_OVERHEAD_BYTES
from pipeline.database import create_pool
from pipeline.jobs import EVENT_REQUESTED, Accepted, JobStore
from tests.support.api import (
    WRITTEN_TABLES,
    asgi_client,
    count_rows,
    settings_for,
    settle_leftovers,
    submission,
    tenant_with_key,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def dsn(module_dsn: str) -> str:
    """One database for this module (tests are sequential; counts are deltas)."""
    return module_dsn


async def test_202_means_job_document_and_outbox_event_are_committed(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    text = "INVOICE 7 total 99.50 EUR"
    async with asgi_client(app) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            json=submission(text, options={"ocr_languages": "deu"}),
            headers={**tk.headers, "Idempotency-Key": "inv-7"},
        )
    assert r.status_code == 202, r.text
    body = r.json()
    job_id = uuid.UUID(body["job_id"])
    assert r.headers["location"] == f"/v1/extraction-jobs/{job_id}" == body["status_url"]
    assert body["state"] == "READY" and body["idempotency_key"] == "inv-7"
    # A fresh connection (not the request's) sees the committed rows.
    conn = await asyncpg.connect(dsn)
    try:
        job = await conn.fetchrow("SELECT * FROM extraction_jobs WHERE id = $1", job_id)
        assert job["tenant_id"] == tk.tenant.id and job["state"] == "READY"
        assert job["estimated_tokens"] > 0
        doc = await conn.fetchrow("SELECT * FROM documents WHERE id = $1", job["document_id"])
        digest = hashlib.sha256(text.encode()).hexdigest()
        assert doc["sha256"] == digest and doc["object_version"] == f"sha256:{digest}"
        assert job["object_version"] == doc["object_version"]
        events = await conn.fetch("SELECT * FROM outbox_events WHERE job_id = $1", job_id)
        assert [e["event_type"] for e in events] == [EVENT_REQUESTED]
        spend = await conn.fetchval(
            "SELECT reserved FROM tenant_spend WHERE tenant_id = $1", tk.tenant.id
        )
        assert spend > 0
    finally:
        await conn.close()


async def test_replay_returns_200_with_the_same_body(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    headers = {**tk.headers, "Idempotency-Key": "same"}
    body = submission("INVOICE A")
    async with asgi_client(app) as client:
        first = await client.post("/v1/extraction-jobs", json=body, headers=headers)
        again = await client.post("/v1/extraction-jobs", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json() == again.json()
    assert again.headers["location"] == first.headers["location"]
    async with pool.acquire() as conn:
        jobs = await conn.fetchval(
            "SELECT count(*) FROM extraction_jobs WHERE tenant_id = $1", tk.tenant.id
        )
        events = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE job_id = $1",
            uuid.UUID(first.json()["job_id"]),
        )
    assert (jobs, events) == (1, 1)


async def test_replay_after_the_job_moved_on_returns_the_original_receipt(
    pool: asyncpg.Pool, dsn: str
) -> None:
    await settle_leftovers(dsn)  # the claim below must find this test's job
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    headers = {**tk.headers, "Idempotency-Key": "moved-on"}
    body = submission("INVOICE moved on")
    async with asgi_client(app) as client:
        first = await client.post("/v1/extraction-jobs", json=body, headers=headers)
        (lease,) = await JobStore(pool).claim("w1")
        again = await client.post("/v1/extraction-jobs", json=body, headers=headers)
        status = await client.get(first.json()["status_url"], headers=tk.headers)
    assert (first.status_code, again.status_code) == (202, 200)
    assert str(lease.job_id) == first.json()["job_id"]
    # The job has moved on; the status URL says so ...
    assert (status.json()["state"], status.json()["state_version"]) == ("RUNNING", 2)
    # ... while the replay is the receipt as accepted, field by field.
    original, replay = first.json(), again.json()
    assert set(replay) == set(original)
    for name in original:
        assert replay[name] == original[name], name
    assert (replay["state"], replay["state_version"]) == ("READY", 1)
    assert again.headers["location"] == first.headers["location"] == original["status_url"]


async def test_100_parallel_posts_with_one_key_make_one_job_and_conflict_writes_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    # "large" is a configured pool: the other policy is honourable, so it is the key's
    # reuse for another request that is refused (409), not the policy (422).
    app = create_app(settings_for(dsn, model_pools=("large",)), pool=pool)
    headers = {**tk.headers, "Idempotency-Key": "parallel-1"}
    body = submission("INVOICE parallel total 1.00 EUR")
    start = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/extraction-jobs", json=body, headers=headers) for _ in range(100))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes.count(202) == 1 and codes.count(200) == 99, codes
        assert len({r.json()["job_id"] for r in responses}) == 1
        before = await count_rows(pool, *WRITTEN_TABLES)
        assert before["extraction_jobs"] - start["extraction_jobs"] == 1
        assert before["outbox_events"] - start["outbox_events"] == 1
        conflict = await client.post(
            "/v1/extraction-jobs", json=submission("INVOICE other"), headers=headers
        )
        other_policy = await client.post(
            "/v1/extraction-jobs",
            json={**body, "model_policy": "large"},
            headers=headers,
        )
    for r in (conflict, other_policy):
        assert r.status_code == 409
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["reason"] == "idempotency_conflict"
        assert r.json()["job_id"] == responses[0].json()["job_id"]
    assert await count_rows(pool, *WRITTEN_TABLES) == before


@pytest.mark.parametrize("key", ["has space", "k" * 201, "tab\tinside"])
async def test_malformed_idempotency_key_is_a_400_problem(
    pool: asyncpg.Pool, dsn: str, key: str
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            json=submission(),
            headers={**tk.headers, "Idempotency-Key": key},
        )
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert (r.json()["status"], r.json()["reason"]) == (400, "invalid_idempotency_key")
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_missing_key_is_generated_and_returned(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        a = await client.post("/v1/extraction-jobs", json=submission("X"), headers=tk.headers)
        b = await client.post("/v1/extraction-jobs", json=submission("X"), headers=tk.headers)
    assert a.status_code == b.status_code == 202
    assert a.headers["idempotency-key"].startswith("srv-")
    assert a.json()["idempotency_key"] == a.headers["idempotency-key"]
    # Without a client key a retry is a second job: the documented trade-off.
    assert a.json()["job_id"] != b.json()["job_id"]


async def test_multipart_upload_is_accepted_like_json(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    text = "INVOICE multipart total 5.00 CHF"
    async with asgi_client(app) as client:
        up = await client.post(
            "/v1/extraction-jobs",
            files={"document": ("scan-001.txt", text.encode(), "text/plain")},
            data={"metadata": json.dumps({"model_policy": "default", "priority": 2})},
            headers={**tk.headers, "Idempotency-Key": "mp-1"},
        )
        # The same document as JSON under the same key is the same request.
        same = await client.post(
            "/v1/extraction-jobs",
            json=submission(text, priority=2),
            headers={**tk.headers, "Idempotency-Key": "mp-1"},
        )
    assert up.status_code == 202, up.text
    assert same.status_code == 200 and same.json()["job_id"] == up.json()["job_id"]
    async with pool.acquire() as conn:
        doc = await conn.fetchrow(
            "SELECT d.filename, d.content FROM documents d JOIN extraction_jobs j "
            "ON j.document_id = d.id WHERE j.id = $1",
            uuid.UUID(up.json()["job_id"]),
        )
    assert doc["filename"] == "scan-001.txt" and doc["content"] == text


async def test_failure_inside_the_accept_transaction_leaves_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    seen: list[Accepted] = []

    async def crash(conn: asyncpg.Connection, accepted: Accepted) -> None:
        # The job and its outbox event are written in this transaction...
        n = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE job_id = $1", accepted.job_id
        )
        assert n == 1
        seen.append(accepted)
        raise RuntimeError("injected crash before commit")

    app = create_app(settings_for(dsn), pool=pool, accept_hook=crash)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        r = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/problem+json"
    assert "injected" not in r.text
    assert len(seen) == 1
    # ...and none of them survive.
    assert await count_rows(pool, *WRITTEN_TABLES) == before


SERVER = textwrap.dedent(
    """
    import os, signal, socket, sys
    import uvicorn
    from pipeline.api.app import create_app
    from pipeline.settings import Settings

    async def die(conn, accepted):
        # Inside the accept transaction, after the job and outbox inserts:
        # announce, then kill this process before COMMIT can be sent.
        print("IN-TRANSACTION", accepted.job_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print("PORT", sock.getsockname()[1], flush=True)
    app = create_app(Settings(database_url=sys.argv[1]), accept_hook=die)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    """
)


async def test_process_killed_between_insert_and_commit_leaves_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await tenant_with_key(pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SERVER,
        dsn,
        stdout=subprocess.PIPE,
        cwd=os.getcwd(),
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("PORT"), line
        url = f"http://127.0.0.1:{line.split()[1]}"
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            for _ in range(300):
                try:
                    await client.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            with pytest.raises(httpx.TransportError):
                await client.post(
                    "/v1/extraction-jobs",
                    json=submission(),
                    headers={**tk.headers, "Idempotency-Key": "killed"},
                )
        marker = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        assert marker.startswith("IN-TRANSACTION"), marker
        assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # PostgreSQL aborts the dead client's transaction: nothing was committed, and
    # the same key can be used again (the admission lock was released).
    assert await count_rows(pool, *WRITTEN_TABLES) == before
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        again = await client.post(
            "/v1/extraction-jobs",
            json=submission(),
            headers={**tk.headers, "Idempotency-Key": "killed"},
        )
    assert again.status_code == 202


@pytest.mark.parametrize(
    ("content", "content_type", "status", "reason"),
    [
        (b'{"document": {"text": "\xff\xfe"}}', "application/json", 400, "invalid_utf8"),
        (b'{"document": {"text": "abc"', "application/json", 400, "malformed_json"),
        (
            b'{"document": {"text": "a"}, "options": {"x": NaN}}',
            "application/json",
            400,
            "malformed_json",
        ),
        (b"[" * 5000 + b"]" * 5000, "application/json", 400, "malformed_json"),
        (b'{"document": {"text": "a\\u0000b"}}', "application/json", 422, "nul_character"),
        (
            b'{"document": {"text": "a"}, "options": {"k\\u0000": 1}}',
            "application/json",
            422,
            "nul_character",
        ),
        (b'{"document": {"text": "\\ud800"}}', "application/json", 422, "invalid_unicode"),
        (b'{"document": {"text": ""}}', "application/json", 422, "invalid_request"),
        (
            b'{"document": {"text": "a"}, "schema_version": true}',
            "application/json",
            422,
            "invalid_request",
        ),
        (b'{"document": {"text": "a"}, "surprise": 1}', "application/json", 422, "invalid_request"),
        (b"[]", "application/json", 422, "invalid_request"),
        (b"text", "text/plain", 415, "unsupported_media_type"),
        (b"--x\r\nbroken", "multipart/form-data; boundary=x", 422, "invalid_request"),
    ],
)
async def test_bad_input_is_a_problem_never_a_500(
    pool: asyncpg.Pool,
    dsn: str,
    content: bytes,
    content_type: str,
    status: int,
    reason: str,
) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    before = await count_rows(pool, *WRITTEN_TABLES)
    async with asgi_client(app) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            content=content,
            headers={**tk.headers, "Content-Type": content_type},
        )
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["reason"] == reason and r.json()["status"] == status
    assert await count_rows(pool, *WRITTEN_TABLES) == before


async def test_multipart_with_invalid_utf8_or_nul_is_rejected(pool: asyncpg.Pool, dsn: str) -> None:
    # Bytes that are neither UTF-8 text nor a supported file type (read from the bytes,
    # issue 43) are 415; a UTF-8 text upload keeps the text checks (NUL is 422).
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        bad_utf8 = await client.post(
            "/v1/extraction-jobs", files={"document": ("a.txt", b"\xc3\x28")}, headers=tk.headers
        )
        nul = await client.post(
            "/v1/extraction-jobs", files={"document": ("a.txt", b"a\x00b")}, headers=tk.headers
        )
        bad_meta = await client.post(
            "/v1/extraction-jobs",
            files={"document": ("a.txt", b"ok")},
            data={"metadata": "{nope"},
            headers=tk.headers,
        )
    assert (bad_utf8.status_code, bad_utf8.json()["reason"]) == (415, "unsupported_media_type")
    assert (nul.status_code, nul.json()["reason"]) == (422, "nul_character")
    assert (bad_meta.status_code, bad_meta.json()["reason"]) == (400, "malformed_json")


async def test_body_over_the_limit_is_413_before_it_is_read(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    # A refused body is drained (so a client still uploading reads its 413) only up
    # to max_body_drain_bytes in all; the rest is never read.
    # A file upload's body may be as large as the file limit and the form around it
    # (MULTIPART_OVERHEAD_BYTES); past that it is refused the same way.
    settings = settings_for(
        dsn, max_body_bytes=1000, max_body_drain_bytes=1500, max_document_file_bytes=1000
    )
    app = create_app(settings, pool=pool)
    big = json.dumps(submission("x" * 2000)).encode()
    reads = 0
    before = await count_rows(pool, "extraction_jobs")

    async def chunks():  # type: ignore[no-untyped-def]
        nonlocal reads
        for i in range(0, len(big), 100):
            reads += 1
            yield big[i : i + 100]

    async with asgi_client(app) as client:
        declared = await client.post(
            "/v1/extraction-jobs",
            content=big,
            headers={**tk.headers, "Content-Type": "application/json"},
        )
        streamed = await client.post(
            "/v1/extraction-jobs",
            content=chunks(),
            headers={**tk.headers, "Content-Type": "application/json"},
        )
        multipart = await client.post(
            "/v1/extraction-jobs",
            files={"document": ("a.txt", b"y" * (MULTIPART_OVERHEAD_BYTES + 2000))},
            headers=tk.headers,
        )
        fits = await client.post(
            "/v1/extraction-jobs", json=submission("small"), headers=tk.headers
        )
    for r in (declared, streamed, multipart):
        assert r.status_code == 413, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["reason"] == "body_too_large"
    assert fits.status_code == 202
    # The streamed body was refused at the first chunk past the limit and read no
    # further than the drain bound, not to its end.
    assert reads <= 1500 // 100 + 1 < len(big) // 100
    after = await count_rows(pool, "extraction_jobs")
    assert after["extraction_jobs"] - before["extraction_jobs"] == 1


async def test_auth_is_required_and_revoked_keys_are_refused(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    async with asgi_client(app) as client:
        none = await client.post("/v1/extraction-jobs", json=submission())
        wrong = await client.post(
            "/v1/extraction-jobs", json=submission(), headers={"Authorization": "Bearer flk_nope"}
        )
        async with pool.acquire() as conn:
            await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = $1", tk.key_id)
        revoked = await client.post("/v1/extraction-jobs", json=submission(), headers=tk.headers)
    for r in (none, wrong, revoked):
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert r.headers["content-type"] == "application/problem+json"


async def test_metrics_count_outcomes(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    app = create_app(settings_for(dsn), pool=pool)
    headers = {**tk.headers, "Idempotency-Key": "m-1"}
    async with asgi_client(app) as client:
        await client.post("/v1/extraction-jobs", json=submission("A"), headers=headers)
        await client.post("/v1/extraction-jobs", json=submission("A"), headers=headers)
        await client.post("/v1/extraction-jobs", json=submission("B"), headers=headers)
        await client.post("/v1/extraction-jobs", content=b"{", headers=tk.headers)
        text = (await client.get("/metrics")).text
    assert 'fenceline_acceptance_seconds_count{outcome="accepted"} 1.0' in text
    assert 'fenceline_acceptance_seconds_count{outcome="replayed"} 1.0' in text
    assert 'fenceline_acceptance_seconds_count{outcome="conflict"} 1.0' in text
    assert "fenceline_jobs_accepted_total 1.0" in text
    assert 'fenceline_jobs_rejected_total{reason="idempotency_conflict"} 1.0' in text
    assert 'fenceline_jobs_rejected_total{reason="unsupported_media_type"} 1.0' in text


async def test_metrics_count_refusals_made_before_the_handler(pool: asyncpg.Pool, dsn: str) -> None:
    tk = await tenant_with_key(pool)
    own = await create_pool(dsn, min_size=1, max_size=2)  # the app's pool, killed below
    app = create_app(settings_for(dsn, max_body_bytes=1000), pool=own)
    url = "/v1/extraction-jobs"
    async with asgi_client(app) as client:
        ok = await client.post(url, json=submission("C"), headers=tk.headers)
        no_key = await client.post(url, json=submission("D"))
        too_big = await client.post(url, json=submission("x" * 2000), headers=tk.headers)
        bad_query = await client.post(f"{url}?surprise=1", json=submission(), headers=tk.headers)
        own.terminate()
        db_down = await client.post(url, json=submission("E"), headers=tk.headers)
        text = (await client.get("/metrics")).text
    statuses = [r.status_code for r in (ok, no_key, too_big, bad_query, db_down)]
    assert statuses == [202, 401, 413, 422, 503]
    for reason in ("unauthorized", "body_too_large", "invalid_request", "database_unavailable"):
        assert f'fenceline_jobs_rejected_total{{reason="{reason}"}} 1.0' in text, reason
    assert 'fenceline_acceptance_seconds_count{outcome="accepted"} 1.0' in text
    assert 'fenceline_acceptance_seconds_count{outcome="invalid"} 3.0' in text
    assert 'fenceline_acceptance_seconds_count{outcome="rejected"} 1.0' in text
    assert "fenceline_jobs_accepted_total 1.0" in text


async def test_the_intake_opens_its_pool_at_start_and_starts_without_a_database(
    dsn: str,
) -> None:
    """``db_pool_min`` connections are open before the first request (a burst's first
    accepts do not connect); with the database down the app still starts, pool empty."""
    from benchmarks.infra import free_port
    from pipeline.api.context import open_pool
    from pipeline.settings import Settings

    pool = await open_pool(Settings(database_url=dsn, db_pool_min=3, db_pool_max=5))
    try:
        assert (pool.get_size(), pool.get_idle_size()) == (3, 3)
    finally:
        await pool.close()
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    empty = await open_pool(Settings(database_url=down, db_pool_min=3, db_pool_max=5))
    try:
        assert empty.get_size() == 0
        with pytest.raises(OSError):
            await empty.fetchval("SELECT 1")
    finally:
        await empty.close()
