"""Named points in the protocol where a fault harness may crash this process.

The chaos scenario (``benchmarks/chaos``) needs a process to die at an exact
boundary that no outside signal can hit reliably: right after the provider
answered and before the attempt commits, after the broker confirmed and before
``published_at`` is written, after the ERP answered and before the delivery's
outcome commits. Each such place calls :func:`reached` with its point name.

Disarmed (always, unless a harness armed it) :func:`reached` returns at once.
Only the cluster actors arm points, and only when ``Settings.fault_injection``
is on (off by default; the chaos scenario turns it on). An armed point kills
this process with SIGKILL the next time it is reached, as a crash would: no
``finally`` runs, no connection closes cleanly. Armed with ``action="stop"`` it
instead disarms itself and stops the process with SIGSTOP, as a long GC pause or
a frozen VM would: the process resumes where it was when the harness sends
SIGCONT (the chaos scenario's stale writer: its lease expires meanwhile, and
what it writes afterwards must be refused by the fence).
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

#: After the engine answered, before the attempt's outcome commits (``pipeline.worker``).
ATTEMPT_ANSWERED = "attempt.answered"
#: After the broker confirmed a publish, before ``published_at`` (``pipeline.messaging``).
RELAY_CONFIRMED = "relay.confirmed"
#: After the endpoint answered a delivery, before its outcome commits (``pipeline.delivery``).
DELIVERY_ANSWERED = "delivery.answered"
POINTS = frozenset({ATTEMPT_ANSWERED, RELAY_CONFIRMED, DELIVERY_ANSWERED})
#: What an armed point does: SIGKILL the process, or SIGSTOP it (once).
KILL = "kill"
STOP = "stop"
ACTIONS = frozenset({KILL, STOP})

_armed: dict[str, str] = {}


def arm(point: str, *, enabled: bool, action: str = KILL) -> None:
    """Crash (``kill``) or pause (``stop``) this process the next time ``point`` is reached.

    Args:
        point: one of :data:`POINTS`.
        enabled: ``Settings.fault_injection`` of the caller.
        action: one of :data:`ACTIONS`.

    Raises:
        PermissionError: fault injection is not enabled.
        ValueError: ``point`` is not one of :data:`POINTS`, or ``action`` not of :data:`ACTIONS`.
    """
    if not enabled:
        raise PermissionError("fault injection is off (Settings.fault_injection)")
    if point not in POINTS:
        raise ValueError(f"unknown checkpoint {point!r}; known: {sorted(POINTS)}")
    if action not in ACTIONS:
        raise ValueError(f"unknown checkpoint action {action!r}; known: {sorted(ACTIONS)}")
    _armed[point] = action


def disarm() -> None:
    _armed.clear()


def reached(point: str) -> None:
    """SIGKILL (or SIGSTOP, once) this process if ``point`` is armed; otherwise nothing."""
    action = _armed.get(point)
    if action is None:
        return
    if action == STOP:
        del _armed[point]  # resumed, the process carries on as if nothing happened
        log.warning("checkpoint %s armed: stopping process %d", point, os.getpid())
        os.kill(os.getpid(), signal.SIGSTOP)
        log.warning("checkpoint %s: process %d resumed", point, os.getpid())
        return
    log.warning("checkpoint %s armed: killing process %d", point, os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)
