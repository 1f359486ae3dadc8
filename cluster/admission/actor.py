"""AdmissionActor: one admission scope as one named Ray actor.

The limiter's scope is the provider project or engine pool, never the pod
(spec section 3), so there is exactly one actor per scope:
:func:`admission_actor` creates it detached with ``get_if_exists`` under
:func:`actor_name` ``(scope)``, and every driver of every node gets the same
one. The actor is a plain class around :class:`pipeline.admission.policy.AdmissionPolicy`
(the tested unit); ``ray.remote(num_cpus=0, max_concurrency=1000)`` is applied
in the builder, so thousands of drivers can wait inside ``acquire`` at once on
one event loop, where they are served in deficit-round-robin order.

Durability: with a ``database_url`` the actor records its scope's limits in
``admission_scopes`` when it starts (what the operator dashboard reads: the API
never sees this configuration), every grant and settlement is written to the
admission ledger (:mod:`pipeline.admission.ledger`) before the call returns,
and a (re)started actor first expires grants older than the TTL and replays the
last window, so uncertain attempts stay charged across restarts
and open grants can still be released. A ledger write that fails is logged and
counted (``snapshot()['ledger_errors']``) but never blocks admission: the
in-memory limits are the safety property, the ledger is the accounting.

Drivers reach it through an :class:`~cluster.admission.client.AdmissionClient`,
which implements the documented behaviour when this actor is unreachable: fail
closed (default) or a bounded local emergency allowance.

One concept over 450 lines: waiters, pump and ledger writes order themselves around
each policy decision on one event loop (ledger first, budget second), so they stay together.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

import asyncpg

from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.admission import (
    AdmissionConfig,
    AdmissionLedger,
    AdmissionPolicy,
    AdmissionRequest,
    Grant,
    Reconciliation,
    ReportedUsage,
    UnknownGrant,
    Wait,
    WaitReason,
    admission_registry,
    reconcile,
)
from pipeline.database import create_pool
from pipeline.errors import OwnershipError
from pipeline.messaging.scheduler import TRANSIENT_DB_ERRORS
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

#: Longest the actor's pump sleeps without an event (a safety net, not a poll).
_MAX_PUMP_SLEEP = 5.0
#: How long a settlement's ledger write is retried through a database outage.
LEDGER_RETRY_SECONDS = 30.0


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class AdmissionActor:
    """One scope's admission state behind async methods (one actor event loop).

    Every method may be called concurrently; the policy is only touched between
    awaits, so each decision is atomic.
    """

    def __init__(
        self,
        config: AdmissionConfig | Mapping[str, Any],
        *,
        database_url: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = (
            config
            if isinstance(config, AdmissionConfig)
            else AdmissionConfig.model_validate(config)
        )
        self._policy = AdmissionPolicy(self.config, clock=clock)
        #: Usage vs limits of this scope (``fenceline_admission_usage``/``_limit``), read
        #: from the policy when collected; inside Ray a bridge carries it to the agent.
        self.metrics_registry = admission_registry(self._policy)
        self._metrics_bridge: RegistryBridge | None = None
        self._database_url = database_url
        self._pool: asyncpg.Pool | None = None
        self._ledger: AdmissionLedger | None = None
        self._waiters: dict[int, asyncio.Future[Grant | None]] = {}
        self._wake: asyncio.Future[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._start_lock: asyncio.Lock | None = None
        self._started = False
        self._background: set[asyncio.Task[None]] = set()
        self.ledger_errors = 0
        self.restored = 0
        #: Changes when Ray restarts the actor: operators (and tests) can tell a
        #: fresh incarnation, whose in-memory grants start empty, from the old one.
        self.incarnation = uuid.uuid4().hex

    # ---- lifecycle -------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        """Open the ledger, expire stale grants, replay the window, start the pump.

        Idempotent (every driver may call it); every other method starts the
        actor too, so a restarted actor recovers on its first call. Returns
        :meth:`snapshot`.
        """
        await self._ensure_started()
        return await self.snapshot()

    async def _ensure_started(self) -> None:
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if not self._started:
                await self._open_ledger()
                self._pump = asyncio.create_task(self._run_pump())
                # On the actor's loop, so collecting never races a decision.
                self._metrics_bridge = bridge_to_ray(self.metrics_registry)  # None outside Ray
                self._started = True

    async def stop(self) -> None:
        """Stop the pump; queued acquirers get ``Wait(LIMITER_UNREACHABLE)``."""
        if self._metrics_bridge is not None:
            self._metrics_bridge.stop()
            self._metrics_bridge = None
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
            self._pump = None
        self._wake = None
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
            self._ledger = None
        self._started = False

    async def _open_ledger(self) -> None:
        if self._database_url is None:
            return
        scope, ttl = self.config.scope, self.config.grant_ttl_seconds
        try:
            self._pool = await create_pool(self._database_url, min_size=1, max_size=4)
            self._ledger = AdmissionLedger(self._pool)
            await self._ledger.record_limits(self.config, self.incarnation)
            if ttl is not None:
                expired = await self._ledger.expire_stale(scope, ttl)
                if expired:
                    log.warning(
                        "admission %s: %d stale grants expired (uncertain)", scope, len(expired)
                    )
            self.restored = self._policy.restore(
                await self._ledger.window(scope, self.config.replay_seconds())
            )
            log.info("admission %s: replayed %d grants from the ledger", scope, self.restored)
        except (OSError, asyncpg.PostgresError) as exc:
            self.ledger_errors += 1
            log.error("admission %s: ledger unavailable, running unrecorded: %s", scope, exc)

    # ---- the protocol ----------------------------------------------------------

    async def acquire(
        self, request: AdmissionRequest, *, timeout: float | None = None
    ) -> Grant | Wait:
        """Wait, in fair order, until every dimension grants at once.

        Args:
            request: the attempt's ask (tenant as a UUID string when the ledger
                is on; job and fence are recorded on the grant and in the ledger;
                holder and run for :meth:`abandon`).
            timeout: seconds to wait; 0 tries once; None waits until granted.

        Returns:
            The grant, or a :class:`Wait` saying which limit still blocks.

        Raises:
            ReservationTooLarge: no amount of waiting can admit this reservation.
        """
        await self._ensure_started()
        ticket = self._policy.submit(request)
        fut: asyncio.Future[Grant | None] = asyncio.get_running_loop().create_future()
        self._waiters[ticket.id] = fut
        self._dispatch()
        if not fut.done():
            self._kick()
            try:
                await wait_within(asyncio.shield(fut), timeout)
            except TimeoutError:
                if not fut.done():
                    hint = self._policy.wait_hint(ticket.id)
                    self._policy.cancel(ticket.id)
                    self._waiters.pop(ticket.id, None)
                    return hint
            except asyncio.CancelledError:
                self._waiters.pop(ticket.id, None)
                handed = fut.result() if fut.done() else None
                if not self._policy.cancel(ticket.id) and handed is not None:
                    self._give_back(handed)
                raise
        grant = fut.result()
        if grant is None:
            return Wait(self.config.recheck_seconds, WaitReason.LIMITER_UNREACHABLE)
        if self._ledger is not None:
            ledger = self._ledger
            await self._ledger_call(lambda: ledger.record_grant(grant), grant.grant_id)
        return grant

    async def release(
        self,
        grant: Grant | str,
        usage: ReportedUsage | None = None,
        *,
        uncertain: bool = False,
        attempted: bool = True,
    ) -> Reconciliation | None:
        """Settle a grant (rules of :func:`pipeline.admission.policy.reconcile`).

        Returns None for a grant this actor no longer holds open (expired, or
        settled already); the ledger keeps the first settlement.
        """
        await self._ensure_started()
        grant_id = grant if isinstance(grant, str) else grant.grant_id
        pending = self._policy.pending_release(
            grant_id, usage, uncertain=uncertain, attempted=attempted
        )
        if pending is not None and self._ledger is not None:
            # Ledger first, budget second: each grant's [granted_at, settled_at) in the
            # ledger then lies inside the time the policy held its reservation, so the
            # ledger never shows more reserved at once than the budget admitted.
            await self._ledger_call(lambda: self._settle_first(pending), grant_id, retry=True)
        try:
            rec = self._policy.release(grant, usage, uncertain=uncertain, attempted=attempted)
        except UnknownGrant:
            grant_id = grant if isinstance(grant, str) else grant.grant_id
            log.warning("admission %s: late or repeated release of %s", self.config.scope, grant_id)
            if isinstance(grant, Grant) and self._ledger is not None:
                late = reconcile(grant, usage, uncertain=uncertain, attempted=attempted)
                with contextlib.suppress(OwnershipError):
                    await self._ledger.record_settlement(late)
            return None
        self._dispatch()
        if pending is None and self._ledger is not None:  # not open at first, yet released
            ledger = self._ledger
            await self._ledger_call(lambda: ledger.record_settlement(rec), rec.grant_id, retry=True)
        return rec

    async def _settle_first(self, rec: Reconciliation) -> None:
        """Write a settlement before the budget is freed; a settled grant keeps the first."""
        assert self._ledger is not None
        with contextlib.suppress(OwnershipError):
            await self._ledger.record_settlement(rec)

    async def abandon(self, holder: str, current_run: str, call_bound_seconds: float) -> int:
        """A restarted driver gives up its dead run's grants (:meth:`AdmissionPolicy.abandon`).

        Each expires, uncertain and fully charged, once its attempt's timeout has
        passed (at once if it has), instead of at the grant TTL, so a killed
        driver's permits come back for the drivers still running.
        """
        await self._ensure_started()
        moved = self._policy.abandon(holder, current_run, call_bound_seconds)
        if moved:
            log.warning(
                "admission %s: %d grants of an earlier run of %s abandoned",
                self.config.scope, moved, holder,
            )  # fmt: skip
            self._dispatch()  # the ones already due expire now (ledger written as expiry)
            self._kick()  # the pump sleeps until the next deadline
        return moved

    async def cooldown(self, seconds: float | None = None) -> float:
        """Shared cooldown after a 429 (``seconds`` = the provider's delay hint)."""
        await self._ensure_started()
        remaining = self._policy.cooldown(seconds)
        log.info(
            "admission %s: 429 cooldown %.2fs (hint %s)", self.config.scope, remaining, seconds
        )
        self._kick()
        return remaining

    async def resize(self, max_in_flight: int) -> dict[str, Any]:
        """Set the in-flight budget (an OCR scope follows its running replicas);
        grants above a smaller budget run out, none is taken back."""
        await self._ensure_started()
        self._policy.resize(max_in_flight)
        self.config = self._policy.config
        self._kick()
        return await self.snapshot()

    async def run_once(self) -> int:
        """One dispatch round (what the pump does on a timer), for tests and
        operators; returns the number of waiting acquirers granted."""
        await self._ensure_started()
        return self._dispatch()

    async def snapshot(self) -> dict[str, Any]:
        """The policy snapshot plus actor facts (waiters, ledger state)."""
        snap = dataclasses.asdict(self._policy.snapshot())
        snap.update(
            waiters=len(self._waiters),
            ledger=self._ledger is not None,
            ledger_errors=self.ledger_errors,
            restored=self.restored,
            incarnation=self.incarnation,
            metrics_bridged=self._metrics_bridge is not None and self._metrics_bridge.running,
        )
        return snap

    # ---- internals -------------------------------------------------------------

    def _kick(self) -> None:
        if self._wake is not None:
            _resolve(self._wake)

    def _dispatch(self) -> int:
        """Expire overdue grants, then hand grants to waiting acquirers in DRR order;
        returns how many acquirers received a grant."""
        handed = 0
        # An expiry frees its permit now and writes the ledger in the background: the
        # row must say now, or a grant dispatched below (written first) would overlap
        # it in the ledger; a 2,000-invoice chaos run at load 29 showed 7 of 6 permits.
        # (This host's clock against the server's now(): NTP skew, not write lag.)
        expired_at = datetime.now(UTC)
        for rec in self._policy.expire_overdue():
            log.warning(
                "admission %s: grant %s of %s expired unreleased; charged %d tokens",
                self.config.scope, rec.grant_id, rec.tenant, rec.charged_tokens,
            )  # fmt: skip
            if self._ledger is not None:
                self._spawn(self._record_expiry(self._ledger, rec, expired_at))
        for ticket in self._policy.dispatch():
            assert ticket.grant is not None
            fut = self._waiters.pop(ticket.id, None)
            if fut is None or fut.done():
                self._give_back(ticket.grant)
            else:
                fut.set_result(ticket.grant)
                handed += 1
        return handed

    def _give_back(self, grant: Grant) -> None:
        """A grant whose acquirer left before receiving it: never attempted."""
        with contextlib.suppress(UnknownGrant):
            self._policy.release(grant, attempted=False)
        self._kick()

    async def _run_pump(self) -> None:
        """Re-dispatch when time alone unblocks a waiter (window slides, cooldown ends).

        Sleeps on a plain future that :meth:`_kick` resolves or a timer ends, so
        cancelling the pump (``stop``) never races a nested ``wait_for`` task.
        """
        loop = asyncio.get_running_loop()
        while True:
            self._wake = loop.create_future()
            self._dispatch()
            delay = self._policy.next_wakeup()
            sleep = _MAX_PUMP_SLEEP if delay is None else min(delay, _MAX_PUMP_SLEEP)
            timer = loop.call_later(sleep, _resolve, self._wake)
            try:
                await self._wake
            finally:
                timer.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _record_expiry(
        self, ledger: AdmissionLedger, rec: Reconciliation, at: datetime
    ) -> None:
        await self._ledger_call(lambda: ledger.record_settlement(rec, at), rec.grant_id, retry=True)

    async def _ledger_call(
        self, write: Callable[[], Awaitable[None]], grant_id: str, *, retry: bool = False
    ) -> None:
        """Do one ledger write; a failure is logged and counted, never raised.

        With ``retry`` (settlements) a transient database error (a restart, a
        terminated backend) is retried with backoff for up to
        :data:`LEDGER_RETRY_SECONDS`: a settlement lost to an outage would leave
        its grant open in the ledger for ever, and every later grant would look
        like one permit too many (a chaos run's private-server restart showed 9 of
        6). A grant that was never written only undercounts, so it is not retried.
        """
        delay, deadline = 0.2, time.monotonic() + LEDGER_RETRY_SECONDS
        while True:
            try:
                await write()
                return
            except TRANSIENT_DB_ERRORS as exc:
                if retry and time.monotonic() + delay < deadline:
                    log.warning(
                        "admission %s: ledger write for %s failed (%s); retrying",
                        self.config.scope, grant_id, exc,
                    )  # fmt: skip
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                error: BaseException = exc
            except (ValueError, asyncpg.PostgresError, OwnershipError) as exc:
                error = exc
            self.ledger_errors += 1
            log.error(
                "admission %s: ledger write for %s failed: %s", self.config.scope, grant_id, error
            )
            return


def admission_actor(
    name: str,
    policy_config: AdmissionConfig | Mapping[str, Any],
    *,
    database_url: str | None = None,
    namespace: str | None = None,
    detached: bool = True,
) -> Any:
    """Get or create the named AdmissionActor of a scope; returns its handle.

    Use ``name=actor_name(config.scope)``. With ``get_if_exists`` the first
    creator's config wins (compare ``snapshot()['limits']`` if it matters). The
    actor reserves no CPU (it waits on I/O; a CPU-reserving actor deadlocks Serve
    on 2 cores) and is restarted by Ray after a crash, recovering from the ledger.
    """
    import ray

    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_concurrency": 1000,
        "name": name,
        "get_if_exists": True,
        "max_restarts": -1,
        "max_task_retries": 0,  # an acquire is not idempotent: never replayed blindly
    }
    if namespace is not None:
        options["namespace"] = namespace
    if detached:
        options["lifetime"] = "detached"
    remote_cls = ray.remote(AdmissionActor)
    return remote_cls.options(**options).remote(policy_config, database_url=database_url)
