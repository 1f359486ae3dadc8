"""An :class:`~pipeline.admission.gate.AdmissionGate` over an in-process policy.

A client that cannot reach its scope's actor admits a trickle from a local
allowance (``cluster``'s emergency mode); this is that allowance as a gate, so
the one waiting loop (:func:`~pipeline.admission.gate.acquire_within`) serves it
like any other gate.
"""

from __future__ import annotations

from pipeline.admission.gate import AdmissionRequest, GateUsage, counted_usage
from pipeline.admission.grants import Grant, Reconciliation, UnknownGrant, Wait
from pipeline.admission.policy import AdmissionPolicy


class LocalGate:
    """Asks the policy once per :meth:`acquire` (the caller's loop waits between asks)."""

    def __init__(self, policy: AdmissionPolicy) -> None:
        self.policy = policy

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        del timeout  # one ask: an in-process policy has nobody to wait on
        return self.policy.try_acquire(request)

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool, attempted: bool = True
    ) -> Reconciliation | None:
        """Settle locally; None for a grant the policy no longer holds open."""
        try:
            return self.policy.release(
                grant.grant_id, counted_usage(usage), uncertain=uncertain, attempted=attempted
            )
        except UnknownGrant:
            return None

    async def cooldown(self, seconds: float) -> float:
        return self.policy.cooldown(seconds)
