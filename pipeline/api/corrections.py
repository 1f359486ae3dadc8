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
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.api.problems import (
    UNSAFE_NOTE_NOTE,
    UNSAFE_TEXT_NOTE,
    ApiProblem,
    refuse_unsafe_text,
    safe_text_schema,
)
from pipeline.api.review import job_for_review
from pipeline.api.submission import JsonInt
from pipeline.clock import Clock
from pipeline.extraction import (
    CORRECTABLE_FIELDS,
    ROW_FIELDS,
    ground_correction,
    ground_row_correction,
    row_field,
)
from pipeline.invoice import Evidence, Extraction, LineItem, Reason, ReasonCode, TaxLine
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import Principal, load_master_data
from pipeline.validation import policy_for, validate

#: At most this many values in one correction (header fields plus row values).
MAX_CORRECTED_VALUES = 2000
NoteText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4000,
        pattern=r"^[^\x00]*$",
        description=UNSAFE_NOTE_NOTE,
        json_schema_extra=safe_text_schema(multiline=True),
    ),
]
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


class FieldChange(BaseModel):
    field: str
    before: str | None
    after: str | None
    grounded: bool


class CorrectionOut(BaseModel):
    correction_id: uuid.UUID
    job_id: uuid.UUID
    state: JobState
    state_version: int
    changes: list[FieldChange]
    reasons: list[dict[str, str]]
    overridden: list[dict[str, str]]
    created_at: datetime


def scalar_value(result: dict[str, Any], path: str) -> str | None:
    """The stored value of header field ``path`` (``supplier.name``, ``gross_total``)."""
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        value = node.get("value")
        return None if value is None else str(value)
    return None


def _evidenced(path: str, value: str, old: dict[str, Any] | None, ocr_text: str) -> Any:
    """``value`` with the span where the document prints it, or the old span (or an
    empty one) when it is printed nowhere; the second item says which."""
    found = ground_correction(ocr_text, path, value)
    if found is not None:
        return found.model_dump(mode="json"), True
    evidence = (
        old.get("evidence")
        if isinstance(old, dict) and isinstance(old.get("evidence"), dict)
        else Evidence(page=1, start=0, end=0, quote="").model_dump(mode="json")
    )
    return {"value": value, "evidence": evidence}, False


def _with(result: dict[str, Any], path: str, node: dict[str, Any] | None) -> None:
    parts = path.split(".")
    target = result
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = node


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
        ocr_text = str(job["ocr_text"] or "")
        result: dict[str, Any] = json.loads(json.dumps(job["result"]))
        before_validation: dict[str, Any] = job["validation"] or {}
        changes: list[FieldChange] = []
        refused: list[Reason] = []
        for path in CORRECTABLE_FIELDS:
            if path not in body.values:
                continue
            after = body.values[path].strip()
            before = scalar_value(result, path)
            if (after or None) == before:
                continue
            old = _node(result, path)
            grounded = True
            if after:
                node, grounded = _evidenced(path, after, old, ocr_text)
                if not grounded:
                    refused.append(
                        Reason(
                            ReasonCode.UNGROUNDED_VALUE,
                            path,
                            f"the corrected value {after[:60]!r} is not printed in the document",
                            rule="correction.not_printed",
                        )
                    )
                _with(result, path, node)
            else:
                _with(result, path, None)
            changes.append(
                FieldChange(field=path, before=before, after=after or None, grounded=grounded)
            )
        row_changes, row_refused = self._apply_rows(result, body.values, ocr_text)
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
        master = await load_master_data(conn, principal.tenant_id)
        report = validate(
            extraction, ocr_text, master, today=self._today().date(), policy=self.policy
        )
        reasons = [r.as_dict() for r in (*refused, *report.reasons)]
        wanted = {(o.code, o.field) for o in body.overrides}
        overridden = [r for r in reasons if _key(r) in wanted]
        remaining = [r for r in reasons if _key(r) not in wanted]
        validation = {
            **report.as_dict(),
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
            extraction.model_dump(mode="json"),
            validation,
            summary,
            report.policy_version,
        )
        if version is None:  # pragma: no cover - the row is locked and was checked above
            raise ApiProblem(409, "the job changed during the correction", reason="review_conflict")
        state = JobState.REVIEW_REQUIRED
        if body.approve:
            note = body.note or "approved after correction; validation passed"
            decided = await self.store.decide_review(
                conn,
                job_id=job_id,
                tenant_id=principal.tenant_id,
                key_id=principal.key_id,
                decision="approve",
                note=note,
                state_version=version,
            )
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
            [c.model_dump() for c in changes],
            list(before_validation.get("reasons", [])),
            reasons,
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

    def _apply_rows(
        self, result: dict[str, Any], values: dict[str, str], ocr_text: str
    ) -> tuple[list[FieldChange], list[Reason]]:
        """Apply row corrections to ``result`` in place, each changed row grounded again.

        Raises:
            ApiProblem: 422 for a row the result does not have or a row value the
                contract does not accept.
        """
        edits: dict[tuple[str, int], dict[str, str]] = {}
        for path, value in values.items():
            named = row_field(path)
            if named is not None:
                group, index, name = named
                edits.setdefault((group, index), {})[name] = value.strip()
        changes: list[FieldChange] = []
        refused: list[Reason] = []
        for (group, index), fields in sorted(edits.items()):
            rows = result.get(group)
            if (
                not isinstance(rows, list)
                or index >= len(rows)
                or not isinstance(rows[index], dict)
            ):
                raise ApiProblem(422, f"the result has no {group}[{index}]", reason="field")
            old = rows[index]
            new = {**old, **{k: v for k, v in fields.items() if not _same(old.get(k), v)}}
            changed = [k for k in ROW_FIELDS[group] if new.get(k) != old.get(k)]
            if not changed:
                continue
            row = _parsed_row(group, index, new)
            evidence = ground_row_correction(ocr_text, row, _parsed_evidence(old.get("evidence")))
            path = f"{group}[{index}]"
            if evidence is not None:
                new["evidence"] = evidence.model_dump(mode="json")
            else:
                refused.append(
                    Reason(
                        ReasonCode.UNGROUNDED_VALUE,
                        path,
                        "the corrected row is printed on no row of the document",
                        rule="correction.row_not_printed",
                    )
                )
            rows[index] = new
            changes += [
                FieldChange(
                    field=f"{path}.{k}",
                    before=None if old.get(k) is None else str(old.get(k)),
                    after=str(new[k]),
                    grounded=evidence is not None,
                )
                for k in changed
            ]
        return changes, refused


def _same(before: Any, after: str) -> bool:
    """Whether a typed row value equals the stored one (``2`` and ``2.00`` are equal
    quantities; a description compares as text)."""
    if before is None:
        return False
    try:
        return Decimal(str(before)) == Decimal(after)
    except InvalidOperation:
        return str(before).strip() == after


def _parsed_row(group: str, index: int, row: dict[str, Any]) -> LineItem | TaxLine:
    model: type[LineItem] | type[TaxLine] = LineItem if group == "line_items" else TaxLine
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise ApiProblem(
            422,
            f"a corrected value of {group}[{index}] is not in canonical form: "
            + "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
            ),
            reason="invalid_value",
        ) from None


def _parsed_evidence(evidence: Any) -> Evidence | None:
    try:
        return Evidence.model_validate(evidence)
    except ValidationError:
        return None


def _node(result: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None
