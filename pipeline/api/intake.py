"""Durable acceptance of extraction jobs (spec sections 2 and 3).

``POST /v1/extraction-jobs`` ends here. The invariants:

* **Durable before 202.** The document (sha256 digest, immutable content
  version), the job and its ``extraction.requested.v1`` outbox event commit in
  one transaction (:meth:`pipeline.jobs.store.JobStore.accept`); the response is sent
  only after the commit. A crash before the commit leaves none of them.
* **Idempotency.** ``Idempotency-Key`` is unique per tenant. The same key with
  the same request (document version, schema version, model policy,
  result-affecting options — the request hash) returns the same job: 202 the
  first time, 200 with the same body afterwards — the original receipt, with
  the state as accepted; the status URL gives the current one. The same key
  with a different request is 409 and writes nothing. Without the header the server generates a
  key (returned in the ``Idempotency-Key`` response header and the body): a
  retried request without a key is then a second job, so clients that retry
  must send one.
* **Admission first, in the same statement.** The tenant's advisory lock, the
  quota and idempotency read, the decision and the writes are one statement
  (``intake_accept``, migration 018): one round trip, its own transaction. A
  refusal (:mod:`pipeline.tenants.quotas` words it) writes nothing. A replay of an accepted
  request is never refused by admission: that work is already accepted.
* **Input is text, checked before it reaches PostgreSQL.** Invalid UTF-8 and
  malformed JSON are 400; NUL characters, lone surrogates and schema
  violations are 422 — never a 500.
* **Bounded documents.** A document over a size limit (bytes, estimated tokens) is
  413, over a shape limit (lines, characters on one line) 422, both
  ``document_over_limit`` naming the limit, its value and the document's
  (:mod:`pipeline.extraction.bounds`); checked before admission, so nothing is
  written — a replay of a request accepted under looser limits is refused too.
* **Nothing invisible where a person reads a name.** A file name or an option
  name (a key of ``options``) with a bidi control, zero-width or other invisible
  character (:mod:`pipeline.text_safety`) is 422 ``unsafe_text``, and nothing
  is written: ``invoice\\u202efdp.exe`` must not reach a screen as
  ``invoiceexe.pdf``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import asyncpg
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from pipeline.api.problems import ApiProblem
from pipeline.errors import AdmissionRejected
from pipeline.extraction import SIZE_LIMITS, DocumentLimits, over_limit
from pipeline.jobs import (
    Accepted,
    AcceptRequest,
    AdmissionCheck,
    DocumentIn,
    JobStore,
    accepted_from_row,
    replay_of,
    request_hash_of,
)
from pipeline.settings import Settings
from pipeline.states import JobState
from pipeline.tenants import ADMISSION_LOCK_NAMESPACE, Demand, TenantQuota, demand_for
from pipeline.text_safety import describe, first_invisible, safe_text_pattern

#: Printable ASCII without spaces, 1–200 characters.
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,200}$"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
_NO_NUL = r"^[^\x00]*$"


def _integral(value: Any) -> Any:
    """JSON has one number type: 9.0 is a valid JSON Schema integer, True is not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer as JSON Schema means it, for strict validation of parsed JSON.
JsonInt = Annotated[int, BeforeValidator(_integral)]

#: Called inside the accept transaction after the job and outbox rows are written
#: and before the commit. A documented test seam for crash injection: raising (or
#: killing the process) here must leave no job, event or document behind.
AcceptHook = Callable[[asyncpg.Connection, Accepted], Awaitable[None]]


class DocumentBody(BaseModel):
    """The OCR text of one document; its bytes decide its identity."""

    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Field(min_length=1, pattern=_NO_NUL)]
    content_type: Annotated[str, Field(pattern=r"^[a-z]+/[a-z0-9.+-]{1,80}$")] = "text/plain"
    filename: Annotated[str, Field(max_length=255)] | None = Field(
        None,
        description="Informational only: never part of the document's identity. No "
        "control, bidi, zero-width or other invisible characters (422 unsafe_text).",
        json_schema_extra={"pattern": safe_text_pattern()},
    )


class JobOptions(BaseModel):
    """What decides the result (hashed) and how the job is scheduled (not hashed)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: JsonInt = Field(1, ge=1, le=1000, description="Extraction schema version.")
    model_policy: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")] = "default"
    options: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Result-affecting options; part of the request hash.",
        json_schema_extra={"propertyNames": {"pattern": safe_text_pattern()}},
    )
    priority: JsonInt = Field(0, ge=-10, le=10, description="Higher runs first within the tenant.")
    deadline_seconds: float | None = Field(
        None, ge=60, le=7 * 86400, description="Job deadline from acceptance."
    )


class JobSubmission(JobOptions):
    """``POST /v1/extraction-jobs`` as JSON."""

    document: DocumentBody


class JobAccepted(BaseModel):
    """The acceptance receipt; the same body for the first request and its replays."""

    job_id: uuid.UUID
    state: JobState
    state_version: int
    idempotency_key: str
    deadline_at: datetime
    status_url: str
    events_url: str
    result_url: str


@dataclass(frozen=True)
class Receipt:
    accepted: Accepted
    idempotency_key: str
    generated_key: bool

    @property
    def created(self) -> bool:
        return self.accepted.created

    def body(self) -> JobAccepted:
        base = f"/v1/extraction-jobs/{self.accepted.job_id}"
        return JobAccepted(
            job_id=self.accepted.job_id,
            state=self.accepted.state,
            state_version=self.accepted.state_version,
            idempotency_key=self.idempotency_key,
            deadline_at=self.accepted.deadline_at,
            status_url=base,
            events_url=f"{base}/events",
            result_url=f"{base}/result",
        )


# ---------------------------------------------------------------- input parsing
def resolve_idempotency_key(header: str | None) -> tuple[str, bool]:
    """The key to use and whether the server generated it.

    Raises:
        ApiProblem: 400 for a key outside :data:`IDEMPOTENCY_KEY_PATTERN`.
    """
    if header is None:
        return f"srv-{uuid.uuid4()}", True
    if not _IDEMPOTENCY_KEY.fullmatch(header):
        raise ApiProblem(
            400,
            "Idempotency-Key must be 1-200 printable ASCII characters without spaces",
            reason="invalid_idempotency_key",
        )
    return header, False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_text(value: Any) -> None:
    """Reject NUL and lone surrogates anywhere in a parsed JSON value (iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            if "\x00" in item:
                raise ApiProblem(422, "NUL characters are not allowed", reason="nul_character")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise ApiProblem(
                    422, "lone surrogates are not valid text", reason="invalid_unicode"
                ) from None


def decode_text(raw: bytes, what: str) -> str:
    """Strict UTF-8, or 400."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiProblem(400, f"{what} is not valid UTF-8", reason="invalid_utf8") from None


def parse_json(raw: bytes, what: str = "request body") -> Any:
    """Strict JSON (no NaN/Infinity) with text checks; 400 or 422 on failure."""
    text = decode_text(raw, what)
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ApiProblem(400, f"{what} is not valid JSON", reason="malformed_json") from None
    _check_text(value)
    return value


_M = TypeVar("_M", bound=BaseModel)


def _validate(model: type[_M], value: Any, loc: str) -> _M:
    try:
        return model.model_validate(value, strict=True)
    except ValidationError as exc:
        errors = [{**e, "loc": (loc, *e["loc"])} for e in exc.errors(include_input=False)]
        raise RequestValidationError(errors) from None


def check_display_text(submission: JobSubmission) -> JobSubmission:
    """Refuse invisible characters in the names a person reads (file name, option keys).

    Option *keys* are names (the schema's ``propertyNames``); what an option holds,
    nested objects included, is a value, carried as given and escaped when shown.

    Raises:
        ApiProblem: 422 ``unsafe_text``, naming the field and the code point
            (never echoing the text itself).
    """
    found = [("a key of options", key) for key in submission.options]
    if submission.document.filename is not None:
        found.append(("document.filename", submission.document.filename))
    for where, text in found:
        char = first_invisible(text)
        if char is not None:
            raise ApiProblem(
                422,
                f"{where} contains an invisible or bidi control character ({describe(char)})",
                reason="unsafe_text",
            )
    return submission


def parse_json_submission(raw: bytes) -> JobSubmission:
    """``application/json`` body → :class:`JobSubmission`."""
    return check_display_text(_validate(JobSubmission, parse_json(raw), "body"))


def parse_multipart_submission(
    document: bytes, content_type: str | None, filename: str | None, metadata: str | None
) -> JobSubmission:
    """``multipart/form-data`` parts → :class:`JobSubmission`.

    ``document`` is the uploaded OCR text (UTF-8); ``metadata`` an optional JSON
    object with the :class:`JobOptions` fields.
    """
    text = decode_text(document, "the uploaded document")
    options = parse_json(metadata.encode("utf-8"), "metadata") if metadata else {}
    if not isinstance(options, dict):
        raise RequestValidationError(
            [{"loc": ("body", "metadata"), "msg": "must be a JSON object", "type": "dict_type"}]
        )
    doc: dict[str, Any] = {"text": text}
    if content_type:
        doc["content_type"] = content_type.split(";")[0].strip().lower()
    if filename:
        doc["filename"] = filename
    _check_text(doc)
    return check_display_text(_validate(JobSubmission, {**options, "document": doc}, "body"))


async def read_submission(request: Request, max_part_bytes: int) -> JobSubmission:
    """The submission from a JSON or multipart body; 415 for any other media type."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return parse_json_submission(await request.body())
    if media == "multipart/form-data":
        try:
            form = await request.form(max_files=2, max_fields=8, max_part_size=max_part_bytes)
        except StarletteHTTPException as exc:
            if exc.status_code == 413:
                raise
            raise ApiProblem(
                400, "malformed multipart body", reason="malformed_multipart"
            ) from None
        unknown = sorted(set(form.keys()) - {"document", "metadata"})
        if unknown:
            raise RequestValidationError(
                [
                    {"loc": ("body", name), "msg": "unknown form field", "type": "extra_forbidden"}
                    for name in unknown
                ]
            )
        document = form.get("document")
        metadata = form.get("metadata")
        if metadata is not None and not isinstance(metadata, str):
            raise RequestValidationError(
                [{"loc": ("body", "metadata"), "msg": "must be a text part", "type": "string_type"}]
            )
        if isinstance(document, UploadFile):
            raw = await document.read()
            return parse_multipart_submission(
                raw, document.content_type, document.filename, metadata
            )
        if isinstance(document, str):  # a plain form field instead of a file part
            return parse_multipart_submission(document.encode("utf-8"), None, None, metadata)
        raise RequestValidationError(
            [{"loc": ("body", "document"), "msg": "a document part is required", "type": "missing"}]
        )
    raise ApiProblem(
        415,
        "send application/json or multipart/form-data",
        reason="unsupported_media_type",
    )


def check_document_limits(text: str, limits: DocumentLimits) -> None:
    """Refuse a document over ``limits`` before anything is written.

    Raises:
        ApiProblem: 413 (bytes, estimated tokens) or 422 (lines, characters on one
            line), reason ``document_over_limit``, with ``limit``, ``allowed``,
            ``actual`` (and ``line``) as members.
    """
    refusal = over_limit(text, limits)
    if refusal is None:
        return
    raise ApiProblem(
        413 if refusal.limit in SIZE_LIMITS else 422,
        str(refusal),
        reason="document_over_limit",
        limit=refusal.limit,
        allowed=refusal.allowed,
        actual=refusal.actual,
        line=refusal.line,
    )


# ------------------------------------------------------------------ the service
class IntakeService:
    """Admission + durable acceptance in one transaction per request."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        store: JobStore,
        admission: TenantQuota,
        settings: Settings,
        *,
        accept_hook: AcceptHook | None = None,
    ) -> None:
        self.pool = pool
        self.store = store
        self.admission = admission
        self.settings = settings
        self.accept_hook = accept_hook
        self.limits = DocumentLimits.from_settings(settings)

    async def submit(
        self,
        tenant_id: uuid.UUID,
        submission: JobSubmission,
        idempotency_key: str | None,
        *,
        api_key_id: uuid.UUID | None = None,
    ) -> Receipt:
        """Admit and durably accept ``submission`` for ``tenant_id``.

        ``api_key_id``: the caller's key, checked again inside the transaction (in the
        read it runs anyway), so a key revoked or expired before the commit cannot
        get a job accepted even when the request was authenticated from the key cache.

        Raises:
            ApiProblem: 400 for a malformed Idempotency-Key; 401 for a key no longer
                active; 413/422 for a document over its limits.
            IdempotencyConflict: the key was used for a different request (409).
            AdmissionRejected: quota (429) or capacity (503); nothing written.
        """
        key, generated = resolve_idempotency_key(idempotency_key)
        check_document_limits(submission.document.text, self.limits)
        doc = DocumentIn(
            content=submission.document.text,
            content_type=submission.document.content_type,
            filename=submission.document.filename,
        )
        demand = demand_for(len(doc.raw), self.settings)
        req = AcceptRequest(
            tenant_id=tenant_id,
            idempotency_key=key,
            document=doc,
            schema_version=submission.schema_version,
            model_policy=submission.model_policy,
            options=dict(submission.options),
            priority=submission.priority,
            estimated_tokens=demand.tokens,
            deadline_seconds=submission.deadline_seconds,
        )
        async with self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds) as conn:
            capacity, check = await self.admission_check(conn, api_key_id, demand)
            if self.accept_hook is None:
                # One statement, its own transaction: lock, read, decide, write.
                row = await self.store.admit_and_accept(req, check, conn=conn)
                accepted = self._answer(row, req, demand, capacity)
            else:
                async with conn.transaction():
                    row = await self.store.admit_and_accept(req, check, conn=conn)
                    accepted = self._answer(row, req, demand, capacity)
                    if accepted.created:
                        await self.accept_hook(conn, accepted)
        return Receipt(accepted=accepted, idempotency_key=key, generated_key=generated)

    async def admission_check(
        self, conn: asyncpg.Connection, api_key_id: uuid.UUID | None, demand: Demand
    ) -> tuple[AdmissionRejected | None, AdmissionCheck]:
        """The capacity verdict (read on ``conn``) and what ``intake_accept`` decides with."""
        capacity = await self.admission.capacity_refusal(conn)
        return capacity, AdmissionCheck(
            lock_namespace=ADMISSION_LOCK_NAMESPACE,
            period=self.settings.spend_period,
            api_key_id=api_key_id,
            capacity_refused=capacity is not None,
            cost=demand.cost,
        )

    def _answer(
        self,
        row: asyncpg.Record,
        req: AcceptRequest,
        demand: Demand,
        capacity: AdmissionRejected | None,
    ) -> Accepted:
        """The receipt ``intake_accept``'s row stands for, or the refusal it names.

        Raises:
            ApiProblem: 401, the caller's key was revoked or has expired.
            IdempotencyConflict: a known key with a different request (409).
            AdmissionRejected: capacity (503) or a quota (429).
        """
        outcome = row["outcome"]
        if outcome == "accepted":
            return accepted_from_row(row, created=True)
        if outcome == "known_key":
            # The original receipt for the same request hash, 409 for another; a
            # replay is never refused by admission: that work is already accepted.
            return replay_of(row, request_hash_of(req))
        if outcome == "key_inactive":
            _check_key_state(row["key_state"])
        if outcome == "capacity" and capacity is not None:
            raise capacity
        raise self.admission.quota_refusal(outcome, row, demand)


def _check_key_state(state: str | None) -> None:
    """401 for a caller's key the accept transaction found revoked or expired."""
    if state is None or state == "active":
        return
    if state == "expired":
        raise ApiProblem(
            401,
            "this API key has expired; use its replacement",
            reason="key_expired",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    raise ApiProblem(
        401,
        "a valid API key is required",
        reason="unauthorized",
        headers={"WWW-Authenticate": "Bearer"},
    )
