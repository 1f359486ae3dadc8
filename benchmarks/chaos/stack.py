"""The system a chaos run stands up on loopback, and the handles its faults act on.

* a fresh migrated PostgreSQL database (with the ERP receiver's tables), on the
  shared server or, with ``private_postgres``, on a server of the run's own that
  the ``pg_restart`` fault really restarts;
* the intake API (``pipeline.api``) under uvicorn in its own process;
* RabbitMQ through a :class:`~benchmarks.chaos.tcp_proxy.TcpProxy` (a topology
  of its own, so other users of the shared broker are untouched);
* a local Ray head with the runtime's actors as the supervisor builds them:
  the admission actor (ledger on), the maintenance actor (reaper, outbox relay,
  inbox consumer, DLQ archiver), the delivery actor and ``drivers`` task
  drivers calling the fake provider — each restartable by Ray
  (``max_restarts=-1``) and each with its own PostgreSQL ``application_name``
  so a fault can terminate exactly its connections;
* the fake OpenAI-compatible provider and the reference ERP receiver (fault API
  on), each in its own process.

Every setting of the actors comes from :func:`chaos_settings`: short leases,
fast retries and ``fault_injection`` on, so the crash points can be armed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pika

from benchmarks.chaos.oracle import AdmissionBudget
from benchmarks.chaos.private_postgres import PrivatePostgres, private_postgres
from benchmarks.chaos.tcp_proxy import TcpProxy
from benchmarks.fake_provider import FaultPlan, Latency
from benchmarks.infra import ErpProcess, FakeProcess, free_port, fresh_database, intake_server
from benchmarks.invoices.generator import GeneratedInvoice
from benchmarks.scenario import Scenario, parse_scenario, scenario_corpus
from pipeline.database import create_pool
from pipeline.messaging import BrokerConfig
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.tenants import create_api_key, create_tenant, permit_currencies, upsert_supplier
from pipeline.worker import WorkerConfig

AMQP_URL = os.environ.get("FENCELINE_CHAOS_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
#: PostgreSQL application names of the actors (pg_stat_activity), per role.
APP_DRIVER = "chaos-driver"
APP_MAINTENANCE = "chaos-maintenance"
APP_DELIVERY = "chaos-delivery"
APP_ADMISSION = "chaos-admission"


@dataclass(frozen=True)
class StackConfig:
    """Sizes and timings of one chaos run's system."""

    seed: int = 17
    drivers: int = 2
    concurrency: int = 4
    lease_s: float = 4.0
    attempt_timeout_s: float = 2.5
    provider_latency_s: float = 0.3
    max_attempts: int = 10
    corpus: int = 40
    rpm: int = 1200
    tpm: int = 5_000_000
    max_in_flight: int = 6
    #: An OpenAI-compatible engine to call instead of the fake provider (a real vLLM
    #: server, ``vllm serve``); empty: the fake. Provider faults need the fake.
    engine_url: str = ""
    engine_model: str = ""
    #: Shell commands that stop and start the PostgreSQL server (the ``pg_restart``
    #: fault) on an outside server; empty: that fault needs ``private_postgres``.
    pg_stop_command: str = ""
    pg_start_command: str = ""
    #: Run the whole database on a PostgreSQL server of the run's own
    #: (:mod:`benchmarks.chaos.private_postgres`); ``pg_restart`` restarts that server.
    private_postgres: bool = False


def chaos_settings(dsn: str, amqp_url: str, tag: str, cfg: StackConfig, erp_port: int) -> Settings:
    """The actors' settings: leases of seconds, fast retries, fault injection on."""
    return Settings(
        database_url=dsn,
        amqp_url=amqp_url,
        amqp_exchange=f"{tag}.x",
        amqp_work_queue=f"{tag}.work",
        amqp_dead_letter_exchange=f"{tag}.dlx",
        amqp_dead_letter_queue=f"{tag}.dlq",
        amqp_confirm_timeout_seconds=2.0,
        # The submissions cycle through a corpus (a consistent corpus of thousands of
        # distinct suppliers cannot be drawn), so the same supplier invoice is many jobs:
        # with the duplicate check they would rightly go to review and leave the faults
        # no work. The check itself is tested in tests/integration/test_duplicate_invoices.py.
        duplicate_invoice_check=False,
        amqp_connect_timeout_seconds=2.0,
        lease_seconds=cfg.lease_s,
        heartbeat_seconds=cfg.lease_s / 4,
        attempt_timeout_seconds=cfg.attempt_timeout_s,
        max_attempts=cfg.max_attempts,
        retry_base_seconds=0.2,
        retry_cap_seconds=2.0,
        next_attempt_margin_seconds=cfg.attempt_timeout_s + 1,
        default_deadline_seconds=900,
        reaper_interval_seconds=0.5,
        scan_interval_seconds=0.5,
        db_pool_max=16,
        db_acquire_timeout_seconds=60,
        delivery_timeout_seconds=2.0,
        delivery_lease_seconds=7.5,  # the policy wants timeout + 5 s
        delivery_schedule_seconds=(0.5, 1.0, 2.0, 3.0),
        delivery_breaker_threshold=1000,
        delivery_breaker_cooldown_seconds=1.0,
        delivery_breaker_cooldown_cap_seconds=2.0,
        delivery_poll_seconds=0.5,
        delivery_allow_loopback_http=True,
        delivery_allowed_ports=(443, erp_port),
        fault_injection=True,
    )


def with_application(settings: Settings, name: str) -> Settings:
    """``settings`` whose database connections carry ``application_name=name``."""
    sep = "&" if "?" in settings.database_url else "?"
    return settings.model_copy(
        update={"database_url": f"{settings.database_url}{sep}application_name={name}"}
    )


def fake_scenario(cfg: StackConfig) -> Scenario:
    """The fake provider's scenario: the corpus it answers from and its normal latency."""
    return parse_scenario(
        {
            "name": "chaos",
            "seed": cfg.seed,
            "arrival": {"process": "poisson", "rate": 1, "duration_s": 1},
            "documents": {"corpus": cfg.corpus, "max_line_items": 4, "variants": ["clean"]},
            "engine": {"kind": "fake", "latency": {"dist": "fixed", "a": cfg.provider_latency_s}},
        },
        "chaos fake provider",
    )


@dataclass
class Member:
    """One restartable actor: its handle, process id and how to start it."""

    name: str
    handle: Any
    pid: int = 0
    #: A driver's worker id (``job_attempts.worker_id``); empty for other actors.
    worker_id: str = ""


@dataclass
class Stack:
    """A running chaos system; see the module docstring."""

    config: StackConfig
    settings: Settings
    dsn: str
    intake_url: str
    api_key: str
    scope: str
    corpus: list[GeneratedInvoice]
    proxy: TcpProxy
    fake: FakeProcess
    erp: ErpProcess
    pool: asyncpg.Pool
    drivers: list[Member] = field(default_factory=list)
    maintenance: Member | None = None
    delivery: Member | None = None
    admission: Any = None
    #: The run's own PostgreSQL server (``StackConfig.private_postgres``), else None.
    postgres: PrivatePostgres | None = None

    @property
    def fake_url(self) -> str:
        return f"http://127.0.0.1:{self.fake.port}"

    def baseline_plan(self) -> FaultPlan:
        """The provider's steady behaviour: a fixed latency, no faults."""
        latency = Latency(dist="fixed", a=self.config.provider_latency_s)
        return FaultPlan(latency=latency, seed=self.config.seed)

    async def set_provider(self, plan: FaultPlan) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            r = await client.post(f"{self.fake_url}/admin/faults", json=plan.model_dump())
            r.raise_for_status()

    def driver(self, index: int) -> Member:
        """The driver a fault names (modulo the drivers alive now)."""
        return self.drivers[index % len(self.drivers)]

    async def refresh(self) -> None:
        """Re-read which actors run before a fault (the harness's are fixed)."""

    def note_kill(self, member: Member) -> None:
        """A fault is about to kill ``member``'s process (the Serve stack times recovery)."""

    async def recover(self, member: Member) -> None:
        """Bring a killed member back: here the harness calls ``start()`` itself, as the
        runtime supervisor's health check would (the Serve stack leaves it to the supervisor)."""
        await restart(member)

    async def pg_terminate(self) -> tuple[bool, str]:
        """``pg_terminate_backend`` on every connection of the drivers and the maintenance actor."""
        patterns = [f"{APP_DRIVER}%", f"{APP_MAINTENANCE}%"]
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(q("chaos_backend_terminate"), patterns)
        done = sum(1 for r in rows if r["terminated"])
        return done > 0, f"terminated {done} backends of drivers and the maintenance actor"

    def admission_budget(self) -> AdmissionBudget:
        """The limits the admission actor enforced (what the oracle checks the ledger against)."""
        cfg = self.config
        return AdmissionBudget(self.scope, cfg.rpm, cfg.tpm, cfg.max_in_flight)

    def supervised(self) -> dict[str, Any]:
        """Recoveries left to a runtime supervisor (none here: the harness restarts)."""
        return {}

    async def set_erp(self, mode: str, **kw: Any) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            r = await client.post(
                f"http://127.0.0.1:{self.erp.port}/_fault", json={"mode": mode, **kw}
            )
            r.raise_for_status()


async def _start_member(member: Member, timeout: float = 60.0) -> None:
    """Call ``start()`` until it answers: a just-killed actor is being restarted by Ray."""
    import ray

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await asyncio.wait_for(asyncio.wrap_future(member.handle.start.remote().future()), 30)
            member.pid = await asyncio.wrap_future(member.handle.pid.remote().future())
            return
        except (ray.exceptions.RayActorError, TimeoutError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.5)


async def restart(member: Member) -> None:
    """Bring a killed member back (Ray restarts its process; ``start()`` reopens its work)."""
    await _start_member(member)


def _remote(cls: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    import ray

    return (
        ray.remote(num_cpus=0)(cls)
        .options(name=name, max_restarts=-1, max_concurrency=64)
        .remote(*args, **kwargs)
    )


async def _provision(pool: asyncpg.Pool, corpus: list[GeneratedInvoice]) -> tuple[uuid.UUID, str]:
    async with pool.acquire() as conn:
        tenant = await create_tenant(conn, f"chaos-{uuid.uuid4().hex[:6]}")
        _, key = await create_api_key(conn, tenant.id, scopes=("jobs",))
        for inv in corpus:
            await upsert_supplier(conn, tenant.id, inv.supplier)
        await permit_currencies(conn, tenant.id, {inv.currency for inv in corpus})
    return tenant.id, key


def _delete_topology(settings: Settings) -> None:
    cfg = BrokerConfig.from_settings(settings.model_copy(update={"amqp_url": AMQP_URL}))
    if cfg is None:
        return
    with contextlib.suppress(Exception):
        conn = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
        try:
            ch = conn.channel()
            for queue in (cfg.work_queue, cfg.dead_letter_queue):
                ch.queue_delete(queue)
            for exchange in (cfg.exchange, cfg.dead_letter_exchange):
                ch.exchange_delete(exchange)
        finally:
            conn.close()


@dataclass
class OutsideParts:
    """What both stacks stand up alike, outside Ray: the database (on the run's own
    server with ``private_postgres``), the settings, the harness's pool, the tenant and
    its key, the AMQP proxy, the fake provider and the reference ERP receiver."""

    server: PrivatePostgres | None
    dsn: str
    settings: Settings
    pool: asyncpg.Pool
    tenant_id: uuid.UUID
    api_key: str
    corpus: Any
    proxy: TcpProxy
    fake: FakeProcess
    erp: ErpProcess


async def outside_parts(
    stack: contextlib.AsyncExitStack,
    cfg: StackConfig,
    tag: str,
    settings_update: dict[str, Any] | None = None,
) -> OutsideParts:
    """Start :class:`OutsideParts` on ``stack`` (torn down with it)."""
    from pipeline.delivery import EndpointRegistry, SecretBox, guard_from_settings

    scenario = fake_scenario(cfg)
    corpus = scenario_corpus(scenario)
    proxy = TcpProxy("127.0.0.1", 5672)
    stack.callback(proxy.close)
    erp_port = free_port()
    # pg_restart restarts the run's own server, never the shared one.
    server = stack.enter_context(private_postgres()) if cfg.private_postgres else None
    admin = server.admin_dsn if server is not None else None
    dsn = await stack.enter_async_context(fresh_database(admin))
    settings = chaos_settings(dsn, proxy.url(AMQP_URL), tag, cfg, erp_port)
    if settings_update:
        settings = settings.model_copy(update=settings_update)
    stack.callback(_delete_topology, settings)
    pool = await create_pool(dsn, min_size=1, max_size=8)
    stack.push_async_callback(pool.close)
    tenant_id, api_key = await _provision(pool, corpus)
    fake = FakeProcess(scenario)
    await fake.start()
    stack.push_async_callback(fake.stop)
    erp = ErpProcess(dsn, erp_port, fault_api=True)
    registry = EndpointRegistry(pool, guard_from_settings(settings), SecretBox(None))
    secret = (await registry.register(tenant_id, erp.url, description="chaos ERP")).secret
    await erp.start([secret])
    stack.push_async_callback(erp.stop)
    return OutsideParts(server, dsn, settings, pool, tenant_id, api_key, corpus, proxy, fake, erp)


@contextlib.asynccontextmanager
async def running_stack(cfg: StackConfig) -> AsyncIterator[Stack]:
    """Stand the system up (see the module docstring); tear it all down afterwards."""
    import ray

    from cluster.admission import actor_name, admission_actor
    from cluster.delivery import ACTOR_NAME, DeliveryActor
    from cluster.drivers import EngineSpec, Maintenance, TaskDriver

    tag = f"flchaos.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    async with contextlib.AsyncExitStack() as stack:
        out = await outside_parts(stack, cfg, tag)
        server, dsn, settings, pool = out.server, out.dsn, out.settings, out.pool
        api_key, corpus, proxy, fake, erp = out.api_key, out.corpus, out.proxy, out.fake, out.erp
        intake = {
            "database_url": dsn,
            "default_deadline_seconds": settings.default_deadline_seconds,
            "max_attempts": settings.max_attempts,
            "db_pool_max": 16,
            "db_acquire_timeout_seconds": 60,
        }
        intake_url = await stack.enter_async_context(intake_server(intake))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 1024 * 1024,
            log_to_driver=False,
            namespace=tag,
            runtime_env={"env_vars": {"PYTHONPATH": root, "RAY_USAGE_STATS_ENABLED": "0"}},
        )
        stack.callback(ray.shutdown)
        scope = f"chaos-{tag}"
        limits = {
            "scope": scope,
            "rpm": cfg.rpm,
            "tpm": cfg.tpm,
            "max_in_flight": cfg.max_in_flight,
            "grant_ttl_seconds": cfg.attempt_timeout_s + 10,
            "cooldown_max_seconds": 2.0,
        }
        admission = admission_actor(
            actor_name(scope),
            limits,
            database_url=with_application(settings, APP_ADMISSION).database_url,
            detached=False,
        )
        result = Stack(
            cfg, settings, dsn, intake_url, api_key, scope, corpus, proxy, fake, erp, pool,
            admission=admission, postgres=server,
        )  # fmt: skip
        await result.set_provider(result.baseline_plan())
        await asyncio.wrap_future(admission.start.remote().future())
        result.maintenance = Member(
            "maintenance",
            _remote(Maintenance, f"{tag}-maintenance", with_application(settings, APP_MAINTENANCE)),
        )
        result.delivery = Member(
            "delivery",
            _remote(DeliveryActor, ACTOR_NAME, with_application(settings, APP_DELIVERY)),
        )
        engine = (
            EngineSpec(kind="openai", base_url=cfg.engine_url, model=cfg.engine_model)
            if cfg.engine_url
            else EngineSpec(kind="openai", base_url=f"{result.fake_url}/v1", model="fake")
        )
        for i in range(cfg.drivers):
            worker = WorkerConfig(
                worker_id=f"chaos-driver-{i}",
                concurrency=cfg.concurrency,
                claim_batch=cfg.concurrency,
                attempt_timeout_seconds=cfg.attempt_timeout_s,
                commit_margin_seconds=0.5,
                heartbeat_seconds=settings.heartbeat_seconds,
                admission_timeout_seconds=cfg.attempt_timeout_s,
                idle_poll_seconds=0.5,
            )
            handle = _remote(
                TaskDriver,
                f"{tag}-driver-{i}",
                with_application(settings, f"{APP_DRIVER}-{i}"),
                worker,
                engine,
                admission_scope=scope,
                delivery_actor=ACTOR_NAME,
            )
            result.drivers.append(Member(f"driver-{i}", handle, worker_id=worker.worker_id))
        members = [result.maintenance, result.delivery, *result.drivers]
        for member in members:
            await _start_member(member)

        async def stop_members() -> None:
            for member in reversed(members):
                with contextlib.suppress(Exception):
                    ref = member.handle.stop.remote(*([2.0] if "driver" in member.name else []))
                    await asyncio.wait_for(asyncio.wrap_future(ref.future()), 20)
                with contextlib.suppress(Exception):
                    ray.kill(member.handle, no_restart=True)

        stack.push_async_callback(stop_members)
        print(f"chaos: stack up ({cfg.drivers} drivers), database {dsn}", file=sys.stderr)
        yield result
