"""How each scheduled fault is done to a running :class:`~benchmarks.chaos.stack.Stack`.

:func:`inject` performs one :class:`~benchmarks.chaos.schedule.Fault` and returns
its :class:`FaultRecord`: when it really began and ended (the band on the
timeline), whether it took effect (a crash point is only reached when work
passes it) and what was done. Kills go through the actors' crash points or a
plain SIGKILL of the actor's process; Ray restarts the process and
:meth:`Stack.recover` waits for it to start again (the harness stack calls
``start()`` itself; under ``--stack serve`` the runtime supervisor does).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.chaos.schedule import Fault, FaultKind
from benchmarks.chaos.stack import Member, Stack
from benchmarks.fake_provider import Latency
from pipeline import checkpoints
from pipeline.queries import q

#: Longest a crash point may wait for work to pass it before the fault counts as missed.
CRASH_WAIT_S = 30.0


@dataclass
class FaultRecord:
    kind: str
    scheduled_s: float
    start_s: float
    end_s: float
    triggered: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _wait_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


#: How long a call waits for an actor that is restarting (a fault right after another).
ACTOR_UNAVAILABLE_WAIT_S = 60.0


async def _call(handle: Any, method: str, *args: Any) -> Any:
    """Call an actor method; while the actor is (re)starting, try again, bounded (a
    2,000-invoice run armed a driver seconds after the previous fault restarted it)."""
    from ray.exceptions import ActorUnavailableError

    deadline = time.monotonic() + ACTOR_UNAVAILABLE_WAIT_S
    while True:
        try:
            return await asyncio.wrap_future(getattr(handle, method).remote(*args).future())
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


#: A stalled driver resumes at the latest this many leases after the reaper expired its
#: first attempt, even if no other driver has claimed the job yet (a backlog).
TAKEOVER_WAIT_LEASES = 2.0
#: Longest the harness waits for an ``arm`` call's reply (or for the process to die or stop).
ARM_WAIT_S = 60.0


async def _arm(member: Member, point: str, action: str = checkpoints.KILL) -> int:
    """Arm ``point`` in ``member``'s current process once; returns that process's id.

    The reply can be lost: work may pass the point before the reply leaves, so the
    process is dead (``kill``) or stopped (``stop``: the reply never comes until
    SIGCONT). Retrying the call would arm the process Ray restarted in its place,
    which nobody has started yet: the 2,000-invoice run armed a fresh delivery actor
    that way, waited 30 s for a delivery it never made, and stalled every delivery
    meanwhile. So the pid is read first (that call may be retried), ``arm`` is sent
    once, and a dead or stopped pid counts as armed.
    """
    from ray.exceptions import ActorUnavailableError, RayActorError

    pid = int(await _call(member.handle, "pid"))
    reply = asyncio.wrap_future(member.handle.arm.remote(point, action).future())
    deadline = time.monotonic() + ARM_WAIT_S
    try:
        while not reply.done():
            if not _alive(pid) or _stopped(pid):
                return pid
            if time.monotonic() > deadline:
                raise TimeoutError(f"{member.name}: no reply to arm({point!r}) in {ARM_WAIT_S}s")
            await asyncio.wait({reply}, timeout=0.05)
        armed = int(reply.result())
    except (ActorUnavailableError, RayActorError):
        return pid  # it died right after arming, at the point or not: _crash_at sees it dead
    finally:
        if not reply.done():
            reply.cancel()
    return armed  # the pid read before, unless Ray replaced the process in between


async def _crash_at(stack: Stack, member: Member, point: str) -> tuple[bool, str]:
    """Arm ``point`` in ``member``'s process, wait for it to die there, restart it."""
    pid = await _arm(member, point)
    died = await _wait_dead(pid, CRASH_WAIT_S)
    if not died:
        # Nothing passed the point: kill it anyway so the armed point cannot fire later.
        os.kill(pid, signal.SIGKILL)
    stack.note_kill(member)
    await stack.recover(member)
    verb = "died at" if died else "never reached (killed instead)"
    return died, f"{member.name} pid {pid} {verb} {point}; restarted as pid {member.pid}"


async def _kill_mid_call(stack: Stack, member: Member) -> tuple[bool, str]:
    """SIGKILL a driver while it holds leases (its provider calls in flight)."""
    deadline = time.monotonic() + CRASH_WAIT_S
    in_flight = 0
    while time.monotonic() < deadline:
        stats = await _call(member.handle, "stats")
        in_flight = int(stats.get("in_flight", 0))
        if in_flight:
            break
        await asyncio.sleep(0.05)
    pid = member.pid
    stack.note_kill(member)
    os.kill(pid, signal.SIGKILL)
    await _wait_dead(pid, 10)
    await stack.recover(member)
    return bool(in_flight), (
        f"{member.name} pid {pid} killed with {in_flight} attempts in flight; "
        f"restarted as pid {member.pid}"
    )


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (state ``T`` in /proc: SIGSTOP)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


async def _stall_past_lease(stack: Stack, member: Member) -> tuple[bool, str]:
    """Pause a driver right after an answer until another driver owns its job, then resume it.

    The ``attempt.answered`` point is armed to SIGSTOP: the driver holds a
    provider's answer it has not committed. While it is stopped its heartbeats
    stop, the reaper expires its leases and requeues their jobs, and the other
    driver claims them under fence + 1. Then SIGCONT (once a job was taken over,
    or :data:`TAKEOVER_WAIT_LEASES` leases after the first expiry when a backlog
    keeps the requeued jobs waiting): the stalled driver commits its answer under
    its old fence, which the job store must refuse and record as a late result.
    It took effect if the process stopped, the reaper expired its attempts, and a
    late result was recorded afterwards.
    """
    from datetime import UTC, datetime

    pid = await _arm(member, checkpoints.ATTEMPT_ANSWERED, checkpoints.STOP)
    deadline = time.monotonic() + CRASH_WAIT_S
    while not _stopped(pid) and _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if not _stopped(pid):
        # Nothing passed the point: kill it so the armed point cannot fire later.
        stack.note_kill(member)
        os.kill(pid, signal.SIGKILL)
        await stack.recover(member)
        return False, f"{member.name} pid {pid} never reached the point (killed instead)"
    stopped_at = time.monotonic()
    since = datetime.now(UTC)  # the reaper closes its attempts after this
    lease = stack.config.lease_s
    expired: list[Any] = []
    taken: list[Any] = []
    first_expiry: float | None = None
    try:
        deadline = time.monotonic() + CRASH_WAIT_S + 2 * lease
        while time.monotonic() < deadline:
            async with stack.pool.acquire() as conn:
                expired = await conn.fetch(q("chaos_stalled_attempt_list"), member.worker_id, since)
            taken = [r for r in expired if r["taken_over"]]
            if taken:
                break
            if expired:
                # Under a backlog the requeued job may wait its turn: resume anyway
                # after TAKEOVER_WAIT_LEASES, past the lease either way.
                first_expiry = first_expiry or time.monotonic()
                if time.monotonic() - first_expiry >= TAKEOVER_WAIT_LEASES * lease:
                    break
            await asyncio.sleep(0.25)
    finally:
        os.kill(pid, signal.SIGCONT)
    paused = time.monotonic() - stopped_at
    late: list[Any] = []
    deadline = time.monotonic() + CRASH_WAIT_S
    while expired and time.monotonic() < deadline:
        async with stack.pool.acquire() as conn:
            rows = await conn.fetch(q("chaos_stalled_attempt_list"), member.worker_id, since)
        late = [r for r in rows if r["late_result"]]
        if late:
            break
        await asyncio.sleep(0.25)
    jobs = ", ".join(f"{r['job_id']}@{r['fence']}" for r in late) or "none"
    return bool(expired and late), (
        f"{member.name} pid {pid} stopped after an answer for {paused:.1f}s; "
        f"{len(expired)} of its attempts expired by the reaper, {len(taken)} of those jobs "
        f"taken over under a newer fence; late results recorded: {jobs}"
    )


#: Longest the PostgreSQL server may take to answer again after its start command.
PG_BACK_WAIT_S = 60.0


def _shell(command: str) -> None:
    subprocess.run(command, shell=True, check=True, capture_output=True, timeout=120)


async def _postmaster_start(dsn: str, timeout: float) -> Any:
    """The server's start time, over a fresh connection; retried until it answers."""
    import asyncpg

    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                return await conn.fetchval("SELECT pg_postmaster_start_time()")
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def _pg_restart(stack: Stack, fault: Fault) -> tuple[bool, str]:
    """Stop the PostgreSQL server, keep it down ``fault.duration`` s, start it again.

    With a private server (``StackConfig.private_postgres``) it is that server
    (``pg_ctl -m fast stop`` / ``start`` on its data folder); otherwise the
    stack's shell commands, which stop a server every user of it sees go down
    (the long variant only, on a machine of one's own). It took effect if the
    server's start time changed.
    """
    cfg = stack.config
    server = getattr(stack, "postgres", None)
    if server is None and not (cfg.pg_stop_command and cfg.pg_start_command):
        raise ValueError(
            "pg_restart needs a private server or pg_stop_command and pg_start_command"
        )
    before = await _postmaster_start(stack.dsn, 10)
    if server is not None:
        stop, start = "pg_ctl -m fast stop", "pg_ctl start"
        await asyncio.to_thread(server.stop, "fast")
        await asyncio.sleep(fault.duration)
        await asyncio.to_thread(server.start)
    else:
        stop, start = cfg.pg_stop_command, cfg.pg_start_command
        await asyncio.to_thread(_shell, stop)
        await asyncio.sleep(fault.duration)
        await asyncio.to_thread(_shell, start)
    after = await _postmaster_start(stack.dsn, PG_BACK_WAIT_S)
    where = f"private server :{server.port}" if server is not None else "server"
    return after != before, (
        f"{where}: `{stop}`, {fault.duration:.1f}s down, `{start}`; "
        f"started {before} before, {after} after"
    )


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=120)


async def inject(stack: Stack, fault: Fault, t0: float) -> FaultRecord:
    """Do ``fault`` now (``t0``: the run's start, ``time.monotonic()``)."""
    start = time.monotonic() - t0
    kind = fault.kind
    triggered, detail = True, ""
    if kind in (
        FaultKind.DRIVER_KILL_MID_CALL,
        FaultKind.DRIVER_KILL_AFTER_ANSWER,
        FaultKind.DRIVER_STALL_PAST_LEASE,
    ):
        await stack.refresh()  # the drivers alive now (a supervisor autoscales them)
    if kind is FaultKind.DRIVER_KILL_MID_CALL:
        triggered, detail = await _kill_mid_call(stack, stack.driver(fault.target))
    elif kind is FaultKind.DRIVER_KILL_AFTER_ANSWER:
        member = stack.driver(fault.target)
        triggered, detail = await _crash_at(stack, member, checkpoints.ATTEMPT_ANSWERED)
    elif kind is FaultKind.DRIVER_STALL_PAST_LEASE:
        triggered, detail = await _stall_past_lease(stack, stack.driver(fault.target))
    elif kind is FaultKind.DELIVERY_KILL_MID_POST:
        assert stack.delivery is not None
        triggered, detail = await _crash_at(stack, stack.delivery, checkpoints.DELIVERY_ANSWERED)
    elif kind is FaultKind.RELAY_KILL_AFTER_CONFIRM:
        assert stack.maintenance is not None
        triggered, detail = await _crash_at(stack, stack.maintenance, checkpoints.RELAY_CONFIRMED)
    elif kind is FaultKind.PG_TERMINATE:
        triggered, detail = await stack.pg_terminate()
    elif kind is FaultKind.PG_RESTART:
        triggered, detail = await _pg_restart(stack, fault)
    elif kind is FaultKind.AMQP_CUT:
        stack.proxy.sever()
        await asyncio.sleep(fault.duration)
        stack.proxy.restore()
        detail = f"AMQP links cut for {fault.duration:.1f}s"
    elif kind is FaultKind.RABBITMQ_RESTART:
        await asyncio.to_thread(_rabbitmqctl, "stop_app")
        await asyncio.sleep(fault.duration)
        await asyncio.to_thread(_rabbitmqctl, "start_app")
        detail = f"rabbitmqctl stop_app, {fault.duration:.1f}s, start_app"
    elif kind is FaultKind.ERP_DOWN_THEN_500:
        await stack.set_erp("down", retry_after="1")
        await asyncio.sleep(fault.duration)
        await stack.set_erp("status_after_commit", status=500, remaining=5)
        await asyncio.sleep(2.0)
        await stack.set_erp("none")
        detail = f"ERP 503 for {fault.duration:.1f}s, then 500 after commit for up to 2s"
    else:
        plan = stack.baseline_plan()
        if kind is FaultKind.PROVIDER_429_STORM:
            plan = plan.model_copy(update={"rates": {"429": 1.0}, "retry_after": "1"})
            detail = "every call 429 with Retry-After: 1"
        elif kind is FaultKind.PROVIDER_SLOW:
            slow = Latency(dist="fixed", a=stack.config.attempt_timeout_s + 1.5)
            plan = plan.model_copy(update={"latency": slow})
            detail = (
                f"answers after {slow.a:.1f}s (attempt timeout {stack.config.attempt_timeout_s}s)"
            )
        elif kind is FaultKind.PROVIDER_MALFORMED:
            plan = plan.model_copy(update={"rates": {"malformed": 0.5}})
            detail = "half the answers malformed"
        await stack.set_provider(plan)
        await asyncio.sleep(fault.duration)
        await stack.set_provider(stack.baseline_plan())
        detail += f" for {fault.duration:.1f}s"
    return FaultRecord(str(kind), fault.at, start, time.monotonic() - t0, triggered, detail)
