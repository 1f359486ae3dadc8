"""One delivery attempt's outcome, committed under the claim's fence.

The dispatcher (:mod:`pipeline.delivery.dispatcher`) sends; this module decides
and writes what the answer means, in one transaction that first re-locks the
delivery under its fence: delivered, given up (failed, abandoned) or retried
on the jittered schedule within the delivery's horizon; and for the endpoint,
its failure streak, its circuit breaker (opened after ``breaker_threshold``
failures or by a 429 with ``Retry-After``, closed by a success), auth and
egress alerts, and disabling an endpoint failing for ``disable_after_seconds``.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from pipeline.clock import Clock
from pipeline.delivery.claims import Claim
from pipeline.delivery.egress_client import HttpOutcome
from pipeline.delivery.endpoints import disable_endpoint
from pipeline.delivery.metrics import DeliveryMetrics
from pipeline.delivery.policy import DeliveryConfig, Verdict
from pipeline.errors import LeaseLost
from pipeline.identity import DUPLICATE_INVOICE
from pipeline.queries import q

log = logging.getLogger(__name__)


class OutcomeRecorder:
    """Writes attempt outcomes for one dispatcher (its config, clock, metrics, jitter)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        config: DeliveryConfig,
        *,
        clock: Clock,
        metrics: DeliveryMetrics,
        rng: random.Random,
    ) -> None:
        self.pool = pool
        self.config = config
        self.clock = clock
        self.metrics = metrics
        self.rng = rng

    async def settle(
        self,
        claim: Claim,
        outcome: HttpOutcome,
        verdict: Verdict,
        signed_at: int,
        key_ids: list[str],
    ) -> str:
        """Commit ``outcome`` of ``claim``'s attempt; returns the delivery's new state.

        Raises:
            LeaseLost: the claim's fence is no longer the delivery's (nothing written).
        """
        cfg = self.config
        clock_now = self.clock.now()
        error = (verdict.error or "")[:2000] or None
        async with self.pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchrow(
                q("delivery_lock_if_fenced"), claim.id, claim.fence, clock_now
            )
            if locked is None:
                raise LeaseLost(f"delivery {claim.id} fence {claim.fence}: outcome rejected")
            now: datetime = locked["now"]
            ep = await conn.fetchrow(q("endpoint_lock"), claim.endpoint_id, clock_now)
            next_at: datetime | None = None
            if verdict.kind == "delivered":
                got = await conn.fetchval(
                    q("delivery_deliver_if_fenced"),
                    claim.id,
                    claim.fence,
                    outcome.status,
                    outcome.latency_ms,
                    clock_now,
                )
                if got is None:  # pragma: no cover - locked above
                    raise LeaseLost(f"delivery {claim.id} fence {claim.fence}: delivery rejected")
                state = "delivered"
                if ep["breaker_state"] == "open":
                    await self._event(
                        conn, claim, "breaker_closed", "a delivery succeeded", clock_now
                    )
                await conn.execute(q("endpoint_record_success"), claim.endpoint_id, clock_now)
            elif verdict.kind == "gone":
                await disable_endpoint(
                    conn, claim.endpoint_id, claim.tenant_id, "gone (HTTP 410)", clock_now
                )
                self.metrics.alerts.labels("endpoint_disabled").inc()
                state = await self._give_up(
                    conn, claim, "abandoned", "endpoint_gone", outcome, error
                )
            elif verdict.kind == "failed":
                if verdict.error_class == DUPLICATE_INVOICE:
                    reason = DUPLICATE_INVOICE
                elif outcome.status is None:  # never sent: its body cannot be opened
                    reason = str(verdict.error_class)
                else:
                    reason = f"rejected_http_{outcome.status}"
                state = await self._give_up(conn, claim, "failed", reason, outcome, error)
            else:
                disabled = False
                if verdict.breaker == "failure":
                    disabled = await self._record_failure(conn, claim, ep, verdict, now, clock_now)
                next_at = now + timedelta(
                    seconds=cfg.retry_delay(locked["attempts"], verdict.retry_after, self.rng)
                )
                horizon = locked["horizon_start"] + timedelta(seconds=cfg.max_age_seconds)
                if disabled:
                    next_at = None
                    state = await self._give_up(
                        conn, claim, "abandoned", "endpoint_disabled", outcome, error
                    )
                elif next_at > horizon:
                    next_at = None
                    state = await self._give_up(
                        conn, claim, "failed", "retries_exhausted", outcome, error
                    )
                else:
                    row = await conn.fetchrow(
                        q("delivery_retry_if_fenced"),
                        claim.id,
                        claim.fence,
                        next_at,
                        outcome.status,
                        f"{verdict.error_class}: {error}" if error else verdict.error_class,
                        outcome.latency_ms,
                    )
                    if row is None:  # pragma: no cover - locked above
                        raise LeaseLost(f"delivery {claim.id} fence {claim.fence}: retry rejected")
                    state = "retry_scheduled"
            closed = await conn.fetchval(
                q("delivery_attempt_close_if_running"),
                claim.id,
                claim.fence,
                state,
                outcome.status,
                verdict.error_class,
                error,
                outcome.latency_ms,
                signed_at,
                key_ids,
                outcome.address,
                next_at,
                clock_now,
            )
            if closed is None:
                raise LeaseLost(f"delivery {claim.id} fence {claim.fence}: attempt already closed")
        return state

    async def _give_up(
        self,
        conn: asyncpg.Connection,
        claim: Claim,
        state: str,
        reason: str,
        outcome: HttpOutcome,
        error: str | None,
    ) -> str:
        got = await conn.fetchval(
            q("delivery_give_up_if_fenced"),
            claim.id,
            claim.fence,
            state,
            reason,
            outcome.status,
            error,
            outcome.latency_ms,
        )
        if got is None:  # pragma: no cover - locked by the caller
            raise LeaseLost(f"delivery {claim.id} fence {claim.fence}: {state} rejected")
        log.warning("delivery %s %s: %s (%s)", claim.id, state, reason, error)
        return state

    async def _event(
        self, conn: asyncpg.Connection, claim: Claim, kind: str, detail: str, now: datetime | None
    ) -> None:
        await conn.execute(
            q("endpoint_event_insert"), claim.endpoint_id, claim.tenant_id, kind, detail, now
        )

    async def _record_failure(
        self,
        conn: asyncpg.Connection,
        claim: Claim,
        ep: Any,
        verdict: Verdict,
        now: datetime,
        clock_now: datetime | None,
    ) -> bool:
        """Update the failure streak and breaker; return True if the endpoint got disabled."""
        cfg = self.config
        consecutive = ep["consecutive_failures"] + 1
        auth = ep["auth_failures"] + 1 if verdict.auth else 0
        state, open_until = ep["breaker_state"], ep["breaker_open_until"]
        reason: str | None = None
        candidate = now
        if consecutive >= cfg.breaker_threshold:
            reason = f"{consecutive} consecutive failures, last {verdict.error_class}"
            candidate = now + timedelta(seconds=cfg.breaker_cooldown(consecutive))
        if verdict.retry_after is not None and verdict.error_class == "http_429":
            # The endpoint asked everyone to wait: hold all its deliveries, not just this one.
            hinted = now + timedelta(seconds=verdict.retry_after)
            if reason is None or hinted > candidate:
                reason, candidate = "HTTP 429 with Retry-After", hinted
        if reason is not None:
            if state != "open":
                await self._event(conn, claim, "breaker_opened", reason, clock_now)
                self.metrics.alerts.labels("breaker_opened").inc()
                log.warning("endpoint %s breaker opened: %s", claim.endpoint_id, reason)
            state = "open"
            open_until = max(candidate, open_until) if open_until is not None else candidate
        row = await conn.fetchrow(
            q("endpoint_record_failure"),
            claim.endpoint_id,
            consecutive,
            auth,
            state,
            open_until,
            clock_now,
        )
        if verdict.auth and auth % cfg.auth_alert_after == 0:
            await self._event(
                conn, claim, "auth_alert", f"{auth} consecutive {verdict.error}", clock_now
            )
            self.metrics.alerts.labels("auth").inc()
            log.error("endpoint %s: %d consecutive auth failures", claim.endpoint_id, auth)
        if verdict.error_class == "egress_blocked":
            await self._event(conn, claim, "egress_blocked", verdict.error or "", clock_now)
            self.metrics.alerts.labels("egress_blocked").inc()
        failing_since: datetime = row["failing_since"]
        if now - failing_since >= timedelta(seconds=cfg.disable_after_seconds):
            reason = f"failing since {failing_since.isoformat()} (last {verdict.error_class})"
            await disable_endpoint(conn, claim.endpoint_id, claim.tenant_id, reason, clock_now)
            self.metrics.alerts.labels("endpoint_disabled").inc()
            return True
        return False
