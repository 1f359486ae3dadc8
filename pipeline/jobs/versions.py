"""Invoice versions: a later document of the same invoice supersedes the earlier one
only through an explicit rule.

An invoice is identified by its tenant, supplier, number and document type
(:func:`version_key`; the gross total is not part of it, so a corrected total is
the same invoice). The transaction that commits a result claims the identity's
current version in ``invoice_versions`` (migration 036) before the duplicate checks
(:mod:`pipeline.jobs.duplicates`, :mod:`pipeline.jobs.near_duplicates`) run. A job
that finds the identity held by another job's version is a *possible amendment*
when its issue date is newer than that version's, or when it carries an amendment
marker (:func:`amendment_marker`); then, by the tenant's
``invoice_version_policy``:

* ``review`` (the default): settled REVIEW_REQUIRED ``possible_amendment`` naming
  the earlier job; a reviewer approving it supersedes that job
  (:func:`supersede_on_approval`);
* ``auto_supersede``: it supersedes the earlier job at once and is settled as its
  validation says.

Anything else (the same issue date, no marker) is left to the duplicate checks,
exactly as before versions existed. The supersede is optimistic: one conditional
statement on the current version's number and job. Of two versions racing, the
second waits on the row, matches nothing and decides again against the winner, so
an earlier version is superseded once. The job's :class:`~pipeline.jobs.records.
Settled` names the job it superseded; the delivery hook then sends the ERP
``invoice.superseded.v1`` for the old job before the new job's result.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import asyncpg

from pipeline.errors import NotFound, VersionConflict
from pipeline.identity import InvoiceIdentity, invoice_identity
from pipeline.queries import q

#: The validation reason of a job that may be a new version of another job's invoice.
POSSIBLE_AMENDMENT = "possible_amendment"
#: The document type of every result until the extraction tells types apart.
DEFAULT_DOCUMENT_TYPE = "invoice"
#: The tenant policies (``tenants.invoice_version_policy``).
VERSION_POLICIES = ("review", "auto_supersede")

#: The rule id of the title rule's reason where a page is titled as a corrected invoice
#: (``pipeline.validation.document_title``; this package imports only the root).
CORRECTION_TITLE_RULE = "validation.correction_title"

#: Words in a document's title that say it corrects an earlier issue (lower case).
AMENDMENT_WORDS = frozenset(
    {
        "corrected",
        "correction",
        "amended",
        "amendment",
        "revised",
        "korrektur",
        "korrigiert",
        "korrigierte",
        "berichtigt",
        "berichtigte",
        "berichtigung",
        "rectificative",
        "rectifiée",
        "rectificada",
        "rettificata",
    }
)

_WORDS = re.compile(r"[^\W\d_]+")

#: A supersede that keeps losing to concurrent versions gives up after this many reads.
MAX_DECISIONS = 5


def _value(node: Any) -> Any:
    return node.get("value") if isinstance(node, dict) else node


def document_type(result: Mapping[str, Any]) -> str:
    """The result's document type (``invoice`` unless the result says otherwise)."""
    raw = _value(result.get("document_type"))
    text = str(raw).strip().lower() if raw else ""
    return text if re.fullmatch(r"[a-z_]{1,40}", text) else DEFAULT_DOCUMENT_TYPE


def issue_date(result: Mapping[str, Any]) -> date | None:
    """The result's issue date, or None where it has none or not in ISO form."""
    raw = _value(result.get("issue_date"))
    try:
        return date.fromisoformat("".join(str(raw).split())) if raw else None
    except ValueError:
        return None


def amendment_marker(
    result: Mapping[str, Any], validation: Mapping[str, Any] | None = None
) -> str | None:
    """Why the result says it amends an earlier issue, or None.

    A reference to a preceding invoice (an e-invoice's BT-25,
    ``preceding_invoice``), an amendment word in the title a result states
    (``document_title``: "Corrected invoice", "Rechnungskorrektur"), or, for a
    result read from the page's text, which holds no title, the title rule's reason
    in its ``validation`` that the page is titled as a corrected invoice
    (:data:`CORRECTION_TITLE_RULE`).
    """
    if _value(result.get("preceding_invoice")):
        return "preceding_invoice"
    for reason in (validation or {}).get("reasons") or []:
        if isinstance(reason, dict) and reason.get("rule") == CORRECTION_TITLE_RULE:
            return "printed_correction_title"
    title = str(_value(result.get("document_title")) or "").casefold()
    for word in _WORDS.findall(title):
        if word in AMENDMENT_WORDS or any(word.endswith(w) for w in ("korrektur", "berichtigung")):
            return f"title:{word}"
    return None


def version_key(
    secret: bytes, tenant_id: uuid.UUID, ident: InvoiceIdentity, doc_type: str
) -> bytes:
    """HMAC-SHA256 of the tenant, supplier, number and document type: the version key."""
    msg = "\x1f".join(("version", str(tenant_id), ident.supplier, ident.invoice_number, doc_type))
    return hmac.new(secret, msg.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class VersionDecision:
    """What the version step decided for a job that found another job's version.

    ``superseded`` True: this job superseded ``other_job`` and is ``version``. False:
    it is a possible amendment of ``other_job`` (version ``version``), for review.
    """

    other_job: uuid.UUID
    version: int
    superseded: bool
    marker: str | None


@dataclass(frozen=True)
class _Identity:
    tenant_id: uuid.UUID
    doc_type: str
    key: bytes
    issued: date | None


def _identity(secret: bytes, tenant_id: uuid.UUID, result: Mapping[str, Any]) -> _Identity | None:
    ident = invoice_identity(result)
    if ident is None:
        return None
    doc_type = document_type(result)
    return _Identity(
        tenant_id, doc_type, version_key(secret, tenant_id, ident, doc_type), issue_date(result)
    )


async def claim_version(
    conn: asyncpg.Connection,
    secret: bytes,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    result: Mapping[str, Any],
    validation: Mapping[str, Any] | None = None,
) -> VersionDecision | None:
    """Claim the result's invoice version for ``job_id`` in ``conn``'s transaction
    (``validation``: the job's report so far, for :func:`amendment_marker`).

    None when the job now holds the current version (first of its identity, taken
    over from a rejected job) or is no amendment of the version another job holds
    (the duplicate checks decide then). Otherwise a :class:`VersionDecision`.

    Raises:
        RuntimeError: the identity's current version changed under it
            :data:`MAX_DECISIONS` times in a row (the transaction rolls back).
    """
    ident = _identity(secret, tenant_id, result)
    if ident is None:
        return None
    key = (ident.tenant_id, ident.doc_type, ident.key)
    marker = amendment_marker(result, validation)
    for _ in range(MAX_DECISIONS):
        if await conn.fetchval(q("invoice_version_insert_if_none"), *key, job_id, ident.issued):
            return None
        cur = await conn.fetchrow(q("invoice_version_current"), *key)
        if cur is None:  # the holder's version was erased or superseded meanwhile
            continue
        if cur["job_id"] == job_id:
            return None
        if cur["job_state"] == "FAILED_TERMINAL":
            taken = await conn.fetchval(
                q("invoice_version_take_over_if_rejected"),
                *key,
                cur["version"],
                cur["job_id"],
                job_id,
                ident.issued,
            )
            if taken is not None:
                return None
            continue
        newer = ident.issued is not None and (
            cur["issue_date"] is not None and ident.issued > cur["issue_date"]
        )
        if marker is None and not newer:
            return None
        why = marker or "newer_issue_date"
        if cur["policy"] != "auto_supersede":
            return VersionDecision(cur["job_id"], cur["version"], superseded=False, marker=why)
        version = await _supersede(conn, ident, cur["version"], cur["job_id"], job_id, ident.issued)
        if version is not None:
            return VersionDecision(cur["job_id"], version, superseded=True, marker=why)
    raise RuntimeError(f"job {job_id}: the invoice's current version kept changing")


async def claim_versions(
    conn: asyncpg.Connection,
    secret: bytes,
    claims: Sequence[tuple[uuid.UUID, uuid.UUID, Mapping[str, Any]]],
    validations: Mapping[uuid.UUID, Mapping[str, Any]] | None = None,
) -> dict[uuid.UUID, VersionDecision | None]:
    """:func:`claim_version` for each ``(tenant, job, result)`` of a batch
    (``validations``: each job's report so far, by job).

    The identities no job holds yet (the common case) take one statement; each job
    whose identity is found held takes :func:`claim_version`'s way, in job order.
    """
    out: dict[uuid.UUID, VersionDecision | None] = {job: None for _, job, _ in claims}
    keyed = [
        (tenant, job, result, ident)
        for tenant, job, result in sorted(claims, key=lambda c: c[1])
        if (ident := _identity(secret, tenant, result)) is not None
    ]
    if not keyed:
        return out
    rows = await conn.fetch(
        q("invoice_version_insert_batch_if_none"),
        [i.tenant_id for *_, i in keyed],
        [i.doc_type for *_, i in keyed],
        [i.key for *_, i in keyed],
        [job for _, job, _, _ in keyed],
        [i.issued for *_, i in keyed],
    )
    held = {r["job_id"] for r in rows}
    for tenant, job, result, _ in keyed:
        if job not in held:
            out[job] = await claim_version(
                conn, secret, tenant, job, result, (validations or {}).get(job)
            )
    return out


async def _supersede(
    conn: asyncpg.Connection,
    ident: _Identity,
    version: int,
    old_job: uuid.UUID,
    new_job: uuid.UUID,
    issued: date | None,
) -> int | None:
    """Supersede ``old_job``'s version ``version`` by ``new_job`` (conditional); the new
    version number, or None when another version was decided first."""
    got: int | None = await conn.fetchval(
        q("invoice_version_supersede_if_current"),
        ident.tenant_id,
        ident.doc_type,
        ident.key,
        version,
        old_job,
        new_job,
        issued,
    )
    if got is not None:
        await conn.fetch(q("invoice_version_hand_over_keys"), ident.tenant_id, old_job, new_job)
    return got


async def supersede_on_approval(
    conn: asyncpg.Connection,
    secret: bytes,
    tenant_id: uuid.UUID,
    job_id: uuid.UUID,
    result: Mapping[str, Any],
    validation: Mapping[str, Any],
) -> uuid.UUID | None:
    """A reviewer approved ``job_id``: supersede the version its ``possible_amendment``
    reason names. Returns the superseded job; None when the result names no possible
    amendment.

    Raises:
        VersionConflict: the named job's version is no longer the current one
            (another version was approved or superseded it first).
    """
    named = _named_version(validation)
    if named is None:
        return None
    other_job, version = named
    ident = _identity(secret, tenant_id, result)
    if ident is None:  # pragma: no cover - a possible amendment had an identity
        return None
    if await _supersede(conn, ident, version, other_job, job_id, ident.issued) is None:
        raise VersionConflict(
            f"job {other_job}'s version {version} is no longer the invoice's current one"
        )
    return other_job


def _named_version(validation: Mapping[str, Any]) -> tuple[uuid.UUID, int] | None:
    for reason in validation.get("reasons") or []:
        if isinstance(reason, dict) and reason.get("code") == POSSIBLE_AMENDMENT:
            return uuid.UUID(str(reason["other_job_id"])), int(reason["version"])
    return None


def flag_possible_amendment(
    validation: dict[str, Any], decision: VersionDecision
) -> dict[str, Any]:
    """``validation`` with a ``possible_amendment`` reason naming the earlier job."""
    reason = {
        "code": POSSIBLE_AMENDMENT,
        "field": "invoice_number",
        "detail": (
            f"a later version of the invoice of job {decision.other_job}"
            f" (version {decision.version}): {decision.marker}"
        ),
        "other_job_id": str(decision.other_job),
        "version": decision.version,
        "marker": decision.marker,
    }
    return {
        **validation,
        "decision": "REVIEW_REQUIRED",
        "reasons": [*(validation.get("reasons") or []), reason],
    }


async def set_version_policy(conn: asyncpg.Connection, tenant_id: uuid.UUID, policy: str) -> None:
    """Set the tenant's ``invoice_version_policy`` (:data:`VERSION_POLICIES`).

    Raises:
        ValueError: not a policy.
        NotFound: no such tenant.
    """
    if policy not in VERSION_POLICIES:
        raise ValueError(f"invoice version policy must be one of {', '.join(VERSION_POLICIES)}")
    if await conn.fetchval(q("tenant_invoice_version_policy_set"), tenant_id, policy) is None:
        raise NotFound(f"tenant {tenant_id}")
