"""Reference ERP receiver: how an ERP should accept Fenceline webhooks (spec §5).

Used by the demo and by the tests as "the ERP". A verification challenge (a signed
``endpoint.verification.v1`` whose ``webhook-id`` starts ``vrf_``) is answered 200
``{"challenge": <its token>}`` after the signature check, and nothing else happens.
Per delivery:

1. bound the body (413), verify the Standard Webhooks signature and timestamp
   window with :class:`pipeline.delivery.signing.Verifier` (401 with a reason, never 500);
2. validate the event (400), taking the tenant from this receiver's trusted
   configuration, never from the body;
3. in one transaction, insert the inbox row keyed on the delivery id with the
   payload digest — a known id with the *same* digest is a duplicate (200, no
   new work), a known id with a *different* digest is rejected (409) and counted
   as an alert — and persist the runnable "post invoice" operation;
4. answer 2xx only after that commit;
5. run the posting step once per accepted delivery id (``erp_inbox.applied_at``),
   counting every run in ``erp_postings.applications``, and post under the job's
   own idempotency guard (``posted_at IS NULL``), so each job is posted once
   however often, and by whichever delivery, it arrives — while a job that
   arrived under two delivery ids still shows ``applications = 2``;
6. refuse a second posting of the same *supplier invoice* by another job (same
   supplier, number and gross total): 409 ``{"result": "duplicate_invoice",
   "posted_job_id": ...}``, keeping nothing of that delivery. The sender records
   that answer (the delivery fails with reason ``duplicate_invoice``); retrying
   would only be refused again;
7. post a ``credit_note.created.v1`` as a credit (``erp_postings.kind``
   ``credit_note``) against the invoice it credits (``credits_job_id``, from
   ``data.credited_invoice.job_id``), once per job like an invoice; a credit for an
   invoice this ledger never posted is refused, 409 ``credited_invoice_unknown``,
   keeping nothing of that delivery (an ERP cannot apply it);
8. apply ``invoice.superseded.v1`` in the inbox transaction: the old job's posting
   is marked superseded and releases its invoice key (``erp_supersessions``), so the
   new version, which Fenceline delivers only after this one, posts.

With ``acknowledge`` (``--ack-callback``) it also tells Fenceline, later, what it
made of each accepted delivery: a signed acknowledgement at once, late or never by
fraction (:mod:`benchmarks.erp_acknowledger`).

Its tables (``erp_inbox``, ``erp_postings``) are not the product's: they are the
migrations of ``sql/erp/``, which :func:`migrate_erp` applies (the receiver does at
start-up; ``--migrate`` applies the product's schema as well).

The fault switch (``--fault`` or ``POST /_fault`` with ``--enable-fault-api``)
simulates an ERP that is down (503), redirects (302), drops the connection after
committing, hangs past the client's timeout after committing, or answers an
error status after committing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from benchmarks.erp_acknowledger import Acknowledger, AckPlan
from benchmarks.erp_faults import FAULT_MODES, FaultSwitch, drop_after_headers
from benchmarks.erp_ledger import (
    CREDITED_INVOICE_UNKNOWN,
    CreditedInvoiceUnknown,
    accept_delivery,
    apply_pending_postings,
    apply_posting,
    invoice_key,
    validate_event,
)
from pipeline.database import connect, create_pool, migrate
from pipeline.delivery import (
    CHALLENGE_ID_PREFIX,
    EVENT_VERIFICATION,
    VerificationKey,
    Verifier,
)
from pipeline.identity import DUPLICATE_INVOICE
from pipeline.queries import SQL_DIR, q

log = logging.getLogger(__name__)

#: The reference ERP receiver's migrations, apart from the product's ``sql/schema``.
ERP_SCHEMA_DIR = SQL_DIR / "erp"


async def migrate_erp(conn: asyncpg.Connection) -> list[int]:
    """Apply the receiver's own migrations (``sql/erp``); return the versions applied."""
    return await migrate(conn, ERP_SCHEMA_DIR)


@dataclass
class ReceiverConfig:
    """Static receiver configuration (from the ERP's side of the integration).

    Attributes:
        database_url: where the inbox and postings live.
        keys: the endpoint secrets this ERP accepts (current and, during a
            rotation, the previous one with its ``not_after``).
        ledger: the books this receiver posts to.
        tenant_id: if set, events naming another tenant are rejected (400).
    """

    database_url: str
    keys: Sequence[str | VerificationKey]
    ledger: str = "default"
    tenant_id: uuid.UUID | None = None
    tolerance_seconds: int = 300
    max_body_bytes: int = 1 << 20
    path: str = "/webhooks/fenceline"
    enable_fault_api: bool = False
    migrate: bool = False
    #: Post the same supplier invoice once per job (load tests replaying a corpus).
    allow_duplicate_invoices: bool = False
    #: Acknowledge accepted deliveries to Fenceline later, signed (at once, late or
    #: never by fraction: :mod:`benchmarks.erp_acknowledger`). None: no acknowledgements.
    acknowledge: AckPlan | None = None


@dataclass
class ReceiverStats:
    """In-process counters the tests read (the same figures are Prometheus series).

    The server may run in another thread: :meth:`wait_for` blocks on a condition
    the request handler notifies, so a test waits for an event, not a sleep.
    """

    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    results: dict[str, int] = field(default_factory=dict)
    delivery_ids: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    #: Verification challenges by answer (``echoed``, ``unauthorized``, ``invalid``),
    #: apart from the deliveries counted above.
    challenges: dict[str, int] = field(default_factory=dict)
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def add_challenge(self, answer: str) -> None:
        with self._changed:
            self.challenges[answer] = self.challenges.get(answer, 0) + 1
            self._changed.notify_all()

    def add(self, result: str) -> None:
        with self._changed:
            self.results[result] = self.results.get(result, 0) + 1
            self._changed.notify_all()

    def wait_for(self, result: str, count: int = 1, timeout: float = 10.0) -> bool:
        """Block until ``result`` has been answered ``count`` times (False on timeout)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.results.get(result, 0) >= count, timeout)


def create_app(
    config: ReceiverConfig,
    *,
    now: Callable[[], float] = time.time,
    faults: FaultSwitch | None = None,
    registry: CollectorRegistry | None = None,
) -> FastAPI:
    """The receiver app; ``app.state`` holds ``faults``, ``stats``, ``verifier`` and ``pool``."""
    verifier = Verifier(config.keys, tolerance_seconds=config.tolerance_seconds, now=now)
    registry = registry or CollectorRegistry(auto_describe=True)
    requests_total = Counter(
        "fenceline_erp_requests", "Webhook requests by result", ["result"], registry=registry
    )
    conflicts_total = Counter(
        "fenceline_erp_digest_conflicts",
        "ALERT: a delivery id arrived again with a different payload digest",
        registry=registry,
    )
    effects_total = Counter(
        "fenceline_erp_postings_applied",
        "Invoices posted (first application only)",
        registry=registry,
    )

    duplicates_total = Counter(
        "fenceline_erp_duplicate_invoices",
        "Postings refused: the same supplier invoice was already posted for another job",
        registry=registry,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        conn = await connect(config.database_url)
        try:
            if config.migrate:
                await migrate(conn)
            await migrate_erp(conn)  # the receiver's own tables, always
        finally:
            await conn.close()
        app.state.pool = await create_pool(config.database_url, min_size=1, max_size=8)
        effects_total.inc(await apply_pending_postings(app.state.pool, config.ledger))
        if config.acknowledge is not None:
            app.state.acknowledger = Acknowledger(config.acknowledge, now=now)
        try:
            yield
        finally:
            if app.state.acknowledger is not None:
                await app.state.acknowledger.aclose()
            await app.state.pool.close()

    app = FastAPI(title="Fenceline reference ERP receiver", lifespan=lifespan)
    app.state.faults = faults or FaultSwitch()
    #: Replaceable at run time: an ERP reloading its keys after a rotation.
    app.state.verifier = verifier
    app.state.stats = ReceiverStats()
    #: Sends the acknowledgements of ``config.acknowledge`` (set at start-up).
    app.state.acknowledger = None

    def answer(result: str, status: int, **body: Any) -> JSONResponse:
        requests_total.labels(result).inc()
        app.state.stats.add(result)
        return JSONResponse({"result": result, **body}, status_code=status)

    @app.post(config.path)
    async def receive(request: Request) -> Response:
        stats: ReceiverStats = app.state.stats
        if request.headers.get("webhook-id", "").startswith(CHALLENGE_ID_PREFIX):
            return await echo_challenge(request, stats)
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            return await handle(request, stats)
        finally:
            stats.in_flight -= 1

    async def echo_challenge(request: Request, stats: ReceiverStats) -> Response:
        """Step 0: prove this endpoint is ours. A signed ``endpoint.verification.v1``
        is answered 200 ``{"challenge": <its token>}``; nothing is stored, and the
        fault switch (which simulates failing deliveries) is not consulted."""
        body = await request.body()
        if len(body) > config.max_body_bytes:
            return JSONResponse({"result": "too_large"}, status_code=413)
        verdict = app.state.verifier.verify(request.headers, body)
        if not verdict.ok:
            stats.add_challenge("unauthorized")
            return JSONResponse({"result": "unauthorized", "reason": verdict.reason}, 401)
        try:
            event = json.loads(body)
            token = event["data"]["challenge"]
            if event["type"] != EVENT_VERIFICATION or not isinstance(token, str):
                raise ValueError("not a verification challenge")
        except (ValueError, TypeError, KeyError) as exc:
            stats.add_challenge("invalid")
            return JSONResponse({"result": "invalid", "reason": str(exc)[:200]}, 400)
        stats.add_challenge("echoed")
        return JSONResponse({"challenge": token})

    async def handle(request: Request, stats: ReceiverStats) -> Response:
        stats.hosts.append(request.headers.get("host", ""))
        fault = app.state.faults.take()
        f: FaultSwitch = app.state.faults
        hint = {"retry-after": f.retry_after} if f.retry_after else None
        if fault == "down":
            requests_total.labels("fault_down").inc()
            stats.add("fault_down")
            return JSONResponse({"result": "down"}, status_code=503, headers=hint)
        if fault == "status":
            stats.add(f"fault_{f.status}")
            return JSONResponse({"result": "fault"}, status_code=f.status, headers=hint)
        if fault == "redirect":
            stats.add("fault_redirect")
            return Response(status_code=302, headers={"location": f.location})
        declared = request.headers.get("content-length")
        if declared is not None and (
            not declared.isdigit() or int(declared) > config.max_body_bytes
        ):
            return answer("too_large", 413)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > config.max_body_bytes:
                return answer("too_large", 413)
        verifier: Verifier = app.state.verifier
        verdict = verifier.verify(request.headers, body)
        if not verdict.ok or verdict.msg_id is None:
            return answer("unauthorized", 401, reason=verdict.reason)
        delivery_id = verdict.msg_id
        stats.delivery_ids.append(delivery_id)
        try:
            event = validate_event(json.loads(body), config.tenant_id)
        except (ValueError, TypeError, KeyError) as exc:
            return answer("invalid", 400, reason=str(exc)[:200])
        job_id = event.job_id
        digest = hashlib.sha256(body).hexdigest()
        pool: asyncpg.Pool = app.state.pool
        key = (
            invoice_key(event.invoice, credit_note=event.credit_note)
            if job_id is not None and not config.allow_duplicate_invoices
            else None
        )
        try:
            result = await accept_delivery(pool, config.ledger, delivery_id, digest, event, key)
        except CreditedInvoiceUnknown as exc:
            log.warning("delivery %s: credits invoice job %s, never posted here", delivery_id, exc)
            return answer(
                CREDITED_INVOICE_UNKNOWN,
                409,
                reason="the credited invoice was never posted to this ledger",
                credited_job_id=str(exc),
            )
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name != "erp_postings_invoice_key" or key is None:
                raise
            # Another job already posted this supplier invoice: nothing of this
            # delivery is kept (the transaction rolled back), and the answer says why.
            async with pool.acquire() as conn:
                owner = await conn.fetchrow(q("erp_posting_owner_of_invoice"), config.ledger, key)
            duplicates_total.inc()
            log.warning("delivery %s: supplier invoice already posted by job %s", delivery_id,
                        owner["job_id"] if owner else "?")  # fmt: skip
            return answer(
                DUPLICATE_INVOICE,
                409,
                reason="this supplier invoice was already posted for another job",
                posted_job_id=str(owner["job_id"]) if owner else None,
            )
        if result == "conflict":
            conflicts_total.inc()
            log.error(
                "ALERT: delivery %s arrived again with a different payload digest; rejected",
                delivery_id,
            )
            return answer("conflict", 409, reason="delivery id reused with a different payload")
        # Durably accepted. Run the posting step (once per delivery id; a duplicate
        # finishes a step its first arrival did not reach; a crash here is
        # recovered at start-up).
        if job_id is not None:
            async with pool.acquire() as conn:
                if await apply_posting(conn, config.ledger, delivery_id):
                    effects_total.inc()
        if app.state.acknowledger is not None and job_id is not None:
            app.state.acknowledger.schedule(delivery_id)  # the business answer, later
        if fault == "drop_after_commit":
            stats.add("fault_dropped")
            return drop_after_headers()
        if fault == "hang_after_commit":
            stats.add("fault_hung")
            await asyncio.sleep(f.hang_seconds)
        if fault == "status_after_commit":
            stats.add(f"fault_{f.status}_after_commit")
            return JSONResponse({"result": "fault"}, status_code=f.status)
        return answer(result, 200, delivery_id=delivery_id)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "ledger": config.ledger}

    if config.enable_fault_api:

        @app.post("/_fault")
        async def set_fault(request: Request) -> JSONResponse:
            spec = await request.json()
            try:
                app.state.faults.set(spec.pop("mode"), **spec)
            except (KeyError, TypeError, ValueError) as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            return JSONResponse({"mode": app.state.faults.mode})

        @app.get("/_stats")
        async def get_stats() -> dict[str, Any]:
            s: ReceiverStats = app.state.stats
            return {"requests": s.requests, "results": s.results}

    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0 picks a free port; read it from getsockname)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.erp_receiver --port N --database-url URL --secret whsec_...``.

    Secrets may also come from ``FENCELINE_ERP_SECRETS`` (space-separated), which
    keeps them out of the process list. Prints ``listening on http://HOST:PORT``.
    """
    import uvicorn

    parser = argparse.ArgumentParser(prog="fenceline erp-receiver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--database-url", default=os.environ.get("FENCELINE_DATABASE_URL"))
    parser.add_argument("--secret", action="append", default=[])
    parser.add_argument("--ledger", default="default")
    parser.add_argument("--tenant-id", type=uuid.UUID)
    parser.add_argument("--path", default="/webhooks/fenceline")
    parser.add_argument("--migrate", action="store_true", help="apply migrations at start")
    parser.add_argument("--enable-fault-api", action="store_true")
    parser.add_argument("--fault", choices=FAULT_MODES, default="none")
    parser.add_argument(
        "--allow-duplicate-invoices",
        action="store_true",
        help="post the same supplier invoice once per job (load tests replaying a corpus)",
    )
    parser.add_argument(
        "--ack-callback", help="Fenceline's API base URL: acknowledge deliveries there"
    )
    parser.add_argument("--ack-at-once", type=float, default=1.0, help="fraction acked at once")
    parser.add_argument("--ack-late", type=float, default=0.0, help="fraction acked late")
    parser.add_argument("--ack-late-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    secrets_ = list(args.secret) + os.environ.get("FENCELINE_ERP_SECRETS", "").split()
    if not args.database_url or not secrets_:
        parser.error("--database-url and at least one --secret (or FENCELINE_ERP_SECRETS)")
    plan = (
        AckPlan(
            args.ack_callback,
            secrets_[0],
            at_once=args.ack_at_once,
            late=args.ack_late,
            late_seconds=args.ack_late_seconds,
        )
        if args.ack_callback
        else None
    )
    config = ReceiverConfig(
        database_url=args.database_url,
        keys=secrets_,
        ledger=args.ledger,
        tenant_id=args.tenant_id,
        path=args.path,
        enable_fault_api=args.enable_fault_api,
        migrate=args.migrate,
        allow_duplicate_invoices=args.allow_duplicate_invoices,
        acknowledge=plan,
    )
    faults = FaultSwitch()
    faults.set(args.fault)
    app = create_app(config, faults=faults)
    sock = bind_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    print(f"listening on http://{host}:{port}{args.path}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
