"""AdmissionClient: how a driver reaches its scope's AdmissionActor, and what it
does when it cannot.

The limiter failing is decided in advance (spec section 3), per client:

* ``on_unreachable="fail_closed"`` (default): ``acquire`` returns
  ``Wait(reason=LIMITER_UNREACHABLE)``; the driver keeps (or releases) its
  lease and tries later. Nothing reaches the provider without the limiter.
* ``on_unreachable="emergency"``: a bounded local allowance
  (:class:`EmergencyAllowance`: at most N in flight, M tokens and R requests per
  minute, per client process) admits a trickle, so an actor restart does not
  stop the world. Size it so clients × allowance stays within the provider's
  real limits. Emergency grants are marked ``grant.emergency`` and released
  locally; they are not in the shared ledger, their count is the metric.

Either way each transition (down, back up) is logged and every failed call is
counted (``fenceline_admission_limiter_unreachable{operation}``,
``fenceline_admission_fail_closed``, ``fenceline_admission_emergency_grants``,
``fenceline_admission_limiter_up``). "Unreachable" means the call raised a Ray
system error (actor dead, restarting, unschedulable), timed out past the
acquire's own wait plus a margin, or hit an OS error; errors the actor itself
raises (``ReservationTooLarge``) propagate unchanged. After a failure the client
skips the actor for ``retry_seconds`` (no pile-up of timeouts), re-resolves the
named actor if it can, and then probes it again.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge

from pipeline.admission import (
    AdmissionConfig,
    AdmissionPolicy,
    AdmissionRequest,
    GateUsage,
    Grant,
    LocalGate,
    Reconciliation,
    Wait,
    WaitReason,
    acquire_within,
    counted_usage,
)
from pipeline.errors import FencelineError, ReservationTooLarge
from pipeline.waiting import wait_within

log = logging.getLogger(__name__)

ACTOR_PREFIX = "fenceline-admission"


def actor_name(scope: str) -> str:
    """The one actor name of a scope: every pod resolves the same actor."""
    return f"{ACTOR_PREFIX}-{scope}"


class _LocalMethod:
    def __init__(self, fn: Callable[..., Awaitable[Any]]) -> None:
        self._fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        return self._fn(*args, **kwargs)


class LocalActorHandle:
    """``handle.method.remote(...)`` over an in-process AdmissionActor: the
    embedded single-process mode (no Ray) and tests share the client code.

    ``actor`` is a :class:`cluster.admission.actor.AdmissionActor` (typed loosely:
    the client never imports the actor's module).
    """

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> _LocalMethod:
        return _LocalMethod(getattr(self.actor, name))


@dataclass(frozen=True)
class EmergencyAllowance:
    """What one client may grant itself while the limiter is unreachable.

    Sized so that (number of clients × allowance) stays within the provider's
    real limits: the allowance is per client process, not shared.
    """

    max_in_flight: int = 1
    tokens_per_minute: int = 20_000
    requests_per_minute: int = 10


class AdmissionClientMetrics:
    """The client's series on a registry of its own (or the caller's)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.unreachable = Counter(
            "fenceline_admission_limiter_unreachable",
            "Calls to the admission actor that failed or timed out, by operation",
            ["operation"],
            registry=self.registry,
        )
        self.fail_closed = Counter(
            "fenceline_admission_fail_closed",
            "Acquires refused because the limiter was unreachable (fail closed)",
            registry=self.registry,
        )
        self.emergency_grants = Counter(
            "fenceline_admission_emergency_grants",
            "Grants from the local emergency allowance while the limiter was unreachable",
            registry=self.registry,
        )
        self.limiter_up = Gauge(
            "fenceline_admission_limiter_up",
            "1 while the admission actor answers, 0 while it is considered unreachable",
            registry=self.registry,
        )
        self.limiter_up.set(1)


class AdmissionClient:
    """What a driver holds: the actor's protocol plus the unreachable behaviour.

    Args:
        handle: the actor handle (:func:`admission_actor`) or a :class:`LocalActorHandle`.
        on_unreachable: ``"fail_closed"`` (default) or ``"emergency"``.
        emergency: the local allowance used in ``"emergency"`` mode.
        call_margin_seconds: how long past its own wait an actor call may take
            before the actor counts as unreachable.
        retry_seconds: after a failure, calls skip the actor this long (no pile-up
            of timeouts), then probe it again.
        resolve: returns a fresh handle after a failure (e.g. ``ray.get_actor``).
    """

    def __init__(
        self,
        handle: Any,
        *,
        scope: str,
        on_unreachable: Literal["fail_closed", "emergency"] = "fail_closed",
        emergency: EmergencyAllowance | None = None,
        call_margin_seconds: float = 5.0,
        retry_seconds: float = 5.0,
        resolve: Callable[[], Any] | None = None,
        metrics: AdmissionClientMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if on_unreachable not in ("fail_closed", "emergency"):
            raise ValueError(f"unknown unreachable mode {on_unreachable!r}")
        self.handle = handle
        self.scope = scope
        self.mode = on_unreachable
        self.allowance = emergency or EmergencyAllowance()
        self.call_margin_seconds = call_margin_seconds
        self.retry_seconds = retry_seconds
        self.metrics = metrics or AdmissionClientMetrics()
        self._resolve = resolve
        self._clock = clock
        self._down_until = -float("inf")
        self._down = False
        self._local = LocalGate(
            AdmissionPolicy(
                AdmissionConfig(
                    scope=f"{scope}#emergency",
                    max_in_flight=self.allowance.max_in_flight,
                    tpm=self.allowance.tokens_per_minute,
                    rpm=self.allowance.requests_per_minute,
                ),
                clock=clock,
            )
        )

    @classmethod
    def for_scope(cls, scope: str, *, namespace: str | None = None, **kw: Any) -> AdmissionClient:
        """A client of the scope's named actor, re-resolved by name after failures."""
        import ray

        def resolve() -> Any:
            return ray.get_actor(actor_name(scope), namespace=namespace)

        return cls(resolve(), scope=scope, resolve=resolve, **kw)

    @property
    def unreachable(self) -> bool:
        return self._down

    async def acquire(
        self, request: AdmissionRequest, *, timeout: float | None = 30.0
    ) -> Grant | Wait:
        """:meth:`AdmissionActor.acquire`, or the unreachable behaviour.

        Raises:
            ReservationTooLarge: from the actor; no wait can admit the attempt.
        """
        if self._clock() >= self._down_until:
            limit = None if timeout is None else timeout + self.call_margin_seconds
            try:
                call = self.handle.acquire.remote(request, timeout=timeout)
                result: Grant | Wait = await wait_within(call, limit)
            except Exception as exc:  # classified below; application errors re-raise
                self._failed("acquire", exc)
            else:
                self._recovered()
                return result
        return await self._fallback(request, timeout)

    async def release(
        self,
        grant: Grant,
        usage: GateUsage | None = None,
        *,
        uncertain: bool = False,
        attempted: bool = True,
    ) -> Reconciliation | None:
        """Settle a grant where it came from; None if the actor cannot be told
        (its TTL then expires the grant, fully charged)."""
        if grant.emergency:
            return await self._local.release(
                grant, usage=usage, uncertain=uncertain, attempted=attempted
            )
        try:
            call = self.handle.release.remote(
                grant, counted_usage(usage), uncertain=uncertain, attempted=attempted
            )
            rec: Reconciliation | None = await wait_within(call, self.call_margin_seconds)
        except Exception as exc:
            self._failed("release", exc)
            return None
        self._recovered()
        return rec

    async def abandon(self, holder: str, current_run: str, call_bound_seconds: float) -> int:
        """:meth:`AdmissionActor.abandon`; 0 when the actor cannot be told (the TTL
        then expires those grants, as before)."""
        try:
            call = self.handle.abandon.remote(holder, current_run, call_bound_seconds)
            moved: int = await wait_within(call, self.call_margin_seconds)
        except Exception as exc:
            self._failed("abandon", exc)
            return 0
        self._recovered()
        return moved

    async def cooldown(self, seconds: float | None = None) -> float:
        """Share a 429 cooldown; the local allowance honours it too."""
        local = self._local.policy.cooldown(seconds)
        try:
            remaining: float = await wait_within(
                self.handle.cooldown.remote(seconds), self.call_margin_seconds
            )
        except Exception as exc:
            self._failed("cooldown", exc)
            return local
        self._recovered()
        return remaining

    async def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = await wait_within(
            self.handle.snapshot.remote(), self.call_margin_seconds
        )
        return snap

    # ---- unreachable handling --------------------------------------------------

    async def _fallback(self, request: AdmissionRequest, timeout: float | None) -> Grant | Wait:
        if self.mode == "fail_closed":
            self.metrics.fail_closed.inc()
            return Wait(self.retry_seconds, WaitReason.LIMITER_UNREACHABLE)
        deadline = self._clock() + (timeout if timeout is not None else self.retry_seconds)
        try:
            result = await acquire_within(
                self._local,
                request,
                seconds_left=lambda: deadline - self._clock(),
                call_timeout=0,
                max_pause=0.25,
            )
        except ReservationTooLarge:
            return Wait(self.retry_seconds, WaitReason.LIMITER_UNREACHABLE)
        if isinstance(result, Wait):
            return Wait(min(result.seconds, self.retry_seconds), WaitReason.LIMITER_UNREACHABLE)
        self.metrics.emergency_grants.inc()
        log.warning(
            "admission %s: emergency grant for %s (limiter down)", self.scope, request.tenant
        )
        return dataclasses.replace(result, emergency=True)

    def _failed(self, operation: str, exc: Exception) -> None:
        """Classify a failed call: the actor's own errors re-raise, the rest mean
        the limiter is unreachable (dead, restarting, partitioned or hung)."""
        if isinstance(exc, FencelineError):
            raise exc  # the actor answered, e.g. ReservationTooLarge
        from ray.exceptions import RayError

        if not isinstance(exc, TimeoutError | OSError | RayError):
            raise exc  # a caller bug, not an outage
        self.metrics.unreachable.labels(operation).inc()
        self._down_until = self._clock() + self.retry_seconds
        if not self._down:
            self._down = True
            self.metrics.limiter_up.set(0)
            log.error(
                "admission %s: limiter unreachable (%s: %s); %s for %.1fs",
                self.scope, type(exc).__name__, exc, self.mode, self.retry_seconds,
            )  # fmt: skip
        if self._resolve is not None:
            try:
                self.handle = self._resolve()
            except Exception as resolve_exc:  # the named actor may not exist yet
                log.debug("admission %s: cannot resolve actor: %s", self.scope, resolve_exc)

    def _recovered(self) -> None:
        if self._down:
            self._down = False
            self.metrics.limiter_up.set(1)
            log.warning("admission %s: limiter reachable again", self.scope)
