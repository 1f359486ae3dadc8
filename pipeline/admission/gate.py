"""The admission seam: what an attempt asks for, the gate it asks, and how it waits.

Every admission layer speaks this one shape. An :class:`AdmissionRequest` names
the tenant, the token reservation (estimated prompt + ``max_tokens``), the
priority class and the attempt (job, fence, holder); a gate answers it with a
:class:`~pipeline.admission.grants.Grant` or a :class:`~pipeline.admission.grants.Wait`
*value*. The actor in ``cluster/``, the client that reaches it, the driver's
gate over the client and the gate that routes by engine scope each take an
:class:`AdmissionRequest` and compose through :class:`AdmissionGate`.

A ``Wait`` is not an error: the caller decides what it means (keep the lease and
ask again, fail closed, report it), and :func:`acquire_within` is the one loop
that asks again after each wait hint until time runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pipeline.admission.grants import Grant, PriorityClass, Reconciliation, Wait
from pipeline.usage import AttemptUsage, ReportedUsage, Usage
from pipeline.waiting import wait_within


@dataclass(frozen=True)
class AdmissionRequest:
    """One attempt's ask: a request slot, a token reservation and a permit at once.

    ``priority`` is decided in ``pipeline`` (:func:`~pipeline.admission.grants.priority_class_for`
    of the job's priority); ``holder``/``holder_run`` name the driver and its
    process run, so a restarted driver can abandon what its dead run held.
    ``backlog`` counts the asks of the same kind the asker already holds behind this
    one (a document's further pages): the scope reports it to scaling and never
    charges it, so a long document alone shows the demand it brings.
    """

    tenant: str
    prompt_tokens: int
    max_output_tokens: int
    priority: PriorityClass = PriorityClass.STANDARD
    job_id: str | None = None
    fence: int | None = None
    holder: str | None = None
    holder_run: str | None = None
    backlog: int = 0
    #: The pool the job's ``model_policy`` names: a gate per pool asks that pool's
    #: scope (None: the pool the context-length rule picks).
    pool: str | None = None

    @property
    def reserved_tokens(self) -> int:
        """The token reservation: estimated prompt plus the output cap."""
        return self.prompt_tokens + self.max_output_tokens


#: What a gate accepts as usage: an engine's report, or an attempt row's counts.
GateUsage = ReportedUsage | AttemptUsage


class AdmissionGate(Protocol):
    """One scope's admission (or a composition of scopes) as a driver sees it."""

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        """Wait up to ``timeout`` seconds (0: ask once; None: until granted).

        Returns the grant, or a :class:`Wait` saying which limit still blocks and
        when to ask again.

        Raises:
            ReservationTooLarge: no amount of waiting can admit this reservation.
        """
        ...

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool
    ) -> Reconciliation | None:
        """Settle ``grant`` once with what the attempt used (see ``reconcile``)."""
        ...

    async def cooldown(self, seconds: float) -> float | None:
        """Share a provider's 429 cooldown (``seconds``: its delay hint)."""
        ...


def counted_usage(usage: GateUsage | None) -> Usage | None:
    """Usage as the ledger counts it: unknown counts are zero."""
    if usage is None:
        return None
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0, usage.cached_tokens or 0)


async def acquire_within(
    gate: AdmissionGate,
    request: AdmissionRequest,
    *,
    seconds_left: Callable[[], float],
    call_timeout: float | None = None,
    reserve: float = 0.0,
    min_pause: float = 0.0,
    max_pause: float | None = None,
    interrupt: asyncio.Event | None = None,
    on_wait: Callable[[Wait, float], None] | None = None,
) -> Grant | Wait:
    """Ask ``gate`` until it grants, the time runs out or ``interrupt`` is set.

    Each ask waits at the gate at most ``min(call_timeout, seconds_left())``.
    After a :class:`Wait` the caller pauses for its hint, between ``min_pause``
    and ``max_pause`` and never past the time left less ``reserve`` (on
    ``interrupt`` when given, so a lost lease ends the pause at once), then asks
    again. Returns the grant, or the last wait once ``seconds_left()`` is at most
    ``reserve`` or ``interrupt`` is set: what a wait means is the caller's call.

    Raises:
        ReservationTooLarge: from the gate; no wait can admit the request.
    """
    while True:
        left = seconds_left()
        timeout = left if call_timeout is None else min(call_timeout, left)
        got = await gate.acquire(request, timeout=max(timeout, 0.0))
        if isinstance(got, Grant):
            return got
        left = seconds_left() - reserve
        if left <= 0 or (interrupt is not None and interrupt.is_set()):
            return got
        pause = min(max(got.seconds, min_pause), left)
        if max_pause is not None:
            pause = min(pause, max_pause)
        if on_wait is not None:
            on_wait(got, pause)
        if interrupt is None:
            await asyncio.sleep(pause)
            continue
        with contextlib.suppress(TimeoutError):
            await wait_within(interrupt.wait(), pause)
        if interrupt.is_set():
            return got
