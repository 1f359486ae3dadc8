"""The chaos system as ``fenceline up`` deploys it: Serve intake, runtime supervisor, actors.

``--stack serve`` (:func:`running_serve_stack`) keeps the loopback pieces of
:mod:`benchmarks.chaos.stack` (fresh database, RabbitMQ through the TCP proxy,
the fake provider, the reference ERP receiver) and replaces the rest with
:class:`cluster.runtime.LocalCluster`, the code path of ``fenceline up`` and
``make demo``:

* the intake API as a Ray Serve ingress: submissions go over HTTP through
  Serve's proxy to the ingress replica;
* the job runtime app, whose :class:`~cluster.supervisor.RuntimeSupervisor`
  replica creates the admission, delivery and maintenance actors and the task
  drivers (autoscaled by its :class:`~cluster.driver_fleet.RayDriverFleet`),
  and health-checks them every 15 s;
* with ``engine="vllm"``, the inference app on vLLM (CPU, the bundled model)
  instead of the fake provider.

The harness only finds those actors by name. After a kill it waits for Ray to
restart the process and then for the **supervisor** to call ``start()`` on it;
it never calls ``start()`` itself (:meth:`ServeStack.recover`). Every runtime
actor shares one database URL, so ``pg_terminate`` picks the drivers' and the
relay's connections by the client ports their processes hold
(:meth:`ServeStack.pg_terminate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from benchmarks.chaos.oracle import AdmissionBudget
from benchmarks.chaos.schedule import Fault, FaultKind
from benchmarks.chaos.stack import Member, Stack, StackConfig, outside_parts
from benchmarks.infra import free_port
from pipeline.queries import q
from pipeline.worker import WorkerConfig

#: Longest the harness waits for a killed actor to be restarted by Ray and then
#: started by the supervisor (its health check runs every 3 s; one check may
#: wait up to ``ping_timeout_s`` = 20 s for a restarting actor).
SUPERVISED_START_WAIT_S = 90.0


#: The runtime supervisor's health-check period (``build_runtime_app``): after a kill,
#: the restarted process waits up to this long for its ``start()``.
SUPERVISOR_CHECK_S = 15.0
#: Faults that kill a runtime actor's process.
KILL_KINDS = frozenset(
    {
        FaultKind.DRIVER_KILL_MID_CALL,
        FaultKind.DRIVER_KILL_AFTER_ANSWER,
        FaultKind.DELIVERY_KILL_MID_POST,
        FaultKind.RELAY_KILL_AFTER_CONFIRM,
    }
)


def supervised_delay(faults: list[Fault]) -> float:
    """How much later the schedule ends on the Serve stack than its plan says.

    Each kill waits for the supervisor's next health check, so the faults after it
    run later; submissions must go on until the last one, or a crash point late in
    the run finds no work to pass it (a 200-invoice run missed
    ``driver_kill_after_answer`` that way).
    """
    return SUPERVISOR_CHECK_S * sum(1 for f in faults if f.kind in KILL_KINDS)


@dataclass(frozen=True)
class ServeOptions:
    """What the Serve stack deploys besides the runtime and the intake."""

    #: ``fake``: drivers call the fake provider over HTTP; ``vllm``: the inference app
    #: (the pools file, vLLM on CPU, the bundled model, started eager as ``make demo``).
    engine: str = "fake"
    #: Longest each Serve application may take to reach RUNNING.
    deploy_timeout_s: float = 600.0
    #: The drivers' longest answer (vLLM only; the fake answers a fixed document).
    max_output_tokens: int = 1100


@dataclass
class Restart:
    """One supervised recovery: kill → Ray's restart → the supervisor's ``start()``."""

    member: str
    old_pid: int
    new_pid: int
    ray_restart_s: float
    supervisor_start_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ServeStack(Stack):
    """A :class:`Stack` whose actors belong to the runtime supervisor; see the module."""

    cluster: Any = None
    budget: AdmissionBudget | None = None
    restarts: list[Restart] = field(default_factory=list)
    kill_times: dict[str, float] = field(default_factory=dict)

    def admission_budget(self) -> AdmissionBudget:
        assert self.budget is not None
        return self.budget

    async def refresh(self) -> None:
        """The drivers alive now: the supervisor's autoscaler adds and drains them."""
        import ray

        prefix = f"{self.cluster.runtime_config.actor_prefix}-driver-"
        names = await asyncio.to_thread(ray.util.list_named_actors)
        live = sorted(
            (n for n in names if n.startswith(prefix)), key=lambda n: int(n.rsplit("-", 1)[1])
        )
        known = {m.name: m for m in self.drivers}
        members = []
        for name in live:
            try:  # a driver being drained may still hold its name: leave it out
                member = known.get(name) or Member(name, ray.get_actor(name))
                member.pid = await _answer(member.handle.pid.remote(), 10)
                # job_attempts.worker_id: how the stalled-driver fault finds its attempts
                member.worker_id = (await _answer(member.handle.stats.remote(), 10))["worker_id"]
            except Exception:
                continue
            if member.pid > 0:  # never signal pid 0 (the whole process group)
                members.append(member)
        if members:
            self.drivers = members

    def note_kill(self, member: Member) -> None:
        self.kill_times[member.name] = time.monotonic()

    async def recover(self, member: Member) -> None:
        """Wait for Ray to restart ``member``'s process and for the supervisor to start it.

        The harness does not call ``start()``: on the deployed stack that is the
        runtime supervisor's health check. A member the supervisor replaced (its
        health check could not reach it) is found again by name.
        """
        import ray

        killed = self.kill_times.pop(member.name, time.monotonic())
        old = member.pid
        deadline = killed + SUPERVISED_START_WAIT_S
        restarted: float | None = None
        started: float | None = None
        while time.monotonic() < deadline:
            try:
                member.handle = ray.get_actor(member.name)
                pid = await _answer(member.handle.pid.remote(), 5)
            except Exception:  # restarting, replaced, or not yet re-registered
                await asyncio.sleep(0.2)
                continue
            if pid == old:  # not dead yet as Ray sees it
                await asyncio.sleep(0.1)
                continue
            member.pid = pid
            restarted = restarted or time.monotonic()
            if await _started(member):
                started = time.monotonic()
                break
            await asyncio.sleep(0.2)
        self.restarts.append(
            Restart(
                member.name,
                old,
                member.pid,
                round((restarted or time.monotonic()) - killed, 2),
                round(started - killed, 2) if started else None,
            )
        )

    async def pg_terminate(self) -> tuple[bool, str]:
        """``pg_terminate_backend`` on the connections of the drivers' and the
        maintenance actor's processes (found by their client ports)."""
        members = [*self.drivers, *([self.maintenance] if self.maintenance else [])]
        ports = await asyncio.to_thread(_client_ports, [m.pid for m in members], self._pg_port())
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(q("chaos_backend_terminate_ports"), ports)
        done = sum(1 for r in rows if r["terminated"])
        return done > 0, (
            f"terminated {done} backends of {len(members)} processes (drivers, maintenance)"
        )

    def _pg_port(self) -> int:
        return urlsplit(self.dsn).port or 5432

    def supervised(self) -> dict[str, Any]:
        return {"restarts": [r.as_dict() for r in self.restarts]}


async def _answer(ref: Any, timeout: float) -> Any:
    return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)


async def _started(member: Member) -> bool:
    """Whether ``start()`` ran in the member's current process."""
    try:
        if "-driver-" in member.name:
            stats = await _answer(member.handle.stats.remote(), 5)
            return bool(stats.get("running"))
        if member.name.endswith("-maintenance"):
            return bool(await _answer(member.handle.health.remote(), 5))
        await _answer(member.handle.backlog.remote(), 5)  # raises before start()
        return True
    except Exception:
        return False


def _client_ports(pids: list[int], server_port: int) -> list[int]:
    """Local ports of the TCP connections these processes hold to the database server."""
    import psutil

    ports: list[int] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.raddr and c.raddr.port == server_port and c.status == "ESTABLISHED":
                    ports.append(c.laddr.port)
    return ports


def _worker(cfg: StackConfig, serve: ServeOptions) -> WorkerConfig:
    worker = WorkerConfig(
        worker_id="driver",
        concurrency=cfg.concurrency,
        claim_batch=cfg.concurrency,
        attempt_timeout_seconds=cfg.attempt_timeout_s,
        commit_margin_seconds=0.5,
        heartbeat_seconds=cfg.lease_s / 4,
        admission_timeout_seconds=cfg.attempt_timeout_s,
        idle_poll_seconds=0.5,
    )
    if serve.engine == "vllm":
        worker = replace(worker, max_output_tokens=serve.max_output_tokens)
    return worker


@contextlib.asynccontextmanager
async def running_serve_stack(cfg: StackConfig, serve: ServeOptions) -> AsyncIterator[ServeStack]:
    """Stand the deployed system up (see the module docstring); tear it down afterwards."""
    import ray

    from cluster.delivery import ACTOR_NAME
    from cluster.drivers import EngineSpec
    from cluster.runtime import ClusterConfig, LocalCluster

    tag = f"flchaos.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    async with contextlib.AsyncExitStack() as stack:
        # The fleet keeps at least the harness's two drivers (it may add a third): with one
        # left, a kill and a stall of that one 3 s apart stopped every claim for 18 s,
        # which says nothing the harness's single-driver kill does not already say.
        floor = {"driver_min": cfg.drivers, "driver_max": cfg.drivers + 1}
        out = await outside_parts(stack, cfg, tag, floor)
        server, dsn, settings, pool = out.server, out.dsn, out.settings, out.pool
        api_key, corpus, proxy, fake, erp = out.api_key, out.corpus, out.proxy, out.fake, out.erp
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        # The runtime_env carries FENCELINE_* only: the checkout must shadow any install.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH", "")) if p
        )
        fake_url = f"http://127.0.0.1:{fake.port}"
        engine = (
            EngineSpec(kind="serve")
            if serve.engine == "vllm"
            else EngineSpec(kind="openai", base_url=f"{fake_url}/v1", model="fake")
        )
        limits = {
            "rpm": cfg.rpm,
            "tpm": cfg.tpm,
            "max_in_flight": cfg.max_in_flight,
            "grant_ttl_seconds": cfg.attempt_timeout_s + 10,
            "cooldown_max_seconds": 2.0,
        }
        if serve.engine == "vllm":  # the engine's scope budgets by tokens (KV cache)
            limits = {"max_in_flight": cfg.max_in_flight,
                      "grant_ttl_seconds": cfg.attempt_timeout_s + 10}  # fmt: skip
        cluster = LocalCluster(
            ClusterConfig(
                settings=settings,
                http_port=free_port(),
                drivers=cfg.drivers,
                worker=_worker(cfg, serve),
                engine=engine,
                admission=limits,
                eager=True,
                deploy_timeout_s=serve.deploy_timeout_s,
            )
        )
        t = time.monotonic()
        stack.callback(cluster.stop)
        # LocalCluster.start blocks; nothing else runs on this loop yet.
        cluster.start(progress=lambda m: print(f"chaos: {m}", file=sys.stderr, flush=True))
        budget = _budget(cluster, cfg, serve)
        result = ServeStack(
            cfg, settings, dsn, cluster.intake_url, api_key, budget.scope, corpus, proxy, fake,
            erp, pool, cluster=cluster, budget=budget, postgres=server,
        )  # fmt: skip
        await result.set_provider(result.baseline_plan())
        prefix = cluster.runtime_config.actor_prefix
        result.maintenance = Member(f"{prefix}-maintenance", ray.get_actor(f"{prefix}-maintenance"))
        result.delivery = Member(ACTOR_NAME, ray.get_actor(ACTOR_NAME))
        for member in (result.maintenance, result.delivery):
            member.pid = await _answer(member.handle.pid.remote(), 30)
        await result.refresh()
        print(
            f"chaos: serve stack up in {time.monotonic() - t:.0f}s ({len(result.drivers)} "
            f"drivers, intake {cluster.intake_url}), database {dsn}",
            file=sys.stderr,
        )
        yield result


def _budget(cluster: Any, cfg: StackConfig, serve: ServeOptions) -> AdmissionBudget:
    """The limits the runtime's admission actor enforces (the oracle checks the ledger)."""
    rc = cluster.runtime_config
    if serve.engine != "vllm":
        return AdmissionBudget(rc.scope, cfg.rpm, cfg.tpm, cfg.max_in_flight)
    scope = rc.engine_scopes[0]  # the default pools: one engine serves both pools
    return AdmissionBudget(scope.scope, None, None, scope.admission.get("max_in_flight"))
