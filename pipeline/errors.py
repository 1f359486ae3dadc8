"""Every error Fenceline raises on purpose, in one place.

Hierarchy::

    FencelineError
    ├── RetryableError            an attempt failed but another attempt may succeed
    │   ├── ProviderRateLimited   429 / shared cooldown; carries retry_after
    │   ├── ProviderUnavailable   5xx, connection errors
    │   ├── ProviderTimeout       the attempt deadline fired (outcome uncertain: still billable)
    │   ├── MalformedOutput       unparseable or schema-invalid model output
    │   ├── AdmissionDeferred     no admission budget in time; no call was made
    │   ├── DocumentStoreUnavailable  the object store did not answer; the bytes may be there
    │   └── OcrUnavailable    this worker cannot run tesseract (not installed, a language missing)
    ├── TerminalError             no further attempt can succeed
    │   ├── ContextTooLong        the prompt fits no engine pool
    │   ├── DeadlineExceeded      the job's deadline leaves no room for an attempt
    │   ├── InvalidOption         a kept request option no attempt can honour
    │   ├── ReservationTooLarge   one attempt's token reservation exceeds an admission limit
    │   ├── DocumentOverLimit     the document is over a size or shape limit; names it
    │   ├── DocumentMissing       no object behind a document reference (or that version)
    │   ├── DocumentChanged       the bytes behind a reference no longer have its SHA-256
    │   ├── DocumentRefused       bytes no stage can read; carries a reason
    │   │   └── NoTextLayer       a PDF without text on any page (OCR's work, not the reader's)
    │   ├── OcrPageTimeout        tesseract ran past the time limit of one page
    │   ├── DataKeyShredded       content sealed under a tenant data key that was destroyed
    │   ├── DataKeyUnavailable    content sealed under a key this process cannot unwrap
    │   └── ExtractionBudgetExceeded  reading the document spent its CPU budget
    ├── OwnershipError            a conditional write matched zero rows
    │   ├── LeaseLost             fence moved on, lease expired or state changed
    │   └── VersionConflict       an invoice version another decision superseded first
    ├── IdempotencyConflict       same tenant + key, different request hash
    ├── AdmissionRejected         quota (429) or capacity (503) refusal, with retry_after
    ├── NotFound                  missing or not visible to this tenant (indistinguishable)
    ├── KeyExpired                an API key presented after its expiry (401 key_expired)
    ├── BrokerUnavailable         RabbitMQ unreachable or the channel closed; nothing was sent
    ├── PoisonMessage             a broker message no consumer can act on; carries a reason
    ├── ReplayRefused             a dead letter whose job can no longer run again
    ├── RedriveRefused            a job that may not be re-driven (not failed, delivered, reviewed)
    ├── CancelRefused             a job that may not be cancelled: it settled first
    ├── DeliveryRefused           a resend (in flight, body gone, …) or test event refused
    ├── AcknowledgementRefused    an ERP acknowledgement not taken: bad signature, conflict…
    └── EgressBlocked             a webhook URL or its resolved address is not allowed (SSRF guard)

The retryable / terminal split drives :mod:`pipeline.retry`: the job store
persists a retry for a :class:`RetryableError` and fails the job for a
:class:`TerminalError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.usage import ReportedUsage


class FencelineError(Exception):
    """Root of every deliberate Fenceline error."""

    #: Short machine-readable class stored on the job and its attempt row.
    error_class: str = "internal"
    #: What the provider reported for a call that still failed (a truncated or
    #: unparseable answer): the work was done and billed, so admission charges it
    #: and the attempt row records it. None where nothing was reported.
    usage: ReportedUsage | None = None
    #: The engine (e.g. ``vllm:short``) that produced ``usage``, where known.
    engine: str | None = None


class RetryableError(FencelineError):
    """An attempt failed in a way another attempt may fix.

    Attributes:
        retry_after: the provider's delay hint in seconds, if it gave one.
        uncertain: True when the provider may have done (and billed) the work.
    """

    error_class = "retryable"

    def __init__(
        self, message: str, *, retry_after: float | None = None, uncertain: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.uncertain = uncertain


class ProviderRateLimited(RetryableError):
    error_class = "rate_limited"


class ProviderUnavailable(RetryableError):
    error_class = "provider_unavailable"


class ProviderTimeout(RetryableError):
    error_class = "timeout"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after, uncertain=True)


class MalformedOutput(RetryableError):
    error_class = "malformed_output"
    #: The model's text as received, where the engine had it (for the accuracy
    #: report's before-the-cap scoring; never parsed into a result).
    text: str | None = None


class AdmissionDeferred(RetryableError):
    """The admission budget had no room within the attempt's wait; nothing was called."""

    error_class = "admission_deferred"


class TerminalError(FencelineError):
    """No further attempt can succeed; the job becomes FAILED_TERMINAL."""

    error_class = "terminal"


class ContextTooLong(TerminalError):
    error_class = "context_too_long"


class DeadlineExceeded(TerminalError):
    error_class = "deadline_exceeded"


class InvalidOption(TerminalError):
    """A request option kept with the job that no attempt can honour (one accepted
    before the intake checked it): the job fails by name, the option is never ignored."""

    error_class = "invalid_option"


class ReservationTooLarge(TerminalError):
    """One attempt reserves more tokens than the admission scope's TPM or
    concurrent-token budget: no amount of waiting can admit it."""

    error_class = "reservation_too_large"


class DocumentOverLimit(TerminalError):
    """A document over one of its limits (:class:`pipeline.extraction.bounds.DocumentLimits`):
    the intake refuses it (413 for size, 422 for shape); a driver that finds one accepted
    before the limit existed fails its job with this, never starts reading it.

    Attributes:
        limit: which limit (``document_bytes``, ``document_tokens``, ``lines``,
            ``line_chars``).
        allowed: the limit's value.
        actual: the document's value.
        line: the first line over ``line_chars`` (1-based), else None.
    """

    error_class = "document_over_limit"

    def __init__(self, limit: str, *, allowed: int, actual: int, line: int | None = None) -> None:
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"document over a limit: {limit} is {actual}{where}, at most {allowed}")
        self.limit = limit
        self.allowed = allowed
        self.actual = actual
        self.line = line


class ExtractionBudgetExceeded(TerminalError):
    """Preparing a call for a document, or reading an answer against it, spent its CPU
    budget: the last guard where a document within every limit still costs too much.
    The same document would spend it again, so no further attempt is made."""

    error_class = "extraction_budget_exceeded"


class DocumentStoreUnavailable(RetryableError):
    """The object store did not answer (connection, timeout, 5xx): the document may be
    there, so another attempt may read it."""

    error_class = "document_store_unavailable"


class DocumentMissing(TerminalError):
    """No object behind a document reference: never stored, deleted, a version the
    store does not hold, a reference of a form the store cannot hold, or one the
    store's credentials may not read (S3 answers 403 for a missing key without
    ``ListBucket``; the two are not told apart)."""

    error_class = "document_missing"


class DocumentChanged(TerminalError):
    """The bytes read for a reference do not have the SHA-256 it was accepted with.

    A reference names one immutable version; different bytes behind it mean the
    object was replaced or damaged, and no attempt may read the new bytes as the
    accepted document.

    Attributes:
        expected: the reference's SHA-256 (hex).
        actual: the digest of what was read, or None where the store refused the
            read because the version no longer matches (an ETag precondition).
    """

    error_class = "document_changed"

    def __init__(self, uri: str, *, expected: str, actual: str | None) -> None:
        found = f"bytes with sha256 {actual}" if actual else "another version"
        super().__init__(f"document changed: {uri} holds {found}, not sha256 {expected}")
        self.uri = uri
        self.expected = expected
        self.actual = actual


class DocumentRefused(TerminalError):
    """Bytes no document stage can read, named by ``reason`` (also the error class):
    ``empty_document``, ``unsupported_media_type``, ``encrypted_document``,
    ``unreadable_document``, ``no_text_layer``, ``image_too_large`` (more pixels on a
    page than ``max_document_page_pixels``, refused from the header before decoding).
    """

    error_class = "document_refused"

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.error_class = reason


class NoTextLayer(DocumentRefused):
    """A readable PDF with no text on any page: a scan, for OCR to read.

    Attributes:
        page_count: the document's pages.
    """

    def __init__(self, page_count: int) -> None:
        super().__init__("no_text_layer", f"no text on any of {page_count} pages")
        self.page_count = page_count


class OcrUnavailable(RetryableError):
    """This worker cannot run OCR: no ``tesseract`` binary (``make ocr-tools`` installs
    it) or none of the configured languages installed. Retryable: the document is fine,
    and another worker, or this one once repaired, can read it."""

    error_class = "ocr_unavailable"


class DataKeyShredded(TerminalError):
    """Content sealed under a tenant data key that was shredded (crypto-shredding,
    pipeline/data_keys.py): it can never be read again, by anyone.

    Attributes:
        tenant_id: the tenant (as text).
        version: the data key's version.
    """

    error_class = "data_key_shredded"

    def __init__(self, tenant_id: str, version: int) -> None:
        super().__init__(
            f"shredded: tenant {tenant_id}'s data key version {version} was destroyed;"
            " the content sealed under it is unreadable"
        )
        self.tenant_id = tenant_id
        self.version = version


class DataKeyUnavailable(TerminalError):
    """Sealed content no process can open: no such data key, or the sealed bytes (or
    the wrapped key) do not authenticate (moved from another row or tenant, or altered).
    Terminal: another attempt reads the same bytes."""

    error_class = "data_key_unavailable"


class DataKeyNotHere(RetryableError):
    """Sealed content this process cannot open now: no key-encryption key is configured
    here, the KEK the data key names is not among this process's, or the tenant's key
    changed while it was read. Retryable: a worker configured with the KEK (or this one,
    once configured) can read it; the content itself is fine."""

    error_class = "data_key_not_here"


class OcrPageTimeout(TerminalError):
    """Tesseract did not finish one page within ``ocr_page_seconds``.

    Terminal, like :class:`ExtractionBudgetExceeded`: recognition is deterministic, so
    the same page at the same settings would spend the same time again, and every
    retry would hold an OCR worker for the whole limit. The limit is set far above a
    normal page (about 2 s on one core) so that only a hostile or absurd page meets it.

    Attributes:
        page: the page (1-based).
        seconds: the limit.
    """

    error_class = "ocr_page_timeout"

    def __init__(self, page: int, *, seconds: float) -> None:
        super().__init__(f"OCR of page {page} took more than {seconds:g} s")
        self.page = page
        self.seconds = seconds


class DocumentReadTimeout(TerminalError):
    """Reading one document (text layer, rendering and OCR of all its pages) took
    longer than ``document_read_seconds``.

    Terminal for the same reason as :class:`OcrPageTimeout`: the same file at the
    same settings reads as slowly again. The per-page limit bounds one hostile page;
    this one bounds a document of many slow pages, each just inside the page limit.

    Attributes:
        seconds: the limit.
        pages_read: pages finished when the limit passed (where known).
    """

    error_class = "document_read_timeout"

    def __init__(self, *, seconds: float, pages_read: int | None = None) -> None:
        done = f" ({pages_read} page(s) read)" if pages_read is not None else ""
        super().__init__(f"reading the document took more than {seconds:g} s{done}")
        self.seconds = seconds
        self.pages_read = pages_read


class OwnershipError(FencelineError):
    """A write conditional on state, fence and lease matched no row."""

    error_class = "ownership"


class LeaseLost(OwnershipError):
    """The caller no longer owns the job: its fence is stale or its lease expired."""

    error_class = "lease_lost"


class VersionConflict(OwnershipError):
    """An invoice version to supersede is no longer the current one: another version
    of the invoice was decided first (pipeline/jobs/versions.py)."""

    error_class = "version_conflict"


class IdempotencyConflict(FencelineError):
    """The idempotency key was already used by this tenant for a different request."""

    error_class = "idempotency_conflict"

    def __init__(self, message: str, *, existing_job_id: str) -> None:
        super().__init__(message)
        self.existing_job_id = existing_job_id


class AdmissionRejected(FencelineError):
    """Work refused before acceptance: nothing was written.

    ``status`` is 429 for a tenant quota and 503 for exhausted system capacity.
    """

    error_class = "admission_rejected"

    def __init__(self, message: str, *, status: int, reason: str, retry_after: float) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.retry_after = retry_after


class NotFound(FencelineError):
    """Missing, or owned by another tenant: the two are deliberately indistinguishable."""

    error_class = "not_found"


class KeyExpired(FencelineError):
    """A known, unrevoked API key presented after its ``expires_at``.

    Told apart from an unknown key (401 ``key_expired``, not ``unauthorized``)
    so that a client knows to fetch its rotated key; only the holder of the
    key's secret can learn that it expired.
    """

    error_class = "key_expired"


class BrokerUnavailable(FencelineError):
    """The broker could not be reached or the channel closed before a publish.

    Outbox events stay unpublished and are claimed again later; nothing is lost
    because the outbox row, not the broker, is the durable record.
    """

    error_class = "broker_unavailable"


class PoisonMessage(FencelineError):
    """A broker message that no consumer can act on (not JSON, missing fields,
    unknown version). It goes to the DLQ after one delivery with ``reason``."""

    error_class = "poison_message"

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class ReplayRefused(FencelineError):
    """A dead letter cannot be replayed: it names no job, or its job is no longer
    waiting to run (a terminal decision stands; replay never resets a job)."""

    error_class = "replay_refused"


class RedriveRefused(FencelineError):
    """A job cannot be re-driven: it is not FAILED_TERMINAL, it already has a
    delivery (its result may be in the ERP), or a reviewer rejected its result;
    or the state_version the operator saw moved on."""

    error_class = "redrive_refused"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class DeliveryRefused(FencelineError):
    """A tenant's delivery action refused, nothing sent or written. A resend: the
    delivery is in flight, its body was erased with its job or removed by retention,
    its job's cancellation stopped it, or its endpoint is disabled (``in_flight``,
    ``body_erased``, ``body_removed``, ``job_cancelled``, ``endpoint_disabled``). A
    test event: the endpoint is disabled or not verified (``not_verified``).
    ``reason`` names which; ``state`` is the delivery's (or endpoint's) state."""

    error_class = "delivery_refused"

    def __init__(self, message: str, *, reason: str, state: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.state = state


class CancelRefused(FencelineError):
    """A job cannot be cancelled: it settled (SUCCEEDED, REVIEW_REQUIRED or
    FAILED_TERMINAL) before the cancellation reached it. ``state`` is the state it
    is in; ``deliveries`` its deliveries as ``{"id", "state"}`` (what the ERP may
    already have: a cancellation recalls nothing)."""

    error_class = "cancel_refused"

    def __init__(
        self, message: str, *, state: str, deliveries: list[dict[str, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.state = state
        self.deliveries = deliveries or []


class AcknowledgementRefused(FencelineError):
    """An ERP's acknowledgement of a delivery was not taken. ``status`` is the HTTP
    answer: 401 (signature, replay window, unknown delivery: indistinguishable), 400
    (not an acknowledgement of this delivery), 409 (``reason``: ``message_conflict``,
    a message id reused with another body; ``conflicting_acknowledgement``, another
    outcome than the one recorded; ``not_expected``; ``not_sent``)."""

    error_class = "acknowledgement_refused"

    def __init__(self, message: str, *, status: int, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class EgressBlocked(FencelineError):
    """The egress guard refused a destination: nothing was sent.

    ``reason`` is a short machine-readable code (``loopback``, ``private``,
    ``userinfo``, ``scheme``, ``numeric_host``...) stored on the delivery attempt.
    """

    error_class = "egress_blocked"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
