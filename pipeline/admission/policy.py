"""Admission policy (spec section 3): one atomic grant of request budget, token
reservation and in-flight permit, shared by every driver of one scope.

A *scope* is what the provider (or the GPU) actually limits: a provider project
or a local engine pool, never a pod — three pods with independent semaphores of
30 make a ceiling of 90. One :class:`AdmissionPolicy` per scope holds the state;
``cluster.admission.AdmissionActor`` makes it one named Ray actor. This module
is pure: no Ray, no I/O, time from an injected monotonic clock.

Invariants a grant keeps (checked by the property tests):

* **Atomic acquire.** A grant takes a request slot, a token reservation
  (estimated prompt + max output tokens) and an in-flight permit together, or
  nothing. With ``rpm``/``tpm`` set, the grants of any 60-second window hold at
  most ``rpm`` request slots and at most ``tpm`` *charged* tokens (with ``tpd``,
  those of any day at most ``tpd``); in-flight
  grants never exceed ``max_in_flight``, ``max_concurrent_tokens`` (local vLLM:
  KV-cache headroom in tokens, since an 80,000-token context and a short
  document are not the same load) or a tenant's in-flight limit.
* **Refunds differ per dimension** (:func:`reconcile`): the permit always
  returns; the request slot is never refunded once the call was attempted; the
  token charge is reconciled to reported usage, stays fully charged when the
  outcome is uncertain (a timeout may have been billed), and is refunded when
  the provider definitely refused without usage (e.g. 429).
* **Shared cooldown.** After a 429 nobody is granted until the cooldown ends;
  a valid provider delay hint sets its length.
* **Fairness.** Waiters queue per (tenant, priority class) flow and are served
  by deficit round robin in tokens (:mod:`pipeline.admission.fair_queue`): each
  visit adds ``quantum_tokens × tenant weight × class weight`` to the flow's
  deficit, and a request is granted when its reservation fits the deficit. A
  tenant with 10,000 queued requests gets one quantum per round, so another
  tenant's single request waits at most one round. Priority classes are
  weights, not strict precedence, so batch work cannot starve. Global limits
  block at the head of the round (no bypass by smaller requests), so large
  requests are not starved either.
* **Crashed holders.** A grant not released within ``grant_ttl_seconds``
  expires (permit back, tokens charged as uncertain); a restarted driver's dead
  run's grants expire sooner (:meth:`AdmissionPolicy.abandon`).
"""

from __future__ import annotations

import math
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace

from pipeline.admission.fair_queue import FairQueue
from pipeline.admission.gate import AdmissionRequest
from pipeline.admission.grants import (
    Grant,
    GrantOutcome,
    PriorityClass,
    Reconciliation,
    RestoredGrant,
    UnknownGrant,
    Wait,
    WaitReason,
    reconcile,
)
from pipeline.admission.limits import AdmissionConfig
from pipeline.admission.state import AdmissionSnapshot, Charge, OpenGrant, Ticket
from pipeline.admission.window import ChargeWindow, Dimension
from pipeline.errors import ReservationTooLarge
from pipeline.usage import ReportedUsage

#: Added to computed waits so a caller that sleeps exactly that long is admitted.
_EPSILON = 1e-6


class AdmissionPolicy:
    """The admission state of one scope; see the module docstring for invariants.

    Not thread-safe: one owner (an actor's event loop) calls it.
    """

    def __init__(
        self,
        config: AdmissionConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.config = config
        self._clock = clock
        self._new_id = new_id
        self._window = ChargeWindow(config.window_seconds)
        #: The TPD window: each grant's charge again, kept a day after it settled.
        self._day = ChargeWindow(config.day_seconds)
        self._open: dict[str, OpenGrant] = {}
        self._open_tokens = 0
        self._tenant_open: Counter[str] = Counter()
        self._cooldown_until = -math.inf
        self._streak = 0
        self._queue = FairQueue(lambda tenant, cls: self.config.quantum(tenant, cls))
        self._granted_total = 0
        self._expired_total = 0
        self._cooldowns_total = 0
        self._refunded_total = 0

    # ---- acquiring -------------------------------------------------------------

    def submit(self, request: AdmissionRequest) -> Ticket:
        """Queue a request in its tenant's flow; :meth:`dispatch` grants it.

        Raises:
            ReservationTooLarge: the reservation exceeds TPM or the concurrent-token
                budget, so it could never be granted.
        """
        if request.prompt_tokens < 0 or request.max_output_tokens < 0 or request.backlog < 0:
            raise ValueError("token counts and backlog must be non-negative")
        tenant, cls = request.tenant, PriorityClass(request.priority)
        ticket = Ticket(
            self._queue.next_id, tenant, cls, int(request.prompt_tokens),
            int(request.max_output_tokens), self._clock(), request.job_id, request.fence,
            holder=request.holder, holder_run=request.holder_run, backlog=int(request.backlog),
        )  # fmt: skip
        for limit, name in (
            (self.config.tpm, "TPM"),
            (self.config.tpd, "TPD"),
            (self.config.max_concurrent_tokens, "concurrent-token budget"),
        ):
            if limit is not None and ticket.cost > limit:
                raise ReservationTooLarge(
                    f"reservation of {ticket.cost} tokens exceeds the {name} of "
                    f"{limit} in scope {self.config.scope}"
                )
        self._queue.push(ticket)
        return ticket

    def cancel(self, ticket_id: int) -> bool:
        """Withdraw a queued request; False if it was granted or is unknown."""
        return self._queue.cancel(ticket_id)

    def dispatch(self) -> list[Ticket]:
        """Grant queued requests in deficit-round-robin order while all limits allow.

        Returns the tickets granted by this call (each with ``grant`` set).
        """
        now = self._clock()
        granted: list[Ticket] = []

        def blocked(cost: int) -> bool:
            return self._global_block(cost, now) is not None

        for ticket in self._queue.serve(self._tenant_full, blocked):
            ticket.grant = self._grant(ticket, now)
            granted.append(ticket)
        return granted

    def try_acquire(self, request: AdmissionRequest) -> Grant | Wait:
        """Acquire now or say why not: :meth:`submit` + :meth:`dispatch`, withdrawn
        if not granted. Fair: it is served in its DRR turn like any waiter (a
        dispatch may also grant queued tickets; their holders see ``ticket.grant``).
        """
        ticket = self.submit(request)
        self.dispatch()
        if ticket.grant is not None:
            return ticket.grant
        wait = self.wait_hint(ticket.id)
        self.cancel(ticket.id)
        return wait

    def wait_hint(self, ticket_id: int) -> Wait:
        """Why queued ticket ``ticket_id`` is not granted, and a retry delay."""
        ticket = self._queue.get(ticket_id)
        if ticket is None:
            raise KeyError(ticket_id)
        if self._tenant_full(ticket.tenant):
            return Wait(self.config.recheck_seconds, WaitReason.TENANT_IN_FLIGHT)
        block = self._global_block(ticket.cost, self._clock())
        if block is not None:
            return Wait(block[1], block[0])
        return Wait(self.config.recheck_seconds, WaitReason.FAIR_SHARE)

    def next_wakeup(self) -> float | None:
        """Seconds until time alone may unblock a waiter or expire a grant.

        None when only a release or cooldown change can help (event-driven).
        """
        now = self._clock()
        candidates: list[float] = []
        deadlines = [o.deadline for o in self._open.values() if o.deadline is not None]
        if deadlines:
            candidates.append(max(0.0, min(deadlines) - now))
        for head in self._queue.heads():
            if self._tenant_full(head.tenant):
                continue
            block = self._global_block(head.cost, now)
            if block is None:
                candidates.append(0.0)
            elif block[0] in (WaitReason.COOLDOWN, WaitReason.RPM, WaitReason.TPM):
                candidates.append(block[1])
            break
        return min(candidates) if candidates else None

    # ---- settling --------------------------------------------------------------

    def release(
        self,
        grant: Grant | str,
        usage: ReportedUsage | None = None,
        *,
        uncertain: bool = False,
        attempted: bool = True,
    ) -> Reconciliation:
        """Settle an open grant by the rules of :func:`reconcile`.

        Raises:
            UnknownGrant: the grant is not open here (settled twice, expired, or
                from another incarnation without a restored ledger).
        """
        grant_id = grant if isinstance(grant, str) else grant.grant_id
        rec = self.pending_release(grant_id, usage, uncertain=uncertain, attempted=attempted)
        if rec is None:
            raise UnknownGrant(grant_id)
        self._settle(self._open.pop(grant_id), rec)
        if rec.outcome is GrantOutcome.RECONCILED:
            self._streak = 0
        return rec

    def pending_release(
        self,
        grant_id: str,
        usage: ReportedUsage | None = None,
        *,
        uncertain: bool = False,
        attempted: bool = True,
    ) -> Reconciliation | None:
        """What :meth:`release` would settle, without settling; None if not open here.

        The actor records this in the ledger *before* it frees the budget, so a
        grant's ledger interval lies within the time the policy held it.
        """
        entry = self._open.get(grant_id)
        if entry is None:
            return None
        return reconcile(
            entry.grant,
            usage,
            uncertain=uncertain,
            attempted=attempted,
            count_cached_tokens=self.config.count_cached_tokens,
        )

    def abandon(self, holder: str, current_run: str, call_bound_seconds: float) -> int:
        """Bring forward the expiry of ``holder``'s grants from runs other than ``current_run``.

        A restarted driver calls this: its earlier run is gone and would hold its
        permits until ``grant_ttl_seconds``. Each such grant now expires (uncertain,
        fully charged) at ``granted_at + call_bound_seconds`` (the attempt timeout),
        or at once if that has passed: no later than a live holder that timed out
        would have released it. Returns how many grants were brought forward.
        """
        now = self._clock()
        moved = 0
        for entry in self._open.values():
            g = entry.grant
            if g.holder != holder or g.holder_run == current_run:
                continue
            due = max(now, g.granted_at + call_bound_seconds)
            if entry.deadline is None or due < entry.deadline:
                entry.deadline = due
                moved += 1
        return moved

    def expire_overdue(self) -> list[Reconciliation]:
        """Expire grants held past ``grant_ttl_seconds``: permit back, fully charged."""
        now = self._clock()
        overdue = [
            gid for gid, o in self._open.items() if o.deadline is not None and o.deadline <= now
        ]
        out = []
        for gid in overdue:
            entry = self._open.pop(gid)
            rec = reconcile(entry.grant, None, uncertain=True)
            rec = replace(rec, expired=True)
            self._settle(entry, rec)
            self._expired_total += 1
            out.append(rec)
        return out

    def cooldown(self, seconds: float | None = None) -> float:
        """Start (or extend) the shared cooldown after a 429; returns its remaining length.

        A valid provider hint (finite, >= 0) is honoured, clamped to
        [cooldown_min_seconds, cooldown_max_seconds]; without one the default
        doubles per consecutive 429 until a call reports usage again.
        """
        now = self._clock()
        self._streak += 1
        self._cooldowns_total += 1
        cfg = self.config
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            length = min(max(seconds, cfg.cooldown_min_seconds), cfg.cooldown_max_seconds)
        else:
            length = min(
                cfg.cooldown_default_seconds * 2 ** (self._streak - 1), cfg.cooldown_max_seconds
            )
        self._cooldown_until = max(self._cooldown_until, now + length)
        return self._cooldown_until - now

    def restore(self, records: Iterable[RestoredGrant]) -> int:
        """Replay ledger rows of the last window after a restart; returns rows used.

        Settled rows re-enter the window with their charge; open rows become
        in-flight grants again (fully charged) so their drivers can still release
        them, and expire on the usual TTL if they never do.
        """
        now = self._clock()
        used = 0
        charges = list(self._window.charges)
        days = list(self._day.charges)
        tpd = self.config.tpd is not None
        for r in records:
            is_open = r.outcome is GrantOutcome.GRANTED
            in_minute = is_open or r.age_seconds < self.config.window_seconds
            in_day = tpd and (is_open or r.age_seconds < self.config.day_seconds)
            if r.grant_id in self._open or not (in_minute or in_day):
                continue
            t = now - r.age_seconds
            tokens = r.reserved_tokens if is_open else int(r.charged_tokens or 0)
            requests = 1 if r.request_charged else 0
            charge = Charge(t, requests, tokens, settled=not is_open)
            day = Charge(t, requests, tokens, settled=not is_open) if in_day else None
            if in_minute:
                charges.append(charge)
            if day is not None:
                days.append(day)
            if is_open:
                grant = Grant(
                    r.grant_id, self.config.scope, r.tenant, r.priority, r.reserved_tokens, 0,
                    r.reserved_tokens, t, job_id=r.job_id, fence=r.fence,
                )  # fmt: skip
                self._add_open(grant, charge, day)
            used += 1
        self._window.replace(charges)
        self._window.prune(now)
        self._day.replace(days)
        self._day.prune(now)
        return used

    def resize(self, max_in_flight: int) -> None:
        """Change ``max_in_flight`` (a pool whose replicas scale): waiters are served
        against the new budget on the next dispatch; open grants are kept."""
        if max_in_flight <= 0:
            raise ValueError("max_in_flight must be positive")
        self.config = self.config.model_copy(update={"max_in_flight": max_in_flight})

    # ---- reading ---------------------------------------------------------------

    def snapshot(self) -> AdmissionSnapshot:
        now = self._clock()
        self._window.prune(now)
        self._day.prune(now)
        return AdmissionSnapshot(
            scope=self.config.scope,
            in_flight=len(self._open),
            in_flight_tokens=self._open_tokens,
            tenant_in_flight={k: v for k, v in self._tenant_open.items() if v},
            queued=self._queue.by_tenant(),
            window_requests=self._window.requests,
            window_tokens=self._window.tokens,
            cooldown_remaining=max(0.0, self._cooldown_until - now),
            granted_total=self._granted_total,
            expired_total=self._expired_total,
            cooldowns_total=self._cooldowns_total,
            refunded_tokens_total=self._refunded_total,
            limits=self.config.model_dump(mode="json"),
            queued_backlog=self._queue.backlog(),
            day_tokens=self._day.tokens,
        )

    def open_grants(self) -> list[Grant]:
        return [o.grant for o in self._open.values()]

    @property
    def queued(self) -> int:
        return len(self._queue)

    # ---- internals -------------------------------------------------------------

    def _tenant_full(self, tenant: str) -> bool:
        limit = self.config.tenant_limit(tenant)
        return limit is not None and self._tenant_open[tenant] >= limit

    def _global_block(self, cost: int, now: float) -> tuple[WaitReason, float] | None:
        cfg = self.config
        if now < self._cooldown_until:
            return WaitReason.COOLDOWN, self._cooldown_until - now + _EPSILON
        if cfg.max_in_flight is not None and len(self._open) >= cfg.max_in_flight:
            return WaitReason.IN_FLIGHT, cfg.recheck_seconds
        if cfg.max_concurrent_tokens is not None and (
            self._open_tokens + cost > cfg.max_concurrent_tokens
        ):
            return WaitReason.CONCURRENT_TOKENS, cfg.recheck_seconds
        window = self._window
        window.prune(now)
        if cfg.rpm is not None and window.requests + 1 > cfg.rpm:
            need = window.requests + 1 - cfg.rpm
            return WaitReason.RPM, self._eta(now, need, "requests")
        if cfg.tpm is not None and window.tokens + cost > cfg.tpm:
            return WaitReason.TPM, self._eta(now, window.tokens + cost - cfg.tpm, "tokens")
        if cfg.tpd is not None:
            self._day.prune(now)
            if self._day.tokens + cost > cfg.tpd:
                need = self._day.tokens + cost - cfg.tpd
                return WaitReason.TPD, self._eta(now, need, "tokens", self._day)
        return None

    def _eta(
        self, now: float, need: int, dimension: Dimension, window: ChargeWindow | None = None
    ) -> float:
        """Seconds until charges worth ``need`` of ``dimension`` leave ``window``
        (the 60 s one unless given)."""
        eta = (window or self._window).eta(now, need, dimension, fallback=-1.0)
        return self.config.recheck_seconds if eta < 0 else eta + _EPSILON

    def _grant(self, ticket: Ticket, now: float) -> Grant:
        grant = Grant(
            grant_id=self._new_id(),
            scope=self.config.scope,
            tenant=ticket.tenant,
            priority=ticket.priority,
            prompt_tokens=ticket.prompt_tokens,
            max_output_tokens=ticket.max_output_tokens,
            reserved_tokens=ticket.cost,
            granted_at=now,
            waited_seconds=max(0.0, now - ticket.submitted_at),
            job_id=ticket.job_id,
            fence=ticket.fence,
            holder=ticket.holder,
            holder_run=ticket.holder_run,
        )
        charge = Charge(now, 1, ticket.cost)
        self._window.add(charge)
        day = None
        if self.config.tpd is not None:
            day = Charge(now, 1, ticket.cost)
            self._day.add(day)
        self._add_open(grant, charge, day)
        self._granted_total += 1
        return grant

    def _add_open(self, grant: Grant, charge: Charge, day: Charge | None = None) -> None:
        ttl = self.config.grant_ttl_seconds
        deadline = grant.granted_at + ttl if ttl is not None else None
        self._open[grant.grant_id] = OpenGrant(grant, charge, deadline, day)
        self._open_tokens += grant.reserved_tokens
        self._tenant_open[grant.tenant] += 1

    def _settle(self, entry: OpenGrant, rec: Reconciliation) -> None:
        """Return the permit and rewrite the window charge to the settled amount."""
        self._open_tokens -= entry.grant.reserved_tokens
        self._tenant_open[entry.grant.tenant] -= 1
        requests = 1 if rec.request_charged else 0
        # In the window until ``window_seconds`` after the release (see ChargeWindow).
        now = self._clock()
        self._window.settle(entry.charge, now, requests, rec.charged_tokens)
        if entry.day_charge is not None:
            self._day.settle(entry.day_charge, now, requests, rec.charged_tokens)
        self._refunded_total += rec.refunded_tokens
