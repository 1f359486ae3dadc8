"""The seeded fault schedule of a chaos run: which fault, when, for how long, against whom.

Same seed, same schedule (a :class:`random.Random` seeded from the seed alone).
Faults come one after another with a gap between them, so each one's
recovery can be measured on its own; their order is shuffled by the seed.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class FaultKind(StrEnum):
    #: SIGKILL a driver process while it has provider calls in flight.
    DRIVER_KILL_MID_CALL = "driver_kill_mid_call"
    #: SIGKILL a driver right after the provider answered, before the commit (crash point).
    DRIVER_KILL_AFTER_ANSWER = "driver_kill_after_answer"
    #: SIGSTOP a driver right after the provider answered, before the commit, until its
    #: lease expired and another driver took the job (fence + 1); then SIGCONT: the
    #: stale writer comes back with its result, which the fence must refuse.
    DRIVER_STALL_PAST_LEASE = "driver_stall_past_lease"
    #: SIGKILL the delivery actor after the ERP answered, before the outcome commits.
    DELIVERY_KILL_MID_POST = "delivery_kill_mid_post"
    #: SIGKILL the maintenance actor (relay) after the broker confirmed, before published_at.
    RELAY_KILL_AFTER_CONFIRM = "relay_kill_after_confirm"
    #: Cut every AMQP link through the TCP proxy, refuse new ones for a while.
    AMQP_CUT = "amqp_cut"
    #: ``rabbitmqctl stop_app`` / ``start_app`` (long variant: the broker is shared).
    RABBITMQ_RESTART = "rabbitmq_restart"
    #: ``pg_terminate_backend`` on every connection of the drivers and the maintenance actor.
    PG_TERMINATE = "pg_terminate"
    #: Stop the PostgreSQL server, keep it down for a while, start it (long variant only,
    #: ``--pg-restart``: every user of the server sees it go down).
    PG_RESTART = "pg_restart"
    #: The ERP answers 503 for a while, then 500 after committing (acknowledgement lost).
    ERP_DOWN_THEN_500 = "erp_down_then_500"
    #: The provider answers 429 with Retry-After to every call for a while.
    PROVIDER_429_STORM = "provider_429_storm"
    #: The provider answers slower than the attempt timeout for a while.
    PROVIDER_SLOW = "provider_slow"
    #: Half the provider's answers are malformed for a while.
    PROVIDER_MALFORMED = "provider_malformed"


#: Kinds that stop a shared server (the broker, PostgreSQL): only on an explicit flag.
SHARED_SERVER_KINDS = frozenset({FaultKind.RABBITMQ_RESTART, FaultKind.PG_RESTART})
#: The CI schedule: every kind except the real server restarts (other tests share them).
CI_KINDS: tuple[FaultKind, ...] = tuple(k for k in FaultKind if k not in SHARED_SERVER_KINDS)
ALL_KINDS: tuple[FaultKind, ...] = tuple(FaultKind)
#: Kinds done through the fake provider's fault API (none on a real engine).
PROVIDER_KINDS = frozenset(
    {FaultKind.PROVIDER_429_STORM, FaultKind.PROVIDER_SLOW, FaultKind.PROVIDER_MALFORMED}
)


def kinds_for(
    *, rabbitmq_restart: bool = False, pg_restart: bool = False, fake_provider: bool = True
) -> tuple[FaultKind, ...]:
    """The kinds of a run: the CI ones, plus each server restart its flag allows;
    without the fake provider (a real engine) the provider faults cannot be done."""
    extra = {FaultKind.RABBITMQ_RESTART} if rabbitmq_restart else set()
    extra |= {FaultKind.PG_RESTART} if pg_restart else set()
    return tuple(
        k
        for k in FaultKind
        if (k not in SHARED_SERVER_KINDS or k in extra)
        and (fake_provider or k not in PROVIDER_KINDS)
    )


#: Kinds whose effect is an instant (a kill, a terminate); the others last ``duration``.
INSTANT = frozenset(
    {
        FaultKind.DRIVER_KILL_MID_CALL,
        FaultKind.DRIVER_KILL_AFTER_ANSWER,
        FaultKind.DRIVER_STALL_PAST_LEASE,
        FaultKind.DELIVERY_KILL_MID_POST,
        FaultKind.RELAY_KILL_AFTER_CONFIRM,
        FaultKind.PG_TERMINATE,
    }
)

#: Kinds done at most once per run.
ONCE = frozenset({FaultKind.RABBITMQ_RESTART, FaultKind.PG_RESTART})


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: ``at`` seconds after the run started."""

    at: float
    kind: FaultKind
    duration: float
    #: Which driver (index) a driver fault hits.
    target: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind)}


def fault_schedule(
    seed: int,
    kinds: tuple[FaultKind, ...],
    *,
    rounds: int = 1,
    start_s: float = 5.0,
    gap_s: float = 4.0,
    duration_s: float = 4.0,
    drivers: int = 2,
) -> list[Fault]:
    """Every kind ``rounds`` times, in a seeded order, one after another.

    Args:
        seed: the run's seed; the same seed gives the same schedule.
        kinds: the fault kinds to draw from (each appears ``rounds`` times, but
            :data:`ONCE` kinds once).
        start_s: seconds of undisturbed load before the first fault.
        gap_s: mean quiet time after each fault (drawn in [gap/2, 3·gap/2]).
        duration_s: mean length of a lasting fault (drawn in [d/2, 3·d/2]).
        drivers: how many drivers a driver fault may hit.
    """
    rng = random.Random(f"chaos-schedule:{seed}")
    # A real server restart is done once whatever the rounds: the servers are shared.
    order = [k for k in kinds for r in range(rounds) if r == 0 or k not in ONCE]
    rng.shuffle(order)
    out, t = [], start_s
    for kind in order:
        duration = 0.0 if kind in INSTANT else rng.uniform(duration_s / 2, duration_s * 1.5)
        out.append(Fault(round(t, 2), kind, round(duration, 2), rng.randrange(drivers)))
        t += duration + rng.uniform(gap_s / 2, gap_s * 1.5)
    return out


def span(faults: list[Fault]) -> float:
    """Seconds from the run's start to the end of the last fault."""
    return max((f.at + f.duration for f in faults), default=0.0)
