"""The dispatcher: claims due deliveries, sends each signed through the egress
client, and commits the outcome under the claim.

The state machine it drives, and the settle hook that creates deliveries, are in
:mod:`pipeline.delivery.deliveries`; what an answer means for the delivery and
its endpoint's breaker, and its commit under the fence, in
:mod:`pipeline.delivery.outcomes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from pipeline import checkpoints
from pipeline.clock import Clock, DatabaseClock
from pipeline.data_keys import DataKeys
from pipeline.delivery.claims import Claim, DispatchReport
from pipeline.delivery.deliveries import NOTIFY_CHANNEL
from pipeline.delivery.egress_client import EgressClient, HttpOutcome
from pipeline.delivery.endpoints import SecretBox, signing_keys
from pipeline.delivery.metrics import DeliveryMetrics
from pipeline.delivery.outcomes import OutcomeRecorder
from pipeline.delivery.policy import DeliveryConfig, Verdict, classify
from pipeline.delivery.signing import webhook_headers
from pipeline.delivery.verification import EndpointChallenger
from pipeline.errors import DataKeyNotHere, DataKeyShredded, DataKeyUnavailable, LeaseLost
from pipeline.logs import bind_job
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.sealed_results import open_body
from pipeline.service import LoopService
from pipeline.tracing import SPAN_DELIVERY, Span, SpanKind, job_span, set_error

log = logging.getLogger(__name__)

#: How often the running loop samples the delivery-lag gauges (one grouped query).
LAG_SAMPLE_SECONDS = 10.0


#: Test seam: awaited after the response, before the outcome commits.
AfterResponse = Callable[[Claim, HttpOutcome], Awaitable[None]]


class DeliveryDispatcher(LoopService):
    """Claims due deliveries, signs and POSTs them, and records outcomes under the fence.

    Args:
        pool: the Fenceline database.
        config: timeouts, lease, concurrency, schedule, breaker.
        client: guarded HTTP client (the SSRF guard runs on every attempt).
        box: opens sealed endpoint secrets.
        keys: open the sealed values of a body's result just before it is signed
            (:func:`pipeline.sealed_results.open_body`); None: no KEK here, so a
            body with a sealed value is retried (``data_key_not_here``).
        clock: injectable time (None → the database's ``now()`` and wall time).
        rng: jitter source.
        worker_id: recorded on leases and attempts.
        after_response: fault-injection seam for tests (see :data:`AfterResponse`).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        config: DeliveryConfig,
        *,
        client: EgressClient,
        box: SecretBox,
        keys: DataKeys | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        worker_id: str | None = None,
        metrics: DeliveryMetrics | None = None,
        after_response: AfterResponse | None = None,
    ) -> None:
        self.pool = pool
        self.config = config
        self.client = client
        self.box = box
        self.keys = keys if keys is not None else DataKeys(None)
        self.clock = clock or DatabaseClock()
        self.rng = rng or random.Random()
        self.worker_id = worker_id or f"delivery-{uuid.uuid4().hex[:8]}"
        self.metrics = metrics or DeliveryMetrics()
        self.after_response = after_response
        self._outcomes = OutcomeRecorder(
            pool, config, clock=self.clock, metrics=self.metrics, rng=self.rng
        )
        #: Challenges pending endpoints before their held deliveries may flow.
        self.challenger = EndpointChallenger(pool, client, box, clock=self.clock)
        self._tasks: set[asyncio.Task[str]] = set()
        self._wake = asyncio.Event()
        self._stopping = False
        self._listener: Any = None

    # ---------------------------------------------------------------- service
    async def start(self) -> None:
        """Listen for new deliveries and run the dispatch loop in the background."""
        if self._task is not None:
            return
        self._stopping = False
        self._listener = await self.pool.acquire()
        await self._listener.add_listener(NOTIFY_CHANNEL, self._on_notify)
        self._launch(self._loop(), f"{self.worker_id}-loop")

    def health_name(self) -> str:
        """Each round of the loop (reap, claim, start the attempts) is a pass."""
        return self.worker_id

    def health_details(self) -> dict[str, Any]:
        return {"in_flight": len(self._tasks)}

    async def stop(self) -> None:
        """Stop claiming; let in-flight attempts finish (they are bounded by the timeout)."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.remove_listener(NOTIFY_CHANNEL, self._on_notify)
            await self.pool.release(self._listener)
            self._listener = None

    async def close(self) -> None:
        """Stop and release the HTTP client (the dispatcher cannot start again)."""
        await self.stop()
        await self.client.aclose()

    def wake(self) -> None:
        """Look for due work now (a hand-off from a driver, or a NOTIFY)."""
        self._wake.set()

    def _on_notify(self, *_: object) -> None:
        self._wake.set()

    async def sample_metrics(self) -> dict[str, int]:
        """Sample the delivery-lag gauges (the loop does it every :data:`LAG_SAMPLE_SECONDS`)."""
        async with self.pool.acquire() as conn:
            return await self.metrics.sample(conn, self.clock.now())

    async def _loop(self) -> None:
        sampled = -math.inf
        while not self._stopping:
            self._wake.clear()
            try:
                await self._pump()
                if time.monotonic() - sampled >= LAG_SAMPLE_SECONDS:
                    sampled = time.monotonic()
                    await self.sample_metrics()
            except Exception as exc:  # a service loop outlives one bad round; leases recover it
                self.progress.failed(exc)
                log.exception("delivery dispatcher: pump failed; retrying after the poll interval")
            else:
                self.progress.succeeded()
            waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
            waiters |= set(self._tasks)
            _done, pending = await asyncio.wait(
                waiters, timeout=self.config.poll_seconds, return_when=asyncio.FIRST_COMPLETED
            )
            for w in pending:
                if w not in self._tasks:
                    w.cancel()

    async def run_once(self) -> DispatchReport:
        """Reap expired leases, claim what is due and finish every claimed attempt."""
        report = DispatchReport()
        report.reaped, tasks = await self._pump()
        report.claimed = len(tasks)
        for outcome in await asyncio.gather(*tasks):
            report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
        return report

    async def _pump(self) -> tuple[int, list[asyncio.Task[str]]]:
        reaped = await self.reap()
        await self.challenge_due()
        free = self.config.max_in_flight - len(self._tasks)
        if free <= 0:
            return reaped, []
        tasks = []
        for claim in await self._claim(free):
            task = asyncio.create_task(self._attempt(claim))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            tasks.append(task)
        return reaped, tasks

    # ------------------------------------------------------------------ steps
    async def challenge_due(self, *, limit: int = 10) -> int:
        """Challenge pending endpoints that are due (:mod:`pipeline.delivery.verification`);
        returns how many were verified, whose held deliveries the claim then takes."""
        try:
            results = await self.challenger.run_due(limit)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            # Deliveries to verified endpoints go on; a leased endpoint is retried
            # when its lease (next_challenge_at) runs out.
            log.exception("endpoint challenges failed")
            return 0
        return sum(r.verified for r in results)

    async def reap(self, *, limit: int = 100) -> int:
        """Move in-flight deliveries whose lease expired back to retry_scheduled (fence+1)."""
        now = self.clock.now()
        n = 0
        async with self.pool.acquire() as conn, conn.transaction():
            for r in await conn.fetch(q("delivery_select_expired_leases"), now, limit):
                row = await conn.fetchrow(
                    q("delivery_reschedule_if_expired"), r["id"], r["fence"], now
                )
                if row is None:  # pragma: no cover - the row is locked above
                    continue
                await conn.fetchval(
                    q("delivery_attempt_expire_if_running"), r["id"], r["fence"], now
                )
                n += 1
        if n:
            log.warning("delivery reaper: %d expired leases rescheduled", n)
        return n

    async def _claim(self, limit: int) -> list[Claim]:
        now = self.clock.now()
        async with self.pool.acquire() as conn, conn.transaction():
            endpoints = [
                r["id"] for r in await conn.fetch(q("delivery_endpoint_lock_due"), now, limit)
            ]
            if not endpoints:
                return []
            rows = await conn.fetch(
                q("delivery_claim_for_endpoints"),
                now,
                endpoints,
                self.config.per_endpoint_concurrency,
                limit,
                float(self.config.lease_seconds),
                self.worker_id,
            )
        return [from_record(Claim, r) for r in rows]

    def _wall_now(self) -> datetime:
        return self.clock.now() or datetime.now(UTC)

    async def _attempt(self, claim: Claim) -> str:
        """Sign, POST and settle one claim, in a span of the job's trace; returns the outcome."""
        attrs = {
            "fenceline.job_id": str(claim.job_id),
            "fenceline.tenant": str(claim.tenant_id),
            "fenceline.delivery_id": str(claim.id),
            "fenceline.endpoint_id": str(claim.endpoint_id),
            "fenceline.event_type": claim.event_type,
            "fenceline.attempt": claim.attempt,
            "fenceline.fence": claim.fence,
            "fenceline.endpoint_state": claim.endpoint_state,
        }
        with (
            job_span(SPAN_DELIVERY, claim.traceparent, attrs, kind=SpanKind.CLIENT) as span,
            bind_job(
                job_id=claim.job_id,
                tenant=claim.tenant_id,
                delivery_id=str(claim.id),
                attempt=claim.attempt,
                fence=claim.fence,
            ),
        ):
            name = await self._attempt_traced(claim, span)
            span.set_attribute("fenceline.outcome", name)
            log.info("delivery attempt %d: %s", claim.attempt, name)
            if name != "delivered":
                set_error(span, name)
            return name

    async def _attempt_traced(self, claim: Claim, span: Span) -> str:
        signed_at = int(self._wall_now().timestamp())
        key_ids: list[str] = []
        try:
            async with self.pool.acquire() as conn:
                keys = await signing_keys(conn, self.box, claim.endpoint_id, self.clock.now())
                # the body as rendered holds the result's text sealed; opened here, the
                # same bytes on every attempt (pipeline/sealed_results.py)
                body = await open_body(self.keys, conn, claim.tenant_id, claim.job_id, claim.body)
            if not keys:
                raise ValueError("endpoint has no signing key")
            key_ids = [k.key_id for k in keys]
            headers = webhook_headers([k.secret for k in keys], str(claim.id), signed_at, body)
        except (DataKeyShredded, DataKeyUnavailable) as exc:
            # the body can never be opened: retrying cannot change it
            outcome = HttpOutcome(None, 0.0, exc.error_class, f"{type(exc).__name__}: {exc}")
            verdict = Verdict("failed", "neutral", exc.error_class, str(exc))
        except DataKeyNotHere as exc:
            # no KEK here for it: a deployment fault, retried (another worker may have one)
            outcome = HttpOutcome(None, 0.0, exc.error_class, f"{type(exc).__name__}: {exc}")
            verdict = Verdict("retry", "neutral", exc.error_class, str(exc))
        except (ValueError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            outcome = HttpOutcome(None, 0.0, "signing", f"{type(exc).__name__}: {exc}")
            verdict = Verdict("retry", "neutral", "signing", str(exc))
        else:
            outcome = await self.client.post(claim.url, body, headers)
            verdict = classify(outcome, self._wall_now())
        if outcome.status is not None:
            span.set_attribute("http.response.status_code", outcome.status)
        span.set_attribute("fenceline.verdict", verdict.kind)
        span.set_attribute("fenceline.breaker", verdict.breaker)
        if verdict.error_class:
            span.set_attribute("fenceline.error_class", verdict.error_class)
        self.metrics.attempt_seconds.observe(outcome.latency_ms / 1000.0)
        checkpoints.reached(checkpoints.DELIVERY_ANSWERED)  # the ERP may have committed
        if self.after_response is not None:
            await self.after_response(claim, outcome)
        try:
            name = await self._outcomes.settle(claim, outcome, verdict, signed_at, key_ids)
        except LeaseLost:
            log.warning(
                "delivery %s fence %d: lease lost before the outcome", claim.id, claim.fence
            )
            name = "stale"
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            # Nothing committed: the lease expires and the reaper retries the delivery
            # under a new fence; the receiver deduplicates if this attempt landed.
            log.exception("delivery %s fence %d: outcome not recorded", claim.id, claim.fence)
            name = "unrecorded"
        self.metrics.attempts.labels(name, claim.endpoint_state).inc()
        return name
