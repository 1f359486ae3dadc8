"""One settings object for the whole system, read from ``FENCELINE_*`` variables.

Nothing reads the environment at import time: build a :class:`Settings` at
start-up and pass it down.
"""

from __future__ import annotations

import ipaddress
import json
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_core import to_jsonable_python
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pipeline.pricing import ModelPrice, Prices


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FENCELINE_", extra="ignore")

    database_url: str = "postgresql://postgres@127.0.0.1:5432/fenceline"
    #: No broker when unset: the durable scheduler (LISTEN/NOTIFY + scan) finds work.
    amqp_url: str | None = None
    #: Connections the intake opens at start (and keeps); ``fenceline up`` and the
    #: KubeRay ConfigMap open the whole pool (``db_pool_max``).
    db_pool_min: int = 1
    db_pool_max: int = 10

    # Leases: lease > attempt timeout + commit margin; heartbeats well inside it.
    lease_seconds: float = Field(90.0, gt=0)
    heartbeat_seconds: float = Field(30.0, gt=0)
    attempt_timeout_seconds: float = Field(45.0, gt=0)

    # Retries (spec section 4): full jitter, capped, persisted.
    max_attempts: int = Field(5, ge=1)
    retry_base_seconds: float = Field(2.0, gt=0)
    retry_cap_seconds: float = Field(60.0, gt=0)
    #: Time a next attempt needs (attempt timeout + commit margin) before the deadline.
    next_attempt_margin_seconds: float = Field(50.0, ge=0)
    #: A provider Retry-After that leaves no room before the deadline: ``terminal``
    #: fails the job now (provider_delay_beyond_deadline); ``defer`` schedules it at
    #: the provider's time anyway (never sooner) and the deadline decides (the
    #: reaper fails it with deadline_exceeded if that time comes too late).
    retry_beyond_deadline: Literal["terminal", "defer"] = "terminal"
    default_deadline_seconds: float = Field(3600.0, gt=0)

    reaper_interval_seconds: float = Field(5.0, gt=0)
    scan_interval_seconds: float = Field(2.0, gt=0)

    # Driver autoscaling (pipeline.worker.scaling; docs/kuberay.md "Autoscaling").
    #: Let the runtime supervisor add and drain task drivers; off: a fixed count.
    driver_autoscaling: bool = True
    driver_min: int = Field(1, ge=1)
    #: None: the runtime's ``drivers`` (enough leases to fill every engine slot).
    driver_max: int | None = Field(None, ge=1)
    #: Oldest runnable job age that adds drivers, and the (much lower) age under
    #: which the backlog counts as drained: the gap is the hysteresis.
    driver_scale_up_age_seconds: float = Field(10.0, gt=0)
    driver_scale_down_age_seconds: float = Field(1.0, ge=0)
    #: How long the backlog must stay drained before drivers are drained away.
    driver_scale_down_idle_seconds: float = Field(30.0, ge=0)
    #: Least gap between two changes of the driver count.
    driver_scale_cooldown_seconds: float = Field(15.0, ge=0)
    #: Free share of the admission budget a scale-up needs (a full budget only queues).
    driver_scale_min_headroom: float = Field(0.05, ge=0, le=1)
    #: How often the autoscaler looks at the backlog.
    driver_scale_interval_seconds: float = Field(2.0, gt=0)
    #: Grace a drained driver's attempts get before their leases are released.
    driver_drain_grace_seconds: float = Field(20.0, ge=0)

    # Validation (issue 7). Where a job goes when every attempt returned output
    # that is not a schema-valid extraction: ``terminal`` (FAILED_TERMINAL) or
    # ``review`` (REVIEW_REQUIRED with the raw output; a reviewer may only reject it).
    malformed_exhausted_state: Literal["terminal", "review"] = "terminal"
    #: The extraction contract new attempts use (``pipeline.extraction.extractor.CONTRACTS``):
    #: v2 (printed values and cited lines, grounded by the system) or v1 (the model
    #: gives offsets and quotes; kept for side-by-side measurement).
    extraction_contract: Literal["fenceline.extraction/2", "fenceline.extraction/1"] = (
        "fenceline.extraction/2"
    )
    #: How long a driver reuses a tenant's suppliers and permitted currencies
    #: before reading them again (0 = read for every attempt).
    master_data_ttl_seconds: float = Field(30.0, ge=0)

    # Intake API (issue 3): request limits, admission bounds and status streams.
    #: Request bodies above this get 413 before they are buffered.
    max_body_bytes: int = Field(1 << 20, gt=0)
    #: A refused (413) body is read and discarded up to this many bytes in all, so a
    #: client still uploading receives the 413 instead of a reset connection; past
    #: it (or past ``body_drain_seconds``) the connection is closed unread.
    max_body_drain_bytes: int = Field(8 << 20, ge=0)
    body_drain_seconds: float = Field(10.0, gt=0)
    #: The HTTP server's own bounds (``pipeline.api.server``, docs/intake.md "Limits at
    #: the HTTP server"): the request line (414 past it), the request line and headers
    #: together (431), how many headers (431), how long the head may take to arrive from
    #: the connection's (or request's) first byte (408), how long a body may go without
    #: a byte while the app waits for it (connection closed), and how long an idle
    #: keep-alive connection stays open.
    http_max_request_line_bytes: int = Field(8 << 10, gt=0)
    http_max_header_bytes: int = Field(16 << 10, gt=0)
    http_max_headers: int = Field(100, gt=0)
    http_header_timeout_seconds: float = Field(10.0, gt=0)
    http_body_idle_seconds: float = Field(10.0, gt=0)
    http_keep_alive_seconds: int = Field(5, gt=0)
    #: Documents (``pipeline.extraction.bounds``, docs/intake.md "Document limits"): the
    #: intake refuses one over a size limit (bytes, estimated tokens) with 413 and one
    #: over a shape limit (lines, characters on one line) with 422, naming the limit and
    #: the document's value; a driver fails a job whose document is over one
    #: (``document_over_limit``, terminal) before reading it. Every generated invoice
    #: (up to 200 items: 458 lines, 127 characters a line, 21 KB) is far inside them.
    max_document_bytes: int = Field(256 * 1024, gt=0)
    max_document_tokens: int = Field(65_536, gt=0)
    max_document_lines: int = Field(10_000, gt=0)
    max_line_chars: int = Field(4_000, gt=0)
    #: Document files (issue 43, ``pipeline.documents``): uploaded bytes over this are
    #: refused before they are sniffed or stored; a PDF of more pages is not read.
    max_document_file_bytes: int = Field(20 << 20, gt=0)
    max_document_pages: int = Field(200, gt=0)
    #: Pixels on one page image (a scan, a photo, a TIFF frame, a rendered PDF page),
    #: checked from the header before decoding (decompression bombs): about A4 at 600 dpi.
    max_document_page_pixels: int = Field(40_000_000, gt=0)
    #: OCR (``pipeline.documents.ocr``, Debian's tesseract: ``make ocr-tools``): the
    #: languages tried, ``+``-joined, limited to those installed (``tesseract --list-langs``).
    ocr_languages: str = "eng+deu+fra+ita+spa+nld+pol+swe+por+dan"
    #: The resolution pages are read at: PDF pages are rendered at it, images declaring
    #: less (or, with no declaration, narrower than A4 at it) are upscaled, at most 4x.
    ocr_dpi: int = Field(300, ge=72, le=600)
    #: Wall-clock seconds tesseract may spend on one page before the job fails
    #: (``ocr_page_timeout``, terminal: the same page would take as long again).
    ocr_page_seconds: float = Field(60.0, gt=0)
    #: Wall-clock seconds reading one file may take, every page's rendering and OCR
    #: together (``document_read_timeout``, terminal): a scan of many slow pages, each
    #: inside ``ocr_page_seconds``, still ends. 2-4.4 s a page on one core, so 300 s
    #: reads some 70-150 pages in process and more where the OCR pool spreads them.
    document_read_seconds: float = Field(300.0, gt=0)
    #: Turn pages scanned sideways or upside down by tesseract's orientation detection
    #: (``--psm 0``, the ``osd`` data; about 0.6 s a page) before reading them.
    ocr_detect_orientation: bool = True
    #: The tesseract binary, a name on ``PATH`` or a path.
    ocr_tesseract: str = "tesseract"
    #: Where document bytes live: ``s3://bucket/prefix`` (the S3 API; credentials come
    #: from boto's own chain: environment, shared files, instance or pod role) or unset
    #: for the embedded default, a content-addressed folder ``<state_dir>/documents``.
    document_store: str | None = None
    #: The S3 API's endpoint (MinIO, Ceph, a local test server); unset: AWS's own.
    document_store_endpoint_url: str | None = None
    document_store_region: str | None = None
    #: CPU seconds one call's preparation or one answer's reading may spend before the
    #: job fails (``extraction_budget_exceeded``, terminal); unset: unbounded. Generated
    #: invoices of 200 items need about 0.25 s each.
    extraction_cpu_seconds: float | None = Field(10.0, gt=0)
    #: Seconds to wait for a pooled connection before answering 503.
    db_acquire_timeout_seconds: float = Field(5.0, gt=0)
    #: Verified API keys the intake keeps in memory (pipeline.api.key_cache), invalidated
    #: by LISTEN/NOTIFY; 0 reads every key from the database.
    api_key_cache_size: int = Field(10_000, ge=0)
    #: A cached key is verified in the database again after this many seconds.
    api_key_cache_seconds: float = Field(60.0, gt=0)
    #: A served intake (uvicorn factory, Serve ingress) freezes its heap once started,
    #: so full garbage collections skip it (pipeline.api.heap).
    freeze_heap_at_start: bool = True
    #: Retry-After for a tenant quota refusal (429) on pending jobs, bytes or tokens.
    quota_retry_after_seconds: float = Field(30.0, gt=0)
    #: Retry-After for exhausted system capacity or an unreachable database (503).
    capacity_retry_after_seconds: float = Field(15.0, gt=0)
    #: System capacity: runnable backlog above this refuses new work with 503.
    max_runnable_backlog: int = Field(100_000, ge=0)
    #: System capacity: an oldest eligible job older than this refuses new work with 503.
    max_oldest_runnable_age_seconds: float = Field(1800.0, gt=0)
    #: How long one system-capacity reading is reused (0 = read on every request).
    capacity_check_interval_seconds: float = Field(1.0, ge=0)
    #: Token estimate for admission: OCR bytes per prompt token, plus fixed reserves.
    bytes_per_token: float = Field(4.0, gt=0)
    prompt_overhead_tokens: int = Field(600, ge=0)
    output_reserve_tokens: int = Field(1024, ge=0)
    #: Price per 1,000 tokens where no other price is set (pipeline.pricing): the
    #: default prompt and completion price alike.
    token_price_per_1k: Decimal = Field(Decimal("0.002"), ge=0)
    #: The default price of a prompt (input) and of a completion (output) token per
    #: 1,000; unset: ``token_price_per_1k``. Acceptance reserves a job's estimate at
    #: these, and an attempt whose model has no price of its own is charged at them.
    prompt_price_per_1k: Decimal | None = Field(None, ge=0)
    completion_price_per_1k: Decimal | None = Field(None, ge=0)
    #: Prices per model, JSON: ``{"MODEL": {"prompt_per_1k": "0.0005",
    #: "completion_per_1k": "0.0015"}}`` (pipeline.pricing says how a model is named).
    model_prices: dict[str, ModelPrice] = Field(default_factory=dict)
    #: The budget period a tenant's ``spend_budget`` applies to.
    spend_period: Literal["day", "month"] = "month"
    #: How often the maintenance actor charges reported usage and releases the
    #: reservations of settled jobs (pipeline.tenants.SpendReconciler).
    spend_reconcile_interval_seconds: float = Field(5.0, gt=0)
    #: Largest page of ``GET /v1/extraction-jobs``.
    page_size_max: int = Field(100, gt=0)
    #: Status streams: events replayed after Last-Event-ID before falling back to a snapshot.
    sse_replay_limit: int = Field(500, gt=0)
    #: Status streams: re-read the database at least this often even without a NOTIFY.
    sse_poll_seconds: float = Field(5.0, gt=0)
    #: Status streams: re-check the API key this often; a revoked key ends the stream.
    sse_key_recheck_seconds: float = Field(10.0, gt=0)
    #: Status streams: comment line sent when idle, so proxies keep the connection.
    sse_keepalive_seconds: float = Field(15.0, gt=0)
    #: Status streams: a stream open this long sends ``reconnect`` (with its cursor)
    #: and ends; the client resumes with Last-Event-ID, missing nothing. Bounds the
    #: state a replica holds per client and lets load move to new replicas.
    sse_max_stream_seconds: float = Field(3600.0, gt=0)

    # Broker path (issue 4). Names are per deployment so several systems (or
    # parallel test runs) can share one RabbitMQ; `fenceline broker setup` and
    # every service declare the same topology idempotently from these.
    amqp_exchange: str = "fenceline"
    amqp_work_queue: str = "fenceline.work"
    amqp_work_routing_key: str = "extraction.requested.v1"
    amqp_dead_letter_exchange: str = "fenceline.dlx"
    amqp_dead_letter_queue: str = "fenceline.dlq"
    #: Quorum-queue redeliveries before the broker dead-letters a message itself.
    amqp_delivery_limit: int = Field(5, ge=1)
    #: Work-queue bound; with overflow=reject-publish a full queue nacks publishes.
    amqp_work_queue_max_length: int | None = Field(1_000_000, ge=1)
    #: Unacknowledged deliveries per ingress consumer: bounds ingestion, not inference.
    amqp_prefetch: int = Field(64, ge=1)
    #: A publish without a confirm after this long has an unknown outcome.
    amqp_confirm_timeout_seconds: float = Field(5.0, gt=0)
    amqp_connect_timeout_seconds: float = Field(5.0, gt=0)
    #: DLQ retention: archived dead letters older than this are purged (with their
    #: replay audit rows) by the maintenance actor.
    dlq_retention_days: float = Field(30.0, gt=0)
    #: How often the maintenance actor purges expired dead letters.
    dlq_purge_interval_seconds: float = Field(3600.0, gt=0)
    #: Retention of settled jobs (pipeline/jobs/retention.py): the defaults for a
    #: tenant without its own policy. Content (results, document text, delivery
    #: payload copies, the store's uploaded bytes) goes this many days after a job
    #: ended; its audit history (job events, inbox records) after ``audit_days``.
    retention_content_days: int = Field(30, ge=1, le=36500)
    retention_audit_days: int = Field(365, ge=1, le=36500)
    #: Jobs per retention batch (one short transaction each).
    retention_batch: int = Field(500, ge=1, le=100_000)
    #: After each batch the pass waits this many times the batch's own time (0: none).
    retention_pause_ratio: float = Field(0.0, ge=0, le=100)
    #: How often the maintenance actor runs the retention pass.
    retention_interval_seconds: float = Field(3600.0, gt=0)

    #: Duplicate supplier invoices across jobs (issue 20): a result whose supplier,
    #: invoice number and gross total another job of the tenant already holds is
    #: settled REVIEW_REQUIRED ``duplicate_invoice``. Off only for load tests that
    #: replay one corpus many times (``benchmarks/load/runner.py``), never in production.
    duplicate_invoice_check: bool = True
    #: Possible duplicates (issue 47): a result with the supplier and number of another
    #: job's invoice but another total, or its supplier, total and issue date with a
    #: number printed differently, is settled REVIEW_REQUIRED ``possible_duplicate``
    #: (``pipeline/jobs/near_duplicates.py``). Needs ``duplicate_invoice_check``.
    possible_duplicate_check: bool = True
    #: The secret the possible-duplicate keys are HMACs under (any string of 32+
    #: characters; changing it forgets every stored key). Unset: derived from
    #: ``webhook_secret_key``; both unset: a random secret the migration stored in the
    #: database, with a warning (development only: it sits beside the hashes).
    duplicate_key_secret: SecretStr | None = None

    # Re-drive of FAILED_TERMINAL jobs (issue 20): the fresh budget an operator's
    # re-drive gives when it does not name one.
    redrive_attempts: int = Field(3, ge=1)

    # ERP delivery (issue 8, docs/delivery.md): Standard-Webhooks POSTs to
    # tenant-registered endpoints, retried over hours to days.
    delivery_timeout_seconds: float = Field(10.0, gt=0)
    #: An in-flight delivery's lease; must exceed the timeout plus a commit margin.
    delivery_lease_seconds: float = Field(60.0, gt=0)
    delivery_per_endpoint_concurrency: int = Field(4, ge=1)
    delivery_max_in_flight: int = Field(32, ge=1)
    #: Upper bound of the full-jitter delay after attempt n (last value repeats).
    delivery_schedule_seconds: tuple[float, ...] = (
        5.0, 60.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 86400.0,
    )  # fmt: skip
    #: A delivery stops retrying (→ failed) this long after it was created or redriven.
    delivery_max_age_seconds: float = Field(3 * 86400.0, gt=0)
    delivery_breaker_threshold: int = Field(5, ge=1)
    delivery_breaker_cooldown_seconds: float = Field(60.0, gt=0)
    delivery_breaker_cooldown_cap_seconds: float = Field(3600.0, gt=0)
    #: Consecutive 401/403 answers that raise an auth alert (and every multiple after).
    delivery_auth_alert_after: int = Field(3, ge=1)
    #: An endpoint failing without a single success for this long is disabled.
    delivery_disable_after_seconds: float = Field(5 * 86400.0, gt=0)
    delivery_poll_seconds: float = Field(1.0, gt=0)
    delivery_allowed_ports: tuple[int, ...] = (443,)
    #: DEVELOPMENT ONLY: also allow loopback destinations and plain http to them
    #: (the local demo's reference ERP). Logged as a warning whenever a guard is built.
    delivery_allow_loopback_http: bool = False
    #: base64 of 32 bytes sealing webhook secrets at rest (AES-256-GCM). Unset: secrets
    #: are stored unsealed and a warning is logged (development only).
    webhook_secret_key: SecretStr | None = None
    # Encryption at rest (pipeline/envelope.py, pipeline/data_keys.py): invoice text is
    # sealed under per-tenant data keys, which are stored wrapped by a key-encryption
    # key (KEK). FENCELINE_KEK: base64 of 32 bytes, or several comma-separated with the
    # current one first (the others still unwrap until ``fenceline keys rotate``
    # re-wrapped their data keys); or FENCELINE_KEK_FILE: a file of such keys, one a
    # line. Neither set: content is stored unsealed (development only; a warning).
    kek: SecretStr | None = None
    kek_file: Path | None = None
    #: How long a rotated-out endpoint secret keeps signing alongside the new one.
    webhook_rotation_grace_seconds: float = Field(86400.0, ge=0)
    #: ERP acknowledgements (pipeline/delivery/acknowledgements.py): the replay
    #: window of a signed acknowledgement, and how often the maintenance actor marks
    #: acknowledgements past their endpoint's window overdue (one alert each).
    delivery_ack_tolerance_seconds: int = Field(300, ge=1)
    delivery_ack_overdue_interval_seconds: float = Field(30.0, gt=0)

    # The review console (pipeline/api/console/session.py).
    #: Signs the console's CSRF tokens and login-form nonces (any string of 32+
    #: characters); sessions themselves are rows of ``console_sessions``. Unset: a
    #: random key per process, so a form loaded before a restart, or from another
    #: replica, is refused and must be loaded again; set it wherever more than one
    #: intake replica runs.
    console_session_key: SecretStr | None = None
    #: How long a console session lasts (a row of ``console_sessions``; logout and
    #: revoking its key end it sooner).
    console_session_seconds: float = Field(8 * 3600.0, gt=0)
    #: Sign-in limits of the console (pipeline/api/login_limit.py), per intake process,
    #: in the window: failed sign-ins per client address (the bound on guessing from
    #: one address, high enough for many reviewers behind one proxy), failed sign-ins
    #: per address with one key (its first 8 characters: one person retrying a wrong
    #: or revoked key stops here, long before the address's budget), and sign-ins
    #: with one key from anywhere, successful or not.
    console_login_failures_per_address: int = Field(50, ge=1)
    console_login_failures_per_address_key: int = Field(5, ge=1)
    console_login_attempts_per_key: int = Field(20, ge=1)
    console_login_window_seconds: float = Field(300.0, gt=0)
    #: Reverse proxies whose forwarding headers are believed (pipeline/api/client_origin.py):
    #: addresses or networks, comma-separated (``10.0.0.0/8,127.0.0.1``) or a JSON list.
    #: A request from one of them is attributed to the address its ``X-Forwarded-For``
    #: names (the nearest address not itself trusted) and is https when its
    #: ``X-Forwarded-Proto`` says so; from any other peer both headers are ignored.
    #: Empty (the default): no proxy is trusted, the peer is the client.
    trusted_proxies: Annotated[tuple[str, ...], NoDecode] = ()

    # An OpenAI-compatible provider the drivers may call instead of the Serve pools
    # (``fenceline up --provider-url``): its key, if it needs one.
    provider_api_key: SecretStr | None = None
    #: The provider's base URL (``https://api.example.com/v1``) and model, for a runtime
    #: whose args name the ``openai`` engine but leave ``provider_url`` empty: the
    #: KubeRay hosted-provider overlay sets them in the settings ConfigMap.
    #: ``fenceline up --provider-url`` / ``--provider-model`` win over them.
    provider_url: str | None = None
    provider_model: str | None = None
    #: The provider project's budgets, shared by every driver through the one global
    #: admission actor of the provider scope (``fenceline up --rpm --tpm --tpd
    #: --provider-concurrency`` set them; KubeRay sets them in the settings ConfigMap):
    #: requests and charged tokens per sliding minute, charged tokens per sliding day,
    #: concurrent calls. Unset: that dimension is not limited.
    provider_rpm: int | None = Field(None, gt=0)
    provider_tpm: int | None = Field(None, gt=0)
    provider_tpd: int | None = Field(None, gt=0)
    provider_concurrency: int | None = Field(None, gt=0)

    # The ``fenceline`` CLI as a client and local operator.
    #: The API key ``fenceline submit`` and ``fenceline review`` send (``--api-key`` wins).
    api_key: SecretStr | None = None
    #: Where ``fenceline up`` keeps its pid file for ``fenceline down``, and the
    #: embedded PostgreSQL its data (``postgres/``) when none answers at the default URL.
    state_dir: Path = Path(".fenceline")

    # Observability (issue 19, docs/observability.md).
    #: OTLP collector for spans (``http://collector:4318`` or, with ``grpc``,
    #: ``http://collector:4317``); unset: no span is exported.
    otlp_endpoint: str | None = None
    otlp_protocol: Literal["http", "grpc"] = "http"
    #: ``json``: one JSON object per log line with the job's ids; ``text``: plain lines.
    log_format: Literal["json", "text"] = "json"

    # Inference deployments.
    #: The pools file (``FENCELINE_POOLS``); unset: ``deployments/pools.yaml`` (CPU default).
    pools: Path | None = None
    #: The pools a request's ``model_policy`` may name besides ``default`` (the
    #: context-length rule), comma-separated or a JSON list: the pool names of the
    #: pools file (``fenceline up`` and ``kuberay/generate.py`` set them from it), or
    #: for a hosted provider the models its drivers may ask for. A policy naming
    #: anything else is refused at intake (422 ``unknown_model_policy``).
    model_pools: Annotated[tuple[str, ...], NoDecode] = ()
    #: Where the bundled model is converted to (``FENCELINE_MODEL_CACHE``); unset: the
    #: user cache, ``~/.cache/fenceline/models``.
    model_cache: Path | None = None

    #: Let a fault harness arm crash points (``pipeline.checkpoints``) in the cluster
    #: actors. Off except in the chaos scenario; never set it in a deployment.
    fault_injection: bool = False

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxy_networks(cls, value: Any) -> tuple[str, ...]:
        """Comma-separated text or a JSON list (what :meth:`to_env` writes) of addresses
        or networks, each written in its normal form; anything else is refused."""
        if isinstance(value, str):
            text = value.strip()
            items = json.loads(text) if text.startswith("[") else text.split(",")
        else:
            items = list(value)
        return tuple(
            str(ipaddress.ip_network(str(item).strip(), strict=False))
            for item in items
            if str(item).strip()
        )

    @field_validator("model_pools", mode="before")
    @classmethod
    def _pool_names(cls, value: Any) -> tuple[str, ...]:
        """Comma-separated text or a JSON list (what :meth:`to_env` writes) of names."""
        if isinstance(value, str):
            text = value.strip()
            items = json.loads(text) if text.startswith("[") else text.split(",")
        else:
            items = list(value)
        return tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))

    def provider_limits(self) -> dict[str, int]:
        """The provider budgets that are set, as ``AdmissionConfig`` fields."""
        limits = {
            "rpm": self.provider_rpm,
            "tpm": self.provider_tpm,
            "tpd": self.provider_tpd,
            "max_in_flight": self.provider_concurrency,
        }
        return {k: v for k, v in limits.items() if v is not None}

    def prices(self) -> Prices:
        """The token prices (pipeline.pricing): the default pair and each model's."""
        default = ModelPrice(
            prompt_per_1k=(
                self.token_price_per_1k
                if self.prompt_price_per_1k is None
                else self.prompt_price_per_1k
            ),
            completion_per_1k=(
                self.token_price_per_1k
                if self.completion_price_per_1k is None
                else self.completion_price_per_1k
            ),
        )
        return Prices(default=default, models=dict(self.model_prices))

    def model_policies(self) -> tuple[str, ...]:
        """What a request's ``model_policy`` may be: ``default`` and the configured pools."""
        return tuple(dict.fromkeys(("default", *self.model_pools)))

    def to_env(self) -> dict[str, str]:
        """These settings as ``FENCELINE_*`` variables that :class:`Settings` reads back.

        For processes that build their own settings from the environment (Ray
        actors and replicas started with a ``runtime_env``). Unset optional values
        are left out; secrets are written in clear, so only hand this to a process
        environment, never to a log.
        """
        env: dict[str, str] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            key = f"FENCELINE_{name.upper()}"
            if isinstance(value, bool):
                env[key] = "true" if value else "false"
            elif isinstance(value, str | int | float | Decimal | Path):
                env[key] = str(value)
            else:  # tuples, lists, mappings: JSON, as pydantic-settings parses them
                env[key] = json.dumps(value, default=to_jsonable_python)
        return env
