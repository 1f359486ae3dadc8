"""A job submission: the request models and how a body and its headers become one.

``POST /v1/extraction-jobs`` arrives as JSON or as ``multipart/form-data``; both
end as one :class:`Submission`, checked before anything reaches PostgreSQL
(:mod:`pipeline.api.intake` then admits and accepts it). Its document is one of three:

* **a pasted text** (JSON ``document.text``, or an uploaded file whose bytes are UTF-8
  text): kept in the documents row, as always;
* **an uploaded file** (:class:`FileUpload`): its media type sniffed from its bytes,
  never from the file name or the part's header (PDF, PNG, JPEG, TIFF, XML; anything
  else is 415 ``unsupported_media_type``; over ``max_document_file_bytes`` is 413);
* **a reference** (JSON ``document.uri``, :class:`DocumentReferenceBody`) to an object
  in the configured document store: ``s3://`` or ``fenceline-store://`` only, so no
  URL from a payload is ever fetched.

* **Text is checked.** Malformed JSON is 400; NUL characters, lone surrogates and
  schema violations are 422 — never a 500.
* **Numbers are read exactly, then bounded.** A JSON number with a fraction or an
  exponent is read as a :class:`~decimal.Decimal` and kept only if a float holds it
  (``1e400`` would become infinity, which no JSON encoder writes back, and
  ``1e-400`` would silently become 0): otherwise 422 ``number_out_of_range``.
* **Only known options.** An ``options`` name not in
  :data:`pipeline.invoice.SUPPORTED_OPTIONS` is 422 ``unknown_option``, naming it
  and the supported ones (never a 202 that ignores it); a value or ``model_policy``
  this deployment cannot honour is refused by :mod:`pipeline.api.request_options`.
* **Nothing invisible where a person reads a name.** A file name or an option
  name (a key of ``options``) with a bidi control, zero-width or other invisible
  character (:mod:`pipeline.text_safety`) is 422 ``unsafe_text``.
* **JSON integers as JSON Schema means them**: 9.0 is one, ``true`` is not
  (:data:`JsonInt`, shared by every strict request model of the API).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
)
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from pipeline.api.problems import ApiProblem, over_limit_problem, refuse_unsafe_text
from pipeline.documents import MediaType, sniff_media_type
from pipeline.errors import DocumentOverLimit, DocumentRefused
from pipeline.invoice import SUPPORTED_OPTIONS, SUPPORTED_SCHEMA_VERSIONS
from pipeline.text_safety import safe_text_pattern

#: Printable ASCII without spaces, 1–200 characters.
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]{1,200}$"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
_NO_NUL = r"^[^\x00]*$"
#: The schemes of the document stores: a reference names an object in the configured
#: store, never a URL to fetch (an ``https://`` reference is a 422, not a request).
REFERENCE_URI_PATTERN = (
    r"^(s3://[a-z0-9][a-z0-9.-]{1,62}/[^\s]{1,1000}|fenceline-store://[0-9a-f]{64})$"
)


def _integral(value: Any) -> Any:
    """JSON has one number type: 9.0 is a valid JSON Schema integer, True is not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer as JSON Schema means it, for strict validation of parsed JSON.
JsonInt = Annotated[int, BeforeValidator(_integral)]


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


class DocumentReferenceBody(BaseModel):
    """A document already in the configured store, named by its object, not its bytes.

    The intake heads the object (and reads it once to check its digest and media
    type); an object that is not there, not of this store, or not the digest given is
    422 and nothing is written.
    """

    model_config = ConfigDict(extra="forbid")

    uri: Annotated[str, Field(pattern=REFERENCE_URI_PATTERN)] = Field(
        description="s3://bucket/key (the configured S3 store) or fenceline-store://<sha256> "
        "(the embedded store). No other scheme: nothing is fetched from a URL."
    )
    version: Annotated[str, Field(min_length=1, max_length=1024)] | None = Field(
        None,
        description="The object version to pin (an S3 version id or quoted ETag); "
        "the current one when absent, resolved once at intake.",
    )
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = Field(
        None, description="The digest the bytes must have (64 lowercase hex); checked at intake."
    )
    filename: Annotated[str, Field(max_length=255)] | None = Field(
        None,
        description="Informational only: never part of the document's identity.",
        json_schema_extra={"pattern": safe_text_pattern()},
    )


class JobOptions(BaseModel):
    """What decides the result (hashed) and how the job is scheduled (not hashed)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: JsonInt = Field(
        1,
        description="Extraction schema version; one of "
        f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))} (another is refused with 422). "
        "1: the invoice without contract v3's fields (an e-invoice stating a v3 value that "
        "changes what is payable or who is paid goes to review with contract_v3_required; "
        "one that is merely additional is left out); 3: contract v3 (fenceline.extraction/3: "
        "allowances and charges, amount due, credit notes, tax number...).",
        json_schema_extra={"enum": list(SUPPORTED_SCHEMA_VERSIONS)},
    )
    model_policy: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")] = Field(
        "default",
        description="The pool the attempt runs on: default (the smallest pool whose "
        "context fits the document) or a configured pool's name (FENCELINE_MODEL_POOLS); "
        "another is refused with 422 unknown_model_policy naming the configured ones.",
    )
    options: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Result-affecting options; part of the request hash. Known names: "
        + "; ".join(f"{k}: {v}" for k, v in SUPPORTED_OPTIONS.items())
        + ". Any other name is refused with 422 unknown_option.",
        json_schema_extra={
            "propertyNames": {"pattern": safe_text_pattern(), "enum": list(SUPPORTED_OPTIONS)}
        },
    )
    priority: JsonInt = Field(0, ge=-10, le=10, description="Higher runs first within the tenant.")
    deadline_seconds: float | None = Field(
        None, ge=60, le=7 * 86400, description="Job deadline from acceptance."
    )

    @field_validator("schema_version")
    @classmethod
    def _supported_schema(cls, value: int) -> int:
        """A version no contract implements is refused, never served with the default."""
        if value not in SUPPORTED_SCHEMA_VERSIONS:
            supported = ", ".join(map(str, SUPPORTED_SCHEMA_VERSIONS))
            raise ValueError(f"schema_version is not supported; supported versions: {supported}")
        return value


class JobSubmission(JobOptions):
    """``POST /v1/extraction-jobs`` as JSON: a pasted text or a stored object's reference."""

    document: DocumentBody | DocumentReferenceBody


@dataclass(frozen=True)
class FileUpload:
    """An uploaded file that is not text: its bytes and the media type they show."""

    data: bytes
    media_type: MediaType
    filename: str | None


@dataclass(frozen=True)
class Submission:
    """One request, as the intake accepts it: its options and its document."""

    options: JobOptions
    document: DocumentBody | DocumentReferenceBody | FileUpload


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


def _bounded_number(text: str) -> float:
    """A JSON number with a fraction or an exponent, read exactly and then kept only
    where a float holds it: finite, and not a nonzero value that rounds to zero.

    Raises:
        ApiProblem: 422 ``number_out_of_range`` (it passes through ``json.loads``,
            which is no ``ValueError``).
    """
    exact = Decimal(text)
    value = float(exact)
    if not math.isfinite(value) or (value == 0 and exact != 0):
        raise ApiProblem(
            422, "a number is outside the range a float holds", reason="number_out_of_range"
        )
    return value


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
    """Strict JSON (no NaN/Infinity, numbers within a float's range) with text checks;
    400 or 422 on failure."""
    text = decode_text(raw, what)
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_bounded_number)
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


def check_display_text(options: JobOptions, filename: str | None) -> None:
    """Refuse invisible characters in the names a person reads (file name, option keys).

    Option *keys* are names (the schema's ``propertyNames``); what an option holds,
    nested objects included, is a value, carried as given and escaped when shown.

    Raises:
        ApiProblem: 422 ``unsafe_text``, naming the field and the code point
            (never echoing the text itself).
    """
    for key in options.options:
        refuse_unsafe_text("a key of options", key)
    refuse_unsafe_text("document.filename", filename)


def refuse_unknown_options(options: JobOptions) -> None:
    """An option the system does not know is refused, never stored and ignored.

    Runs after :func:`check_display_text`, so a name it echoes is visible text.

    Raises:
        ApiProblem: 422 ``unknown_option`` naming the unknown names and the known ones.
    """
    unknown = sorted(k for k in options.options if k not in SUPPORTED_OPTIONS)
    if not unknown:
        return
    names = [name if len(name) <= 64 else name[:64] + "…" for name in unknown[:10]]
    supported = ", ".join(SUPPORTED_OPTIONS)
    raise ApiProblem(
        422,
        f"unknown option(s) {', '.join(map(repr, names))}; supported options: {supported}",
        reason="unknown_option",
        errors=[
            {
                "loc": ["body", "options", name],
                "msg": f"unknown option; supported options: {supported}",
                "type": "unknown_option",
            }
            for name in names
        ],
    )


def parse_json_submission(raw: bytes) -> Submission:
    """``application/json`` body → :class:`Submission` (a pasted text or a reference)."""
    submission = _validate(JobSubmission, parse_json(raw), "body")
    check_display_text(submission, submission.document.filename)
    refuse_unknown_options(submission)
    return Submission(submission, submission.document)


def sniff_upload(document: bytes, max_file_bytes: int) -> MediaType | None:
    """The media type of an uploaded file from its bytes; None for UTF-8 text.

    A file that decodes as UTF-8 is text, as it always was (the text checks then
    apply: a NUL is 422), unless its bytes start as a PDF or an image or read as XML.

    Raises:
        ApiProblem: 413 ``document_over_limit`` over ``max_file_bytes``; 415
            ``unsupported_media_type`` for bytes of no supported type; 422
            ``empty_document`` for no bytes.
    """
    try:
        media = sniff_media_type(document, max_bytes=max_file_bytes)
    except DocumentOverLimit as exc:
        raise over_limit_problem(exc) from None
    except DocumentRefused as exc:
        if exc.reason == "empty_document":
            raise ApiProblem(
                422, "the uploaded document is empty", reason="empty_document"
            ) from None
        try:
            document.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiProblem(
                415,
                "the uploaded file is not PDF, PNG, JPEG, TIFF, XML or UTF-8 text "
                "(the type is read from its bytes, not its name or header)",
                reason="unsupported_media_type",
            ) from None
        return None  # text with control characters: the text checks decide
    return None if media is MediaType.TEXT else media


def parse_multipart_submission(
    document: bytes,
    content_type: str | None,
    filename: str | None,
    metadata: str | None,
    *,
    max_file_bytes: int,
) -> Submission:
    """``multipart/form-data`` parts → :class:`Submission`.

    ``document`` is the uploaded file: UTF-8 text becomes a pasted text
    (``text/plain``, whatever the part's ``content_type`` says), any other supported type a
    :class:`FileUpload`; ``metadata`` an optional JSON object with the
    :class:`JobOptions` fields.
    """
    media = sniff_upload(document, max_file_bytes)
    options = parse_json(metadata.encode("utf-8"), "metadata") if metadata else {}
    if not isinstance(options, dict):
        raise RequestValidationError(
            [{"loc": ("body", "metadata"), "msg": "must be a JSON object", "type": "dict_type"}]
        )
    if media is not None:
        if filename is not None:
            _check_text(filename)
        job_options = _validate(JobOptions, options, "body")
        check_display_text(job_options, filename or None)
        refuse_unknown_options(job_options)
        return Submission(job_options, FileUpload(document, media, filename or None))
    del content_type  # the part's header says what the client thinks; the bytes decide
    text = decode_text(document, "the uploaded document")
    doc: dict[str, Any] = {"text": text}
    if filename:
        doc["filename"] = filename
    _check_text(doc)
    submission = _validate(JobSubmission, {**options, "document": doc}, "body")
    check_display_text(submission, submission.document.filename)
    refuse_unknown_options(submission)
    return Submission(submission, submission.document)


async def read_submission(request: Request, max_part_bytes: int, max_file_bytes: int) -> Submission:
    """The submission from a JSON or multipart body; 415 for any other media type.

    ``max_part_bytes`` bounds the text parts, ``max_file_bytes`` the uploaded file
    (the body's own limit, :class:`~pipeline.api.body_limit.BodyLimitMiddleware`, is
    above it for uploads)."""
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
                raw,
                document.content_type,
                document.filename,
                metadata,
                max_file_bytes=max_file_bytes,
            )
        if isinstance(document, str):  # a plain form field instead of a file part
            return parse_multipart_submission(
                document.encode("utf-8"), None, None, metadata, max_file_bytes=max_file_bytes
            )
        raise RequestValidationError(
            [{"loc": ("body", "document"), "msg": "a document part is required", "type": "missing"}]
        )
    raise ApiProblem(
        415,
        "send application/json or multipart/form-data",
        reason="unsupported_media_type",
    )
