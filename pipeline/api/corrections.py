"""Reviewer corrections: edit a REVIEW_REQUIRED result, validate again, decide.

A reviewer who finds a wrong value fixes it instead of rejecting the invoice.
Invariants:

* **Validation decides, not the reviewer's confidence.** The corrected result is
  grounded again (the system finds where each corrected value is printed,
  :func:`pipeline.extraction.ground_correction`) and validated under the
  deployment's policy with the tenant's master data. The job becomes SUCCEEDED
  only when the reviewer asked to approve and every reason of the new report is
  either gone or **overridden by name** (code and field) with a note. Anything
  else keeps it REVIEW_REQUIRED, with the new reasons shown.
* **Approval with reasons left is refused and writes nothing** (issue 45): asked to
  approve, a correction whose new report still has a reason not overridden raises
  :class:`ReasonsRemain` (422, the reasons listed) before any row changes, so the
  job, its result and ``review_corrections`` stay as they were. Saving without
  approving keeps the job REVIEW_REQUIRED with the new reasons, audited.
* **Optimistic and tenant-scoped.** The job is read and locked under the
  caller's tenant (another tenant's job is 404, like a missing one), and the
  correction applies only to the ``state_version`` the reviewer saw; each
  correction moves ``state_version`` on, so a decision made on the uncorrected
  view is refused as stale (409).
* **Audited in one transaction**: the new result and report, a
  ``review_corrections`` row (before/after of every changed field, reasons before
  and after, overrides, note, API key, time) and, on approval, the review decision,
  the ``extraction.completed.v1`` event and the ERP deliveries
  (:meth:`pipeline.jobs.JobStore.decide_review`) commit together or not at all.
* Raw model output that never passed schema validation cannot be corrected into
  a result (409 ``result_not_approvable``): only rejection is possible for it.
* **Rows as well as header values**: a line item's or tax line's values are
  corrected by path (``line_items[2].quantity``, ``tax_lines[0].amount``); the
  row's evidence is then grounded again as a whole
  (:func:`pipeline.extraction.ground_row_correction`), and a row printed nowhere
  keeps its old span and gets ``ungrounded_value`` at the row, like a header value.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.api.correction_edits import (
    FieldChange,
    apply_rows,
    evidenced,
    node_at,
    scalar_value,
    with_node,
)
from pipeline.api.correction_reasons import kept_reasons, merged
from pipeline.api.problems import (
    UNSAFE_TEXT_NOTE,
    ApiProblem,
    refuse_unsafe_text,
    safe_text_schema,
)
from pipeline.api.review import NoteText, job_for_review
from pipeline.api.submission import JsonInt
from pipeline.clock import Clock
from pipeline.data_keys import document_subject
from pipeline.errors import VersionConflict
from pipeline.extraction import (
    CORRECTABLE_FIELDS,
    row_field,
)
from pipeline.invoice import Extraction, Reason, ReasonCode
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.sealed_results import (
    open_result,
    open_validation,
    seal_changes,
    seal_reasons,
    seal_result,
    seal_validation,
)
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Principal, load_master_data
from pipeline.validation import needs_contract_v3, policy_for, validate

#: At most this many values in one correction (header fields plus row values).
MAX_CORRECTED_VALUES = 2000
ValueText = Annotated[
    str,
    Field(
        max_length=400,
        pattern=r"^[^\x00]*$",
        description=UNSAFE_TEXT_NOTE,
        json_schema_extra=safe_text_schema(),
    ),
]


class ReasonRef(BaseModel):
    """A reason named by its code and the field it points at."""

    model_config = ConfigDict(extra="forbid", strict=True)

    code: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_]+$")]
    field: Annotated[str, Field(max_length=200)]


class CorrectionIn(BaseModel):
    """Corrected values by path, canonical form: header fields (``""`` clears one) and
    row values (``line_items[0].quantity``, ``tax_lines[1].amount``; never empty);
    reasons the reviewer overrides; whether to approve if the result then passes."""

    model_config = ConfigDict(extra="forbid", strict=True)

    state_version: JsonInt = Field(ge=1, le=2_000_000_000)
    values: dict[str, ValueText] = Field(default_factory=dict, max_length=MAX_CORRECTED_VALUES)
    overrides: list[ReasonRef] = Field(default_factory=list, max_length=100)
    note: NoteText | None = None
    approve: bool = False


class ReasonsRemain(ApiProblem):
    """An approval refused because reasons are neither fixed nor overridden; the
    transaction rolls back, so nothing of the correction is stored."""

    def __init__(self, job_id: uuid.UUID, reasons: list[dict[str, str]]) -> None:
        codes = ", ".join(f"{r['code']}@{r['field']}" for r in reasons[:20])
        super().__init__(
            422,
            f"not approved: {len(reasons)} reason(s) remain ({codes}); fix or override each",
            reason="reasons_remain",
            job_id=str(job_id),
        )
        self.reasons = reasons


class CorrectionOut(BaseModel):
    correction_id: uuid.UUID
    job_id: uuid.UUID
    state: JobState
    state_version: int
    changes: list[FieldChange]
    reasons: list[dict[str, str]]
    overridden: list[dict[str, str]]
    created_at: datetime


def _key(reason: dict[str, Any]) -> tuple[str, str]:
    return str(reason.get("code", "")), str(reason.get("field", ""))


class CorrectionService:
    """Applies corrections; see the module docstring for the invariants."""

    def __init__(
        self, pool: asyncpg.Pool, store: JobStore, settings: Settings, clock: Clock | None = None
    ) -> None:
        self.pool = pool
        self.store = store
        self.settings = settings
        self.clock = clock
        self.policy = policy_for(settings)

    def _today(self) -> datetime:
        now = self.clock.now() if self.clock is not None else None
        return now or datetime.now(UTC)

    async def correct(
        self, principal: Principal, job_id: uuid.UUID, body: CorrectionIn
    ) -> CorrectionOut:
        """Apply ``body`` to the principal's job ``job_id``.

        Raises:
            NotFound: no such job for this tenant.
            ApiProblem: 403 without a review scope; 409 when the job is not awaiting
                review, the state_version moved on, or the result is raw model output;
                422 for an unknown field or a value the contract does not accept, and
                ``unsafe_text`` for a value or note with a hidden character.
        """
        unknown = sorted(
            k for k in body.values if k not in CORRECTABLE_FIELDS and row_field(k) is None
        )
        if unknown:
            raise ApiProblem(422, f"not correctable: {', '.join(unknown)}", reason="field")
        for path, value in body.values.items():
            refuse_unsafe_text(path, value)
        refuse_unsafe_text("note", body.note, multiline=True)
        if body.overrides and body.note is None:
            raise ApiProblem(422, "overriding a reason needs a note", reason="note_required")
        async with (
            self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds) as conn,
            conn.transaction(),
        ):
            job = await job_for_review(
                conn, "review_subject_get_for_tenant_for_update", principal, job_id, "correcting"
            )
            self._check_pending(job_id, job, body.state_version)
            return await self._apply(conn, principal, job, body)

    def _check_pending(self, job_id: uuid.UUID, job: asyncpg.Record, seen: int) -> None:
        conflict = None
        if job["state"] != JobState.REVIEW_REQUIRED.value:
            conflict = f"the job is {job['state']}, not awaiting review"
        elif job["state_version"] != seen:
            conflict = f"state_version {seen} is stale; the job is at {job['state_version']}"
        elif job["result"] is None or job["validation"].get("schema_valid") is False:
            raise ApiProblem(
                409,
                "the job's result is raw model output; it can only be rejected",
                reason="result_not_approvable",
                job_id=str(job_id),
            )
        elif needs_contract_v3(job["validation"]):
            raise ApiProblem(
                409,
                "the job's result holds contract v3 values its schema_version 1 has no "
                "place for; it can only be rejected (submit it again with schema_version 3)",
                reason="result_not_approvable",
                job_id=str(job_id),
            )
        if conflict:
            raise ApiProblem(
                409,
                conflict,
                reason="review_conflict",
                job_id=str(job_id),
                state=job["state"],
                state_version=job["state_version"],
            )

    async def _apply(
        self,
        conn: asyncpg.Connection,
        principal: Principal,
        job: asyncpg.Record,
        body: CorrectionIn,
    ) -> CorrectionOut:
        job_id: uuid.UUID = job["id"]
        ocr_text = ""
        if job["ocr_text"] is not None:  # sealed at rest (migration 039)
            ocr_text = await self.store.data_keys.open_text(
                conn, job["tenant_id"], job["ocr_text"], document_subject(job["document_sha256"])
            )
        # the result's text is sealed at rest (pipeline/sealed_results.py): corrected open,
        # sealed again below; a shredded key answers 410 as the text does
        keys = self.store.data_keys
        result: dict[str, Any] = json.loads(
            json.dumps(await open_result(keys, conn, job["tenant_id"], job_id, job["result"]))
        )
        before_validation: dict[str, Any] = await open_validation(
            keys, conn, job["tenant_id"], job_id, job["validation"] or {}
        )
        changes: list[FieldChange] = []
        refused: list[Reason] = []
        for path in CORRECTABLE_FIELDS:
            if path not in body.values:
                continue
            after = body.values[path].strip()
            before = scalar_value(result, path)
            if (after or None) == before:
                continue
            old = node_at(result, path)
            grounded = True
            if after:
                node, grounded = evidenced(path, after, old, ocr_text)
                if not grounded:
                    refused.append(
                        Reason(
                            ReasonCode.UNGROUNDED_VALUE,
                            path,
                            f"the corrected value {after[:60]!r} is not printed in the document",
                            rule="correction.not_printed",
                        )
                    )
                with_node(result, path, node)
            else:
                with_node(result, path, None)
            changes.append(
                FieldChange(field=path, before=before, after=after or None, grounded=grounded)
            )
        row_changes, row_refused = apply_rows(result, body.values, ocr_text)
        changes += row_changes
        refused += row_refused
        try:
            extraction = Extraction.model_validate(result)
        except ValidationError as exc:
            raise ApiProblem(
                422,
                "a corrected value is not in canonical form: "
                + "; ".join(
                    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
                ),
                reason="invalid_value",
            ) from None
        master = await load_master_data(conn, principal.tenant_id, keys=self.store.data_keys)
        report = validate(
            extraction, ocr_text, master, today=self._today().date(), policy=self.policy
        )
        # Only validation's reasons are recomputed; the reader's, the document stage's
        # and the job store's stay unless this correction re-grounds the value they name
        # (pipeline/api/correction_reasons.py).
        kept = kept_reasons(before_validation.get("reasons") or [], (c.field for c in changes))
        reasons = merged(kept, (r.as_dict() for r in (*refused, *report.reasons)))
        held = {str(r.get("field", "")) for r in kept}
        wanted = {(o.code, o.field) for o in body.overrides}
        overridden = [r for r in reasons if _key(r) in wanted]
        remaining = [r for r in reasons if _key(r) not in wanted]
        checked = report.as_dict()
        # a proof (that no account is stated...) holds only where no kept reason names
        # its field, as when the document was read (interpret_einvoice)
        proofs = [p for p in checked.pop("proofs", []) if str(p.get("field", "")) not in held]
        if proofs:
            checked["proofs"] = proofs
        validation = {
            **checked,
            "schema_version": before_validation.get("schema_version", report.schema_version),
            "reasons": reasons,
            "overrides": overridden,
            "corrected": True,
            "decision": JobState.REVIEW_REQUIRED.value if remaining else JobState.SUCCEEDED.value,
        }
        if body.approve and remaining:
            raise ReasonsRemain(job_id, remaining)
        summary = ", ".join(r["code"] for r in remaining)[:2000] or "review"
        version = await conn.fetchval(
            q("review_result_replace_if_pending"),
            job_id,
            principal.tenant_id,
            body.state_version,
            await seal_result(
                keys, conn, job["tenant_id"], job_id, extraction.model_dump(mode="json")
            ),
            await seal_validation(keys, conn, job["tenant_id"], job_id, validation),
            summary,
            report.policy_version,
        )
        if version is None:  # pragma: no cover - the row is locked and was checked above
            raise ApiProblem(409, "the job changed during the correction", reason="review_conflict")
        state = JobState.REVIEW_REQUIRED
        if body.approve:
            note = body.note or "approved after correction; validation passed"
            try:
                decided = await self.store.decide_review(
                    conn,
                    job_id=job_id,
                    tenant_id=principal.tenant_id,
                    key_id=principal.key_id,
                    decision="approve",
                    note=note,
                    state_version=version,
                )
            except VersionConflict as exc:
                raise ApiProblem(409, str(exc), reason="version_conflict") from exc
            if decided is None:  # pragma: no cover - same transaction, same lock
                raise ApiProblem(409, "the job changed during approval", reason="review_conflict")
            state, version = decided.settled.state, decided.settled.state_version
        audit = await conn.fetchrow(
            q("review_correction_insert"),
            uuid.uuid4(),
            job_id,
            principal.tenant_id,
            principal.key_id,
            body.state_version,
            state.value,
            version,
            # each corrected value's before and after sealed like the result's
            await seal_changes(
                keys, conn, job["tenant_id"], job_id, [c.model_dump() for c in changes]
            ),
            # the reasons' details quote the invoice: sealed like the result's text
            await seal_reasons(
                keys, conn, job["tenant_id"], job_id, list(before_validation.get("reasons", []))
            ),
            await seal_reasons(keys, conn, job["tenant_id"], job_id, reasons),
            [{"code": r["code"], "field": r["field"]} for r in overridden],
            body.note,
        )
        return CorrectionOut(
            correction_id=audit["id"],
            job_id=job_id,
            state=state,
            state_version=version,
            changes=changes,
            reasons=remaining,
            overridden=overridden,
            created_at=audit["created_at"],
        )
