"""Helpers for delivery tests: real HTTP servers on loopback, succeeded jobs, a canary."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import uvicorn

from benchmarks.erp_acknowledger import AckPlan
from benchmarks.erp_receiver import FaultSwitch, ReceiverConfig, bind_socket, create_app
from pipeline.clock import Clock, ManualClock
from pipeline.data_keys import DataKeys
from pipeline.delivery import (
    DeliveryConfig,
    DeliveryDispatcher,
    EgressClient,
    EndpointRegistry,
    IssuedSecret,
    SecretBox,
    VerificationKey,
    delivery_settle_hook,
)
from pipeline.delivery.egress import EgressGuard, EgressPolicy, Resolver
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.tenants import Tenant
from tests.support.jobs import request

#: A fixed sealing key for tests (the production key comes from the settings).
TEST_BOX = SecretBox(bytes(range(32)))
DEV_POLICY = EgressPolicy(allow_loopback_http=True)


class ServerThread:
    """uvicorn serving ``app`` in a thread, on a loopback socket bound up front (port 0)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", **uvicorn_kw: Any) -> None:
        self.app = app
        self.sock = bind_socket(host, 0)
        self.host = host
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="critical", lifespan="on", **uvicorn_kw)
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self.sock.close()


class Receiver:
    """The reference ERP receiver as a real loopback HTTP server."""

    def __init__(
        self,
        dsn: str,
        keys: Sequence[str | VerificationKey],
        *,
        ledger: str | None = None,
        clock: ManualClock | None = None,
        host: str = "127.0.0.1",
        acknowledge: AckPlan | None = None,
    ) -> None:
        self.ledger = ledger or f"ledger-{uuid.uuid4().hex[:6]}"
        self.faults = FaultSwitch()
        now = (lambda: clock.now().timestamp()) if clock is not None else time.time
        self.app = create_app(
            ReceiverConfig(
                database_url=dsn, keys=keys, ledger=self.ledger, acknowledge=acknowledge
            ),
            now=now,
            faults=self.faults,
        )
        self.server = ServerThread(self.app, host=host)
        self.port = self.server.port

    @property
    def stats(self) -> Any:
        return self.app.state.stats

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/webhooks/fenceline"

    def __enter__(self) -> Receiver:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


async def reserve_receiver(
    dsn: str, registry: EndpointRegistry, tenant: Tenant, *, clock: ManualClock | None = None
) -> tuple[Receiver, IssuedSecret]:
    """Bind a receiver's port, register its URL for ``tenant``, configure its secret."""
    from pipeline.delivery.signing import generate_secret

    secret = generate_secret()
    receiver = Receiver(dsn, [secret], clock=clock)
    issued = await registry.register(tenant.id, receiver.url(), secret=secret)
    return receiver, issued


def registry_for(pool: asyncpg.Pool, clock: Clock | None = None, **kw: Any) -> EndpointRegistry:
    return EndpointRegistry(pool, EgressGuard(DEV_POLICY, **kw), TEST_BOX, clock=clock)


def dispatcher_for(
    pool: asyncpg.Pool,
    *,
    clock: Clock | None = None,
    resolver: Resolver | None = None,
    policy: EgressPolicy = DEV_POLICY,
    seed: int = 7,
    keys: DataKeys | None = None,
    **config: Any,
) -> DeliveryDispatcher:
    cfg = DeliveryConfig(**{"timeout_seconds": 2.0, "lease_seconds": 30.0, **config})
    guard = EgressGuard(policy, resolver=resolver)
    return DeliveryDispatcher(
        pool,
        cfg,
        client=EgressClient(guard, timeout_seconds=cfg.timeout_seconds),
        box=TEST_BOX,
        # as a deployed dispatcher: the KEK the settings name, if any
        keys=keys if keys is not None else DataKeys.from_settings(Settings()),
        clock=clock,
        rng=random.Random(seed),
    )


def job_store(pool: asyncpg.Pool, clock: Clock | None = None) -> JobStore:
    store = JobStore(pool, Settings(), clock=clock)
    store.settle_hooks.add(delivery_settle_hook)
    return store


def invoice(n: int) -> dict[str, Any]:
    return {
        "invoice_number": f"INV-{n:05d}",
        "currency": "EUR",
        "total": "1210.00",
        "lines": [{"description": "widgets", "amount": "1000.00", "tax": "210.00"}],
    }


async def succeed_jobs(store: JobStore, tenant: Tenant, n: int) -> list[uuid.UUID]:
    """Accept, claim and succeed ``n`` jobs of ``tenant`` (deliveries are created)."""
    done: list[uuid.UUID] = []
    for i in range(n):
        accepted = await store.accept(request(tenant))
        for lease in await store.claim(f"w-{i}", limit=50):
            await store.succeed(lease, result=invoice(i))
            done.append(lease.job_id)
        assert accepted.job_id in done
    return done


class Canary:
    """A TCP listener on loopback that counts connections: proof nothing was sent."""

    def __init__(self) -> None:
        self.connections = 0
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def __aenter__(self) -> Canary:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self._server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


async def fetch(pool: asyncpg.Pool, sql: str, *args: Any) -> list[dict[str, Any]]:
    async with pool.acquire() as conn:
        return [dict(r.items()) for r in await conn.fetch(sql, *args)]


async def fetchval(pool: asyncpg.Pool, sql: str, *args: Any) -> Any:
    async with pool.acquire() as conn:
        return await conn.fetchval(sql, *args)


async def postings(pool: asyncpg.Pool, ledger: str) -> dict[uuid.UUID, int]:
    """job id → how many times the ERP applied its posting (the effects, unguarded by job).

    This is ``applications``: one per delivery id that passed the inbox
    deduplication. ``effect_count`` is guarded by the job and never exceeds 1, so
    it could not show a job posted twice; ``applications`` does.
    """
    rows = await fetch(
        pool, "SELECT job_id, applications FROM erp_postings WHERE ledger = $1", ledger
    )
    return {r["job_id"]: r["applications"] for r in rows}


async def inbox(pool: asyncpg.Pool, ledger: str) -> dict[uuid.UUID, tuple[int, int]]:
    """job id → (deliveries the ERP accepted for it, duplicates of those it absorbed)."""
    rows = await fetch(
        pool,
        "SELECT job_id, count(*) AS accepted, sum(duplicates) AS duplicates FROM erp_inbox"
        " WHERE ledger = $1 AND job_id IS NOT NULL GROUP BY job_id",
        ledger,
    )
    return {r["job_id"]: (r["accepted"], r["duplicates"]) for r in rows}


def ts(dt: datetime) -> float:
    return dt.timestamp()
