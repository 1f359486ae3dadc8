"""The driver's admission gates: one scope's actor, and one gate per engine scope.

Both are :class:`~pipeline.admission.AdmissionGate` implementations over the
:class:`~cluster.admission.client.AdmissionClient`: an
:class:`~pipeline.admission.AdmissionRequest` in, a grant or a ``Wait`` value out
(the attempt decides how to wait, :func:`~pipeline.admission.acquire_within`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from cluster.admission.client import AdmissionClient
from cluster.admission.engine_scopes import PoolRoute, route_scope
from pipeline.admission import (
    AdmissionGate,
    AdmissionRequest,
    GateUsage,
    Grant,
    Reconciliation,
    Wait,
)


class ActorGate:
    """The driver's :class:`~pipeline.admission.AdmissionGate` over an :class:`AdmissionClient`.

    Requests are asked for under ``holder`` (the driver's stable name) and
    ``holder_run`` (this process's run), so a restarted driver can give up
    what its dead run held (:meth:`abandon_earlier_runs`). A ``Wait`` comes
    back as a value; the attempt decides how to wait
    (:func:`~pipeline.admission.acquire_within`).
    """

    def __init__(
        self, client: AdmissionClient, *, holder: str | None = None, holder_run: str | None = None
    ) -> None:
        self.client = client
        self.holder = holder
        self.holder_run = holder_run

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        return await self.client.acquire(
            replace(request, holder=self.holder, holder_run=self.holder_run), timeout=timeout
        )

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool
    ) -> Reconciliation | None:
        # An uncertain outcome stays fully charged: its partial usage is not counted.
        return await self.client.release(grant, None if uncertain else usage, uncertain=uncertain)

    async def cooldown(self, seconds: float) -> float:
        return await self.client.cooldown(seconds)

    async def abandon_earlier_runs(self, call_bound_seconds: float) -> int:
        """Expire this holder's grants from earlier runs once their attempt could
        no longer be calling (:meth:`AdmissionActor.abandon`); returns how many."""
        if self.holder is None or self.holder_run is None:
            return 0
        return await self.client.abandon(self.holder, self.holder_run, call_bound_seconds)


G = TypeVar("G", bound=AdmissionGate)


class RoutedGate(Generic[G]):
    """An ``AdmissionGate`` over one gate per engine scope.

    ``acquire`` asks the scope of the engine the router will pick for the
    attempt's prompt + output estimate, or of the pool the job's ``model_policy``
    names (``request.pool``); ``release`` returns the grant to the gate that gave it;
    a provider cooldown (429) is shared with every scope.
    """

    def __init__(self, gates: Mapping[str, G], routes: Sequence[PoolRoute]) -> None:
        missing = sorted({r.scope for r in routes} - set(gates))
        if missing:
            raise ValueError(f"routes name scopes without a gate: {missing}")
        self.gates = dict(gates)
        self.routes = list(routes)
        self._given: dict[str, G] = {}

    async def acquire(self, request: AdmissionRequest, *, timeout: float | None) -> Grant | Wait:
        gate = self.gates[route_scope(self.routes, request.reserved_tokens, pool=request.pool)]
        got = await gate.acquire(request, timeout=timeout)
        if isinstance(got, Grant):
            self._given[got.grant_id] = gate
        return got

    async def release(
        self, grant: Grant, *, usage: GateUsage | None, uncertain: bool
    ) -> Reconciliation | None:
        gate = self._given.pop(grant.grant_id)
        return await gate.release(grant, usage=usage, uncertain=uncertain)

    async def cooldown(self, seconds: float) -> None:
        for gate in self.gates.values():
            await gate.cooldown(seconds)
