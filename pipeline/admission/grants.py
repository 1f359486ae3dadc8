"""Grants and their settlement: the records admission hands out and takes back.

A :class:`Grant` is permission for one attempt in one admission scope; the
driver returns it exactly once with what happened, and :func:`reconcile`
applies the refund rules of spec section 3, which differ per dimension:

* the **in-flight permit** always returns;
* the **request slot** is never refunded once the call was attempted;
* the **token reservation** is reconciled to reported usage (cached prompt
  tokens excluded where the provider exempts them), stays fully charged when
  the outcome is uncertain (a timeout may have been billed), and is refunded
  when the provider definitely refused without usage.

These types cross process boundaries (Ray actor calls), so they are plain
frozen dataclasses and enums with no behaviour that depends on where they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipeline.usage import ReportedUsage


class PriorityClass(StrEnum):
    """Admission priority classes: weights on a flow's quantum, not precedence."""

    INTERACTIVE = "interactive"  # a person is waiting on the result
    STANDARD = "standard"  # ordinary API submissions
    BATCH = "batch"  # bulk backfills; never starved, only served less often


def priority_class_for(job_priority: int) -> PriorityClass:
    """Map a job's integer priority (-10..10, higher first) to a class."""
    if job_priority > 0:
        return PriorityClass.INTERACTIVE
    if job_priority < 0:
        return PriorityClass.BATCH
    return PriorityClass.STANDARD


class WaitReason(StrEnum):
    """Why a request is not granted yet (the dimension that blocks it)."""

    COOLDOWN = "cooldown"  # shared 429 cooldown
    RPM = "rpm"  # request slots of the last 60 s
    TPM = "tpm"  # charged tokens of the last 60 s
    TPD = "tpd"  # charged tokens of the last day
    IN_FLIGHT = "in_flight"  # scope-wide permits
    CONCURRENT_TOKENS = "concurrent_tokens"  # KV-cache headroom of a local pool
    TENANT_IN_FLIGHT = "tenant_in_flight"  # the tenant's own permit limit
    FAIR_SHARE = "fair_share"  # other tenants' turn in the round
    LIMITER_UNREACHABLE = "limiter_unreachable"  # the admission actor did not answer


class GrantOutcome(StrEnum):
    """Ledger state of a grant; only GRANTED is open."""

    GRANTED = "granted"  # in flight; the driver (or expiry) settles it
    RECONCILED = "reconciled"  # usage reported: charged = counted usage
    UNCERTAIN = "uncertain"  # timeout or expiry: charged = full reservation
    REFUNDED = "refunded"  # not attempted, or refused without usage: no tokens


class UnknownGrant(KeyError):
    """Release of a grant this policy does not hold open (already settled, expired,
    or granted by a previous incarnation that left no ledger)."""


@dataclass(frozen=True)
class Grant:
    """Permission for one attempt. Hand it back to ``release`` exactly once.

    ``granted_at`` is the granting process's monotonic time (meaningful only
    there); ``emergency`` marks a grant of a client's local emergency allowance.
    """

    grant_id: str
    scope: str
    tenant: str
    priority: PriorityClass
    prompt_tokens: int
    max_output_tokens: int
    reserved_tokens: int
    granted_at: float
    waited_seconds: float = 0.0
    job_id: str | None = None
    fence: int | None = None
    emergency: bool = False
    #: Who holds it: a driver's stable name and the run (process incarnation) that
    #: asked. A restarted driver abandons its earlier runs' grants (see
    #: :meth:`AdmissionPolicy.abandon`); None: settled by release or the TTL only.
    holder: str | None = None
    holder_run: str | None = None


@dataclass(frozen=True)
class Wait:
    """Not granted: retry after ``seconds`` (a hint; exact for time-based reasons)."""

    seconds: float
    reason: WaitReason


@dataclass(frozen=True)
class Reconciliation:
    """How one grant was settled and what it cost the scope's window."""

    grant_id: str
    tenant: str
    outcome: GrantOutcome
    reserved_tokens: int
    charged_tokens: int
    request_charged: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    expired: bool = False

    @property
    def refunded_tokens(self) -> int:
        """Reservation returned to the window (negative if usage exceeded it)."""
        return self.reserved_tokens - self.charged_tokens


@dataclass(frozen=True)
class RestoredGrant:
    """A ledger row of the last window, replayed into a restarted policy."""

    grant_id: str
    tenant: str
    priority: PriorityClass
    reserved_tokens: int
    age_seconds: float
    outcome: GrantOutcome
    charged_tokens: int | None
    request_charged: bool
    job_id: str | None = None
    fence: int | None = None


def counted_tokens(usage: ReportedUsage, *, count_cached_tokens: bool = True) -> int:
    """Tokens of ``usage`` that count against TPM under the provider's cache rule."""
    prompt = max(0, int(usage.prompt_tokens))
    completion = max(0, int(usage.completion_tokens))
    if not count_cached_tokens:
        prompt -= min(prompt, max(0, int(usage.cached_tokens)))
    return prompt + completion


def reconcile(
    grant: Grant,
    usage: ReportedUsage | None,
    *,
    uncertain: bool,
    attempted: bool = True,
    count_cached_tokens: bool = True,
) -> Reconciliation:
    """Settle ``grant``: the per-dimension refund rules in one place.

    * not attempted (lease lost before the call): request slot and tokens refunded;
    * uncertain (timeout, lost connection after sending): fully charged — the
      provider may have done and billed the work — or more if usage says so;
    * usage reported: charged exactly the counted usage;
    * attempted, refused without usage (429, 4xx): request slot kept, tokens refunded.
    """
    if not attempted and uncertain:
        raise ValueError("an attempt that was never made cannot be uncertain")
    prompt = completion = cached = None
    counted: int | None = None
    if usage is not None:
        prompt, completion = int(usage.prompt_tokens), int(usage.completion_tokens)
        cached = int(usage.cached_tokens)
        counted = counted_tokens(usage, count_cached_tokens=count_cached_tokens)
    if not attempted:
        outcome, charged = GrantOutcome.REFUNDED, 0
    elif uncertain:
        outcome, charged = GrantOutcome.UNCERTAIN, max(grant.reserved_tokens, counted or 0)
    elif counted is not None:
        outcome, charged = GrantOutcome.RECONCILED, counted
    else:
        outcome, charged = GrantOutcome.REFUNDED, 0
    return Reconciliation(
        grant_id=grant.grant_id,
        tenant=grant.tenant,
        outcome=outcome,
        reserved_tokens=grant.reserved_tokens,
        charged_tokens=charged,
        request_charged=attempted,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
    )
