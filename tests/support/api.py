"""Helpers for tests of the HTTP API: tenants with keys, clients, loopback servers, SSE."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import uvicorn
from fastapi import FastAPI

from pipeline.api.server import server_config
from pipeline.database import connect
from pipeline.settings import Settings
from pipeline.tenants import Tenant, create_api_key, create_tenant


@dataclass(frozen=True)
class TenantKey:
    tenant: Tenant
    key: str
    key_id: uuid.UUID

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def tenant_with_key(
    pool: asyncpg.Pool, *, scopes: tuple[str, ...] = ("jobs",), **quotas: Any
) -> TenantKey:
    async with pool.acquire() as conn:
        tenant = await create_tenant(conn, f"t-{uuid.uuid4().hex[:10]}", **quotas)
        key_id, key = await create_api_key(conn, tenant.id, scopes=scopes)
    return TenantKey(tenant, key, key_id)


async def add_key(pool: asyncpg.Pool, tk: TenantKey, scopes: tuple[str, ...]) -> TenantKey:
    async with pool.acquire() as conn:
        key_id, key = await create_api_key(conn, tk.tenant.id, scopes=scopes)
    return TenantKey(tk.tenant, key, key_id)


async def tenant_key_at(
    dsn: str, name: str, scopes: tuple[str, ...] = ("jobs",)
) -> tuple[uuid.UUID, str]:
    """A new tenant with one key, on its own connection (for module-scoped fixtures):
    the tenant's id and the key's secret."""
    conn = await connect(dsn)
    try:
        tenant = await create_tenant(conn, name)
        _, key = await create_api_key(conn, tenant.id, scopes=scopes)
    finally:
        await conn.close()
    return tenant.id, key


def assert_problem(r: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    """``r`` is the problem document for ``status`` and ``reason``; its body."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert (body["status"], body["reason"]) == (status, reason)
    assert body["type"] == f"urn:fenceline:problem:{reason}"
    return body


def settings_for(dsn: str, **overrides: Any) -> Settings:
    return Settings(database_url=dsn, **overrides)


def asgi_client(app: FastAPI) -> httpx.AsyncClient:
    """In-process client; app exceptions become 500 responses, as under a server."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://intake.test", timeout=30)


def submission(text: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "document": {"text": text or f"INVOICE {uuid.uuid4().hex} total 10.00 EUR"}
    }
    body.update(extra)
    return body


async def count_rows(pool: asyncpg.Pool, *tables: str) -> dict[str, int]:
    async with pool.acquire() as conn:
        return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in tables}


WRITTEN_TABLES = (
    "extraction_jobs",
    "outbox_events",
    "documents",
    "job_events",
    "tenant_spend",
    "spend_reservations",
)


def _bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.set_inheritable(True)
    return sock


@contextlib.asynccontextmanager
async def loopback_server(
    app: FastAPI, *, http: str = "auto", limits: Settings | None = None
) -> AsyncIterator[str]:
    """Run ``app`` under a real uvicorn on 127.0.0.1 in this event loop; yield its URL.

    ``http`` picks uvicorn's HTTP parser (``h11`` or ``httptools``; ``auto``, its
    default, is httptools when installed). With ``limits`` the server is the one
    ``fenceline api`` runs (:func:`pipeline.api.server.server_config`) and ``http``
    is not used. Either way uvicorn leaves the peer and scheme alone, as
    ``fenceline api`` does: forwarding headers are the app's to believe or not.
    """
    sock = _bound_socket()
    port = sock.getsockname()[1]
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "on",
        "timeout_graceful_shutdown": 2,
    }
    config = (
        uvicorn.Config(app, http=http, proxy_headers=False, **options)
        if limits is None
        else server_config(app, limits, **options)
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(500):
            if server.started:
                break
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


@contextlib.contextmanager
def threaded_server(make_app: Callable[[], FastAPI]) -> Iterator[str]:
    """Run an app (with its own pool and loop) under uvicorn in a thread; yield its URL."""
    sock = _bound_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            make_app(),
            proxy_headers=False,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            if not thread.is_alive():
                raise RuntimeError("uvicorn thread died during startup")
            threading.Event().wait(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@dataclass
class SseEvent:
    event: str
    data: dict[str, Any]
    id: str | None


async def iter_sse(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """SSE frames of a streaming response, as they arrive."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in fields or "data" in fields:
                yield SseEvent(
                    event=fields.get("event", "message"),
                    data=json.loads(fields["data"]) if "data" in fields else {},
                    id=fields.get("id"),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value


async def read_sse(
    events: AsyncIterator[SseEvent], *, until: str = "end", timeout: float = 15.0
) -> list[SseEvent]:
    """Collect frames up to and including the first ``until`` event."""
    out: list[SseEvent] = []
    async with asyncio.timeout(timeout):
        async for ev in events:
            out.append(ev)
            if ev.event == until:
                break
    return out


async def settle_leftovers(dsn: str) -> None:
    """Fail every unsettled job, so a test sharing its module's database claims only its own.

    ``JobStore.claim`` picks fairly across all tenants; tests that claim "the" job
    need the database to hold no other runnable work.
    """
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "UPDATE extraction_jobs SET state = 'FAILED_TERMINAL', lease_until = NULL, "
            "lease_owner = NULL, finished_at = now(), terminal_reason = 'test_isolation' "
            "WHERE state IN ('READY', 'RUNNING', 'RETRY_SCHEDULED')"
        )
    finally:
        await conn.close()
