"""Admission policy (spec section 3) without Ray: budgets, refunds, cooldown, fairness.

Time is a fake monotonic clock, so every 60-second window is checked exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from pipeline.admission import (
    AdmissionConfig,
    AdmissionPolicy,
    AdmissionRequest,
    Grant,
    PriorityClass,
    UnknownGrant,
    Wait,
    WaitReason,
    attempt_capacity,
    drain_seconds,
    job_capacity,
    littles_law_concurrency,
    priority_class_for,
    reconcile,
)
from pipeline.admission.limits import kv_cache_tokens
from pipeline.admission.policy import GrantOutcome, RestoredGrant
from pipeline.admission.state import Ticket
from pipeline.errors import ReservationTooLarge
from pipeline.usage import Usage

WINDOW = 60.0


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def policy(**limits: object) -> tuple[AdmissionPolicy, FakeClock]:
    clock = FakeClock()
    cfg = AdmissionConfig(scope="test", **limits)  # type: ignore[arg-type]
    return AdmissionPolicy(cfg, clock=clock), clock


def granted(result: Grant | Wait) -> Grant:
    assert isinstance(result, Grant), result
    return result


def waiting(result: Grant | Wait, reason: WaitReason) -> Wait:
    assert isinstance(result, Wait), result
    assert result.reason is reason
    assert result.seconds > 0
    return result


# ---- property: no window, permit or cooldown is ever exceeded ---------------------


@dataclass
class Charged:
    t: float
    tenant: str
    reserved: int
    requests: int
    tokens: int
    open: bool = True
    released: float | None = None

    def end(self, now: float) -> float:
        """Until when the provider may see this call arrive: its release, or now."""
        return now if self.released is None else self.released


LIMITS = dict(
    rpm=6,
    tpm=2_000,
    max_in_flight=3,
    max_concurrent_tokens=1_400,
    tenant_max_in_flight=2,
    quantum_tokens=300,
    grant_ttl_seconds=90.0,
    cooldown_max_seconds=30.0,
)
tenants = st.sampled_from(["a", "b", "c"])
token_counts = st.integers(0, 350)
priorities = st.sampled_from(list(PriorityClass))


class AdmissionMachine(RuleBasedStateMachine):
    """Random interleavings of submits, immediate acquires, dispatches, releases,
    cancels, 429 cooldowns, expiries and clock steps against a model of the ledger."""

    queued = Bundle("queued")
    open_grants = Bundle("open_grants")

    @initialize()
    def start(self) -> None:
        self.policy, self.clock = policy(**LIMITS)
        self.cfg = self.policy.config
        self.charges: dict[str, Charged] = {}
        self.tickets: dict[int, Ticket] = {}
        self.cooldown_until = -math.inf

    def _record(self, grant: Grant) -> None:
        now = self.clock()
        assert now >= self.cooldown_until, "granted during the shared cooldown"
        assert grant.reserved_tokens == grant.prompt_tokens + grant.max_output_tokens
        self.charges[grant.grant_id] = Charged(
            now, grant.tenant, grant.reserved_tokens, 1, grant.reserved_tokens
        )

    def _collect(self) -> list[Grant]:
        """Grants any dispatch gave to queued tickets (their holders see ticket.grant)."""
        out = []
        for tid, ticket in list(self.tickets.items()):
            if ticket.grant is not None:
                out.append(ticket.grant)
                del self.tickets[tid]
        for g in out:
            self._record(g)
        return out

    @rule(target=queued, tenant=tenants, prompt=token_counts, out=token_counts, prio=priorities)
    def submit(self, tenant: str, prompt: int, out: int, prio: PriorityClass) -> int:
        ticket = self.policy.submit(AdmissionRequest(tenant, prompt, out, prio))
        self.tickets[ticket.id] = ticket
        return ticket.id

    @rule(target=open_grants)
    def dispatch(self) -> object:
        self.policy.dispatch()
        return multiple(*(g.grant_id for g in self._collect()))

    @rule(target=open_grants, tenant=tenants, prompt=token_counts, out=token_counts)
    def try_acquire(self, tenant: str, prompt: int, out: int) -> object:
        result = self.policy.try_acquire(AdmissionRequest(tenant, prompt, out))
        others = self._collect()
        if isinstance(result, Wait):
            assert result.seconds > 0
            return multiple(*(g.grant_id for g in others))
        self._record(result)
        return multiple(result.grant_id, *(g.grant_id for g in others))

    @rule(ticket_id=consumes(queued))
    def cancel(self, ticket_id: int) -> None:
        was_queued = ticket_id in self.tickets
        assert self.policy.cancel(ticket_id) == was_queued
        self.tickets.pop(ticket_id, None)

    @rule(
        grant_id=consumes(open_grants),
        mode=st.sampled_from(["usage", "uncertain", "uncertain_usage", "refused", "unattempted"]),
        data=st.data(),
    )
    def release(self, grant_id: str, mode: str, data: st.DataObject) -> None:
        entry = self.charges[grant_id]
        if not entry.open:  # expired meanwhile: a late release is refused
            with pytest.raises(UnknownGrant):
                self.policy.release(grant_id)
            return
        grant = next(g for g in self.policy.open_grants() if g.grant_id == grant_id)
        prompt = data.draw(st.integers(0, grant.prompt_tokens))
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=data.draw(st.integers(0, grant.max_output_tokens)),
            cached_tokens=data.draw(st.integers(0, prompt)),
        )
        rec = {
            "usage": lambda: self.policy.release(grant, usage),
            "uncertain": lambda: self.policy.release(grant, None, uncertain=True),
            "uncertain_usage": lambda: self.policy.release(grant, usage, uncertain=True),
            "refused": lambda: self.policy.release(grant, None),
            "unattempted": lambda: self.policy.release(grant, None, attempted=False),
        }[mode]()
        expected = {
            "usage": (GrantOutcome.RECONCILED, usage.total_tokens, 1),
            "uncertain": (GrantOutcome.UNCERTAIN, grant.reserved_tokens, 1),
            "uncertain_usage": (GrantOutcome.UNCERTAIN, grant.reserved_tokens, 1),
            "refused": (GrantOutcome.REFUNDED, 0, 1),
            "unattempted": (GrantOutcome.REFUNDED, 0, 0),
        }[mode]
        assert (rec.outcome, rec.charged_tokens, int(rec.request_charged)) == expected
        assert rec.refunded_tokens == grant.reserved_tokens - expected[1]
        entry.tokens, entry.requests, entry.open = rec.charged_tokens, expected[2], False
        entry.released = self.clock()
        with pytest.raises(UnknownGrant):  # exactly once
            self.policy.release(grant)

    @rule(hint=st.one_of(st.none(), st.floats(-5, 100), st.just(math.nan)))
    def cooldown_429(self, hint: float | None) -> None:
        remaining = self.policy.cooldown(hint)
        assert 0 < remaining
        self.cooldown_until = max(self.cooldown_until, self.clock() + remaining - 1e-9)
        if hint is not None and math.isfinite(hint) and hint >= 0:
            assert remaining >= min(max(hint, self.cfg.cooldown_min_seconds), 30.0) - 1e-9
        assert remaining <= self.cfg.cooldown_max_seconds + 1e-9

    @rule()
    def expire(self) -> None:
        for rec in self.policy.expire_overdue():
            entry = self.charges[rec.grant_id]
            assert entry.open and self.clock() - entry.t >= self.cfg.grant_ttl_seconds - 1e-6
            assert (rec.outcome, rec.charged_tokens, rec.expired) == (
                GrantOutcome.UNCERTAIN,
                entry.reserved,
                True,
            )
            entry.open = False
            entry.released = self.clock()

    @rule(seconds=st.one_of(st.floats(0, 5), st.floats(5, 70), st.sampled_from([30.0, 60.0])))
    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: bool(self.tickets))
    @rule()
    def wait_until_next_wakeup(self) -> None:
        delay = self.policy.next_wakeup()
        if delay is not None:
            self.clock.advance(delay)

    @invariant()
    def permits_never_exceeded(self) -> None:
        open_ = [c for c in self.charges.values() if c.open]
        assert len(open_) <= self.cfg.max_in_flight
        assert sum(c.reserved for c in open_) <= self.cfg.max_concurrent_tokens
        for tenant in "abc":
            assert sum(c.tenant == tenant for c in open_) <= self.cfg.tenant_max_in_flight
        snap = self.policy.snapshot()
        assert snap.in_flight == len(open_)
        assert snap.in_flight_tokens == sum(c.reserved for c in open_)

    @invariant()
    def no_sixty_second_window_over_budget(self) -> None:
        """Whenever each call reaches the provider between its grant and its release,
        no provider-side 60 s window holds more than the budget."""
        now = self.clock()
        charges = list(self.charges.values())
        starts = {c.t for c in charges} | {c.end(now) for c in charges}
        for s in starts:
            window = [c for c in charges if c.t < s + WINDOW and c.end(now) >= s]
            assert sum(c.requests for c in window) <= self.cfg.rpm
            assert sum(c.tokens for c in window) <= self.cfg.tpm

    @invariant()
    def window_accounting_matches_ledger(self) -> None:
        now = self.clock()
        live = [c for c in self.charges.values() if c.open or now - c.end(now) < WINDOW]
        snap = self.policy.snapshot()
        assert snap.window_requests == sum(c.requests for c in live)
        assert snap.window_tokens == sum(c.tokens for c in live)

    @invariant()
    def queue_matches(self) -> None:
        assert self.policy.queued == len(self.tickets)


AdmissionMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAdmissionMachine = AdmissionMachine.TestCase


# ---- reconciliation ----------------------------------------------------------------


GRANT = Grant("g", "s", "t", PriorityClass.STANDARD, 1000, 500, 1500, 0.0)


@pytest.mark.parametrize(
    ("usage", "uncertain", "attempted", "count_cached", "outcome", "charged", "slot"),
    [
        (Usage(900, 300, 400), False, True, True, GrantOutcome.RECONCILED, 1200, True),
        (Usage(900, 300, 400), False, True, False, GrantOutcome.RECONCILED, 800, True),
        (Usage(900, 300, 2000), False, True, False, GrantOutcome.RECONCILED, 300, True),
        (None, True, True, True, GrantOutcome.UNCERTAIN, 1500, True),
        (Usage(100, 0, 0), True, True, True, GrantOutcome.UNCERTAIN, 1500, True),
        (Usage(1400, 400, 0), True, True, True, GrantOutcome.UNCERTAIN, 1800, True),
        (Usage(1400, 400, 0), False, True, True, GrantOutcome.RECONCILED, 1800, True),
        (None, False, True, True, GrantOutcome.REFUNDED, 0, True),
        (None, False, False, True, GrantOutcome.REFUNDED, 0, False),
    ],
)
def test_refund_rules_differ_per_dimension(
    usage: Usage | None,
    uncertain: bool,
    attempted: bool,
    count_cached: bool,
    outcome: GrantOutcome,
    charged: int,
    slot: bool,
) -> None:
    rec = reconcile(
        GRANT, usage, uncertain=uncertain, attempted=attempted, count_cached_tokens=count_cached
    )
    assert (rec.outcome, rec.charged_tokens, rec.request_charged) == (outcome, charged, slot)
    assert rec.refunded_tokens == 1500 - charged


def test_unattempted_call_cannot_be_uncertain() -> None:
    with pytest.raises(ValueError, match="never made"):
        reconcile(GRANT, None, uncertain=True, attempted=False)


def test_reconciliation_refunds_exactly_the_unused_reservation() -> None:
    p, _ = policy(tpm=1000)
    g = granted(p.try_acquire(AdmissionRequest("a", 600, 400)))
    waiting(p.try_acquire(AdmissionRequest("a", 1, 0)), WaitReason.TPM)
    p.release(g, Usage(prompt_tokens=250, completion_tokens=50))
    granted(p.try_acquire(AdmissionRequest("a", 500, 200)))  # 300 used + 700 = 1000: fits exactly
    waiting(p.try_acquire(AdmissionRequest("a", 1, 0)), WaitReason.TPM)
    assert p.snapshot().window_tokens == 1000


def test_uncertain_attempt_stays_charged_for_the_whole_window() -> None:
    p, clock = policy(tpm=1000)
    g = granted(p.try_acquire(AdmissionRequest("a", 600, 400)))
    p.release(g, None, uncertain=True)
    w = waiting(p.try_acquire(AdmissionRequest("a", 1, 0)), WaitReason.TPM)
    assert w.seconds == pytest.approx(60.0)
    clock.advance(59.9)
    waiting(p.try_acquire(AdmissionRequest("a", 1, 0)), WaitReason.TPM)
    clock.advance(0.1)
    granted(p.try_acquire(AdmissionRequest("a", 600, 400)))


def test_request_slot_is_kept_once_attempted_and_refunded_otherwise() -> None:
    p, clock = policy(rpm=1)
    g = granted(p.try_acquire(AdmissionRequest("a", 10, 10)))
    p.release(g, None, attempted=False)  # lease lost before the call
    g = granted(p.try_acquire(AdmissionRequest("a", 10, 10)))
    p.release(g, None)  # provider refused without usage: slot stays spent
    w = waiting(p.try_acquire(AdmissionRequest("a", 10, 10)), WaitReason.RPM)
    clock.advance(w.seconds)
    granted(p.try_acquire(AdmissionRequest("a", 10, 10)))


def test_usage_above_the_reservation_is_charged_in_full() -> None:
    p, _ = policy(tpm=1000)
    g = granted(p.try_acquire(AdmissionRequest("a", 100, 100)))
    rec = p.release(g, Usage(prompt_tokens=700, completion_tokens=100))
    assert rec.charged_tokens == 800 and rec.refunded_tokens == -600
    waiting(p.try_acquire(AdmissionRequest("a", 201, 0)), WaitReason.TPM)
    granted(p.try_acquire(AdmissionRequest("a", 200, 0)))


def test_expired_grant_returns_its_permit_but_stays_charged() -> None:
    p, clock = policy(max_in_flight=1, tpm=1000, grant_ttl_seconds=120.0)
    g = granted(p.try_acquire(AdmissionRequest("a", 500, 0)))
    clock.advance(119.0)
    assert p.expire_overdue() == []
    assert p.next_wakeup() == pytest.approx(1.0)
    clock.advance(1.0)
    [rec] = p.expire_overdue()
    assert (rec.grant_id, rec.outcome, rec.charged_tokens, rec.expired) == (
        g.grant_id,
        GrantOutcome.UNCERTAIN,
        500,
        True,
    )
    assert p.snapshot().in_flight == 0
    with pytest.raises(UnknownGrant):
        p.release(g, Usage(10, 10))


def test_reservation_larger_than_any_budget_is_terminal() -> None:
    p, _ = policy(tpm=1000)
    with pytest.raises(ReservationTooLarge):
        p.try_acquire(AdmissionRequest("a", 900, 101))
    pool = AdmissionPolicy(AdmissionConfig.for_local_pool("pool", 1000))
    with pytest.raises(ReservationTooLarge):
        pool.submit(AdmissionRequest("a", 800, 101))  # 90 % headroom of 1000 = 900
    assert pool.queued == 0


# ---- cooldown ---------------------------------------------------------------------


def test_cooldown_honours_the_provider_hint_for_everyone() -> None:
    p, clock = policy(rpm=100)
    g = granted(p.try_acquire(AdmissionRequest("a", 10, 10)))
    p.release(g, None)
    assert p.cooldown(7.5) == pytest.approx(7.5)
    for tenant in ("a", "b"):
        w = waiting(p.try_acquire(AdmissionRequest(tenant, 1, 1)), WaitReason.COOLDOWN)
        assert w.seconds == pytest.approx(7.5)
    assert p.next_wakeup() is None  # nobody queued
    ticket = p.submit(AdmissionRequest("b", 1, 1))
    assert p.dispatch() == []
    assert p.next_wakeup() == pytest.approx(7.5)
    clock.advance(7.5)
    assert p.dispatch() == [ticket]
    assert p.cooldown(2.0) == pytest.approx(2.0)
    assert p.cooldown(1.0) == pytest.approx(2.0)  # a shorter hint never shortens it


def test_cooldown_without_valid_hint_backs_off_until_usage_is_reported() -> None:
    p, clock = policy(cooldown_default_seconds=5.0, cooldown_max_seconds=30.0)
    lengths = []
    for hint in (None, math.nan, -1.0, None, math.inf):
        lengths.append(p.cooldown(hint))
        clock.advance(lengths[-1])
    assert lengths == pytest.approx([5.0, 10.0, 20.0, 30.0, 30.0], abs=1e-6)
    assert p.cooldown(10**6) == pytest.approx(30.0)  # clamped hint
    clock.advance(30.0)
    p.release(
        granted(p.try_acquire(AdmissionRequest("a", 5, 5))), Usage(5, 5)
    )  # success resets the streak
    assert p.cooldown(None) == pytest.approx(5.0)
    assert p.cooldown(0.0) == pytest.approx(5.0)  # min clamp is 0.5, existing 5.0 stands


# ---- fairness ---------------------------------------------------------------------


def run_to(p: AdmissionPolicy, stop: int, *, release_oldest: bool = True) -> list[Grant]:
    """Dispatch repeatedly, releasing the oldest grant with full usage between rounds."""
    order: list[Grant] = []
    open_: list[Grant] = []
    while p.queued and len(order) < stop:
        for t in p.dispatch():
            assert t.grant is not None
            order.append(t.grant)
            open_.append(t.grant)
        if release_oldest and open_:
            g = open_.pop(0)
            p.release(g, Usage(g.prompt_tokens, g.max_output_tokens))
    return order


def test_single_job_of_b_is_not_stuck_behind_a_thousand_of_a() -> None:
    p, _ = policy(max_in_flight=4, quantum_tokens=4096)
    for _ in range(1000):
        p.submit(AdmissionRequest("A", 600, 400))
    p.submit(AdmissionRequest("B", 600, 400))
    order = run_to(p, 1001)
    position = next(i for i, g in enumerate(order) if g.tenant == "B")
    assert position < 100
    # DRR bound: at most A's in-flight grants plus one quantum of A's before B's turn.
    assert position <= 4 + 4096 // 1000 + 1


@given(
    weights=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=2, max_size=3),
    costs=st.lists(st.integers(1, 2000), min_size=1, max_size=8),
)
@settings(max_examples=40, deadline=None)
def test_backlogged_tenants_share_tokens_in_proportion_to_weight(
    weights: list[float], costs: list[int]
) -> None:
    names = [f"t{i}" for i in range(len(weights))]
    p, _ = policy(
        max_in_flight=1, quantum_tokens=1000, tenant_weights=dict(zip(names, weights, strict=True))
    )
    for name in names:
        for i in range(400):
            p.submit(AdmissionRequest(name, costs[i % len(costs)], 0))
    served = dict.fromkeys(names, 0)
    for g in run_to(p, 150):
        served[g.tenant] += g.reserved_tokens
    rounds = [served[n] / (1000 * w) for n, w in zip(names, weights, strict=True)]
    slack = max(costs) / (1000 * min(weights))
    assert max(rounds) - min(rounds) <= 2 + 2 * slack


def test_priority_classes_weight_the_share_without_starving_batch() -> None:
    p, _ = policy(max_in_flight=1, quantum_tokens=1000)
    for _ in range(200):
        p.submit(AdmissionRequest("a", 500, 0, PriorityClass.BATCH))
        p.submit(AdmissionRequest("a", 500, 0, PriorityClass.INTERACTIVE))
    order = run_to(p, 100)
    interactive = sum(g.priority is PriorityClass.INTERACTIVE for g in order)
    batch = sum(g.priority is PriorityClass.BATCH for g in order)
    assert batch > 0
    assert 14 <= interactive / batch <= 18  # weights 4 : 0.25
    assert [priority_class_for(n) for n in (5, 0, -3)] == [
        PriorityClass.INTERACTIVE,
        PriorityClass.STANDARD,
        PriorityClass.BATCH,
    ]


def test_tenant_in_flight_limit_lets_other_tenants_through() -> None:
    p, _ = policy(max_in_flight=5, tenant_max_in_flight=1, tenant_in_flight={"big": 2})
    a = [p.submit(AdmissionRequest("a", 10, 10)) for _ in range(5)]
    big = [p.submit(AdmissionRequest("big", 10, 10)) for _ in range(5)]
    b = p.submit(AdmissionRequest("b", 10, 10))
    granted_now = p.dispatch()
    assert granted_now == [a[0], big[0], big[1], b]  # round-robin order, limits per tenant
    assert p.wait_hint(a[1].id).reason is WaitReason.TENANT_IN_FLIGHT
    assert p.next_wakeup() == pytest.approx(120.0)  # only the grant TTL: no busy retry
    granted(p.try_acquire(AdmissionRequest("c", 10, 10)))
    waiting(p.try_acquire(AdmissionRequest("d", 10, 10)), WaitReason.IN_FLIGHT)


# ---- local pools and restarts ------------------------------------------------------


def test_local_pool_budgets_concurrent_tokens_not_requests() -> None:
    cfg = AdmissionConfig.for_local_pool("cpu-short", kv_cache_tokens(625, 16), headroom=0.8)
    assert cfg.max_concurrent_tokens == 8000 and cfg.rpm is None and cfg.tpm is None
    clock = FakeClock()
    p = AdmissionPolicy(cfg, clock=clock)
    big = granted(p.try_acquire(AdmissionRequest("a", 3500, 500)))
    granted(p.try_acquire(AdmissionRequest("b", 3500, 500)))
    waiting(p.try_acquire(AdmissionRequest("c", 100, 10)), WaitReason.CONCURRENT_TOKENS)
    small = [
        granted(p.try_acquire(AdmissionRequest("c", 0, 0))) for _ in range(20)
    ]  # no request-count limit
    assert len(small) == 20
    ticket = p.submit(AdmissionRequest("c", 2000, 100))
    assert p.dispatch() == []
    assert p.next_wakeup() == pytest.approx(120.0)  # TTL only: a release wakes it, not a poll
    p.release(big, Usage(3500, 120))
    assert p.dispatch() == [ticket]


def test_restore_rebuilds_the_window_and_open_grants_after_restart() -> None:
    p, clock = policy(rpm=3, tpm=3000, max_in_flight=2)
    g1 = granted(p.try_acquire(AdmissionRequest("a", 500, 500)))
    clock.advance(10)
    g2 = granted(p.try_acquire(AdmissionRequest("b", 400, 100)))
    p.release(g1, None, uncertain=True)
    clock.advance(5)
    rows = [
        RestoredGrant(
            g1.grant_id, "a", g1.priority, 1000, 15.0, GrantOutcome.UNCERTAIN, 1000, True
        ),
        RestoredGrant(g2.grant_id, "b", g2.priority, 500, 5.0, GrantOutcome.GRANTED, None, True),
        RestoredGrant("old", "c", g2.priority, 999, 61.0, GrantOutcome.RECONCILED, 999, True),
    ]
    fresh = AdmissionPolicy(p.config, clock=clock)
    assert fresh.restore(rows) == 2
    before, after = p.snapshot(), fresh.snapshot()
    assert (after.window_requests, after.window_tokens, after.in_flight) == (
        before.window_requests,
        before.window_tokens,
        before.in_flight,
    )
    rec = fresh.release(g2.grant_id, Usage(100, 50))
    assert rec.charged_tokens == 150
    granted(fresh.try_acquire(AdmissionRequest("c", 1000, 0)))
    waiting(fresh.try_acquire(AdmissionRequest("c", 1, 0)), WaitReason.RPM)
    clock.advance(45.0)  # g1's slot (age 60 now) leaves the window
    granted(fresh.try_acquire(AdmissionRequest("c", 1, 0)))


# ---- capacity planning (the spec's worked numbers) ----------------------------------


def test_capacity_formulas_reproduce_the_spec_example() -> None:
    attempts = attempt_capacity(
        rpm=600, tpm=600_000, reserved_tokens=6_000, concurrency=30, mean_service_seconds=15
    )
    assert attempts == pytest.approx(1.6667, abs=1e-4)
    jobs = job_capacity(attempts, 1.10)
    assert jobs == pytest.approx(1.5152, abs=1e-4)
    assert drain_seconds(10_000, jobs) == pytest.approx(6_600, abs=0.5)
    assert drain_seconds(10_000, jobs, arrival_rate=1.0) == pytest.approx(19_412, abs=1)
    assert drain_seconds(10_000, jobs, arrival_rate=2.0) == math.inf
    assert littles_law_concurrency(20, 15) == 300
    # The tightest dimension binds: RPM here.
    assert attempt_capacity(
        rpm=60, tpm=10**9, reserved_tokens=1, concurrency=100, mean_service_seconds=1
    ) == pytest.approx(1.0)


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        AdmissionConfig(scope="x", rpm=0)
    with pytest.raises(ValueError):
        AdmissionConfig(scope="x", tenant_weights={"a": 0.0})
    with pytest.raises(ValueError):
        AdmissionConfig(scope="x", tenant_in_flight={"a": 0})
    with pytest.raises(ValueError):
        AdmissionConfig.for_local_pool("x", 1000, headroom=1.5)
