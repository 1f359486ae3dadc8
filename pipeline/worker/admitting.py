"""Waiting for admission under a lease: an attempt's ask, and what a wait means to it.

The gate answers with a grant or a ``Wait``; here a wait is not a failed attempt.
The driver keeps the lease (heartbeats continue) and asks again after the wait's
hint (:func:`~pipeline.admission.acquire_within`) until the attempt's time runs
out; only then is a retry persisted (:class:`~pipeline.errors.AdmissionDeferred`).
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace as trace_api

from pipeline.admission import (
    AdmissionGate,
    AdmissionRequest,
    Grant,
    Wait,
    acquire_within,
    priority_class_for,
)
from pipeline.errors import AdmissionDeferred
from pipeline.jobs import Lease
from pipeline.worker.call_bounds import CallBounds

#: Seconds of the attempt's time kept back for the call itself: no ask past it.
RESERVE_SECONDS = 1.0
#: Shortest pause between asks, whatever a wait's hint says.
MIN_PAUSE_SECONDS = 0.1


def admission_request(
    lease: Lease, prompt_tokens: int, max_output_tokens: int, *, pool: str | None = None
) -> AdmissionRequest:
    """The ask of one attempt: its tenant, reservation, priority class, fence, and the
    pool its ``model_policy`` names (None: the one the length rule picks)."""
    return AdmissionRequest(
        tenant=str(lease.tenant_id),
        prompt_tokens=prompt_tokens,
        max_output_tokens=max_output_tokens,
        priority=priority_class_for(lease.priority),
        job_id=str(lease.job_id),
        fence=lease.fence,
        pool=pool,
    )


async def admit(
    gate: AdmissionGate,
    request: AdmissionRequest,
    lease: Lease,
    bounds: CallBounds,
    *,
    call_timeout: float,
    lost: asyncio.Event,
) -> Grant | None:
    """The grant for ``request`` while ``lease`` lives; None once the lease is lost.

    Raises:
        AdmissionDeferred: no grant before the attempt's time ran out (a retry).
        ReservationTooLarge: no budget can ever admit the reservation.
    """
    if bounds.time_left(lease) <= RESERVE_SECONDS:
        raise AdmissionDeferred("no admission budget before the attempt's time ran out")
    got = await acquire_within(
        gate,
        request,
        seconds_left=lambda: bounds.time_left(lease),
        call_timeout=call_timeout,
        reserve=RESERVE_SECONDS,
        min_pause=MIN_PAUSE_SECONDS,
        interrupt=lost,
        on_wait=_note_wait,
    )
    if isinstance(got, Grant):
        return got
    if lost.is_set():
        return None
    raise AdmissionDeferred(f"no admission budget before the attempt's time ran out ({got.reason})")


def _note_wait(wait: Wait, pause: float) -> None:
    """Record on the attempt's span why admission made it wait, and for how long."""
    span = trace_api.get_current_span()
    span.add_event("admission.deferred", {"reason": str(wait.reason), "pause": pause})
    span.set_attribute("fenceline.admission.wait_reason", str(wait.reason))
