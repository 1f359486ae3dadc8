"""What the console's pages read: the review queue, one job under review, the
operator dashboard, the jobs, deliveries and dead letters behind its counts, and a
job's timeline. Every read takes the caller's tenant, so
another tenant's job is :class:`~pipeline.errors.NotFound` exactly like a missing one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from pipeline.data_keys import document_subject
from pipeline.database import fetch_owned
from pipeline.errors import DataKeyShredded, NotFound
from pipeline.jobs import JobStore
from pipeline.queries import q
from pipeline.records import from_record
from pipeline.sealed_results import open_changes, open_reasons, open_result, open_validation
from pipeline.settings import Settings
from pipeline.tenants import Principal


@dataclass(frozen=True)
class QueueItem:
    job_id: uuid.UUID
    state_version: int
    created_at: datetime
    in_review_since: datetime | None
    reasons: list[dict[str, Any]]
    supplier: str | None
    invoice_number: str | None
    gross_total: str | None
    currency: str | None


@dataclass(frozen=True)
class ReviewSubject:
    job_id: uuid.UUID
    state: str
    state_version: int
    created_at: datetime
    finished_at: datetime | None
    terminal_reason: str | None
    filename: str | None
    #: The document is a file (its pages can be shown), not a pasted text.
    from_file: bool
    ocr_text: str
    result: dict[str, Any] | None
    validation: dict[str, Any]
    next_job: uuid.UUID | None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Dashboard:
    jobs_by_state: dict[str, int]
    oldest_eligible_seconds: float | None
    review_queue_age_seconds: float | None
    review_queue_size: int
    dead_letters: int
    dead_letters_unreplayed: int
    deliveries_by_state: dict[str, int]
    #: Deliveries whose endpoint asks for ERP acknowledgements, by acknowledgement
    #: state (``overdue``: the window ran out, alerted).
    acknowledgements_by_state: dict[str, int]
    endpoints: list[dict[str, Any]]
    admission: list[dict[str, Any]]
    #: When these counts were read (the page says "as of"; each refresh moves it).
    read_at: datetime


def _dicts(values: list[Any]) -> list[dict[str, Any]]:
    """A JSON array's objects (anything else in it is not a reason)."""
    return [x for x in values if isinstance(x, dict)]


def _text_at(node: Any, *path: str) -> str | None:
    """The string at ``path`` in a result (as SQL's ``#>>`` reads it), None where absent."""
    for step in path:
        node = node.get(step) if isinstance(node, dict) else None
    return None if node is None else str(node)


def age_text(seconds: float | None) -> str:
    """``3d 4h``, ``12m 5s``: an age a person reads at a glance."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if s >= size:
            return f"{s // size}{unit} {(s % size) // subsize}{sub}"
    return f"{s // 60}m {s % 60}s" if s >= 60 else f"{s}s"


class ConsoleViews:
    """Tenant-scoped reads behind the console pages."""

    def __init__(self, pool: asyncpg.Pool, store: JobStore, settings: Settings) -> None:
        self.pool = pool
        self.store = store
        self.settings = settings

    async def _opened(
        self, conn: asyncpg.Connection, tenant: uuid.UUID, row: Any
    ) -> dict[str, Any]:
        """The review page's row with its text and its result's text opened (sealed at
        rest); a shredded data key shows as such, never as the sealed bytes."""
        out = dict(row.items())
        sha256 = out.pop("document_sha256")
        if out["ocr_text"] is not None and sha256 is not None:
            try:
                out["ocr_text"] = await self.store.data_keys.open_text(
                    conn, tenant, out["ocr_text"], document_subject(sha256)
                )
            except DataKeyShredded as exc:
                out["ocr_text"] = f"[{exc}]"
        if isinstance(out.get("result"), dict):
            # the result's text is sealed at rest too (pipeline/sealed_results.py)
            out["result"] = await open_result(
                self.store.data_keys,
                conn,
                tenant,
                out["id"],
                out["result"],
                mark=(DataKeyShredded,),
            )
        if isinstance(out.get("validation"), dict):
            out["validation"] = await open_validation(
                self.store.data_keys,
                conn,
                tenant,
                out["id"],
                out["validation"],
                mark=(DataKeyShredded,),
            )
        return out

    def _acquire(self) -> Any:
        return self.pool.acquire(timeout=self.settings.db_acquire_timeout_seconds)

    async def queue(
        self, principal: Principal, *, reason: str | None, supplier: str | None, limit: int = 200
    ) -> tuple[list[QueueItem], list[str]]:
        """The queue (oldest in review first) and the reason codes it holds."""
        needle = supplier.lower() if supplier else None
        items: list[QueueItem] = []
        async with self._acquire() as conn:
            rows = await conn.fetch(
                q("review_queue_list_for_tenant"),
                principal.tenant_id,
                reason,
                None if needle else limit,
            )
            for r in rows:
                # the result's text is sealed at rest (pipeline/sealed_results.py):
                # the names are opened here, and searched here
                result = await open_result(
                    self.store.data_keys,
                    conn,
                    principal.tenant_id,
                    r["id"],
                    r["result"] if isinstance(r["result"], dict) else {},
                    mark=(DataKeyShredded,),
                )
                name = _text_at(result, "supplier", "name", "value")
                if needle is not None and needle not in (name or "").lower():
                    continue
                items.append(
                    QueueItem(
                        job_id=r["id"],
                        state_version=r["state_version"],
                        created_at=r["created_at"],
                        in_review_since=r["finished_at"],
                        reasons=_dicts(
                            await open_reasons(
                                self.store.data_keys,
                                conn,
                                principal.tenant_id,
                                r["id"],
                                r["reasons"],
                                mark=(DataKeyShredded,),
                            )
                        ),
                        supplier=name,
                        invoice_number=_text_at(result, "invoice_number", "value"),
                        gross_total=_text_at(result, "gross_total", "value"),
                        currency=_text_at(result, "currency", "value"),
                    )
                )
                if len(items) == limit:
                    break
            codes = await conn.fetch(q("review_queue_reason_codes_for_tenant"), principal.tenant_id)
        return items, [c["code"] for c in codes if c["code"]]

    async def subject(self, principal: Principal, job_id: uuid.UUID) -> ReviewSubject:
        async with self._acquire() as conn:
            row = await fetch_owned(
                conn, "review_page_get_for_tenant", job_id, principal.tenant_id, "job"
            )
            row = await self._opened(conn, principal.tenant_id, row)
            nxt = await conn.fetchval(
                q("review_queue_next_for_tenant"), principal.tenant_id, job_id
            )
            tenant = principal.tenant_id
            decisions = await conn.fetch(q("review_decision_list_for_job"), job_id, tenant)
            corrections = [
                {
                    **_with_who(c),
                    # a corrected value's before and after are sealed at rest, like the result's
                    "changes": await open_changes(
                        self.store.data_keys,
                        conn,
                        tenant,
                        job_id,
                        c["changes"] or [],
                        mark=(DataKeyShredded,),
                    ),
                    **{
                        side: await open_reasons(
                            self.store.data_keys,
                            conn,
                            tenant,
                            job_id,
                            c[side] or [],
                            mark=(DataKeyShredded,),
                        )
                        for side in ("reasons_before", "reasons_after")
                    },
                }
                for c in await conn.fetch(q("review_correction_list_for_job"), job_id, tenant)
            ]
        return from_record(
            ReviewSubject,
            row,
            rename={"job_id": "id"},
            convert={
                "ocr_text": lambda text: str(text or ""),
                "result": lambda result: result if isinstance(result, dict) else None,
                "validation": lambda found: found if isinstance(found, dict) else {},
                "from_file": bool,
            },
            next_job=nxt,
            decisions=[_with_who(d) for d in decisions],
            corrections=corrections,
        )

    async def dashboard(self, principal: Principal, now: datetime | None = None) -> Dashboard:
        t = principal.tenant_id
        async with self._acquire() as conn:
            states = await conn.fetch(q("dashboard_jobs_by_state_for_tenant"), t)
            ages = await conn.fetchrow(q("dashboard_ages_for_tenant"), t, now)
            dlq = await conn.fetchrow(q("dashboard_dead_letters_for_tenant"), t)
            deliveries = await conn.fetch(q("dashboard_deliveries_by_state_for_tenant"), t)
            acks = await conn.fetch(q("dashboard_acknowledgements_for_tenant"), t)
            endpoints = await conn.fetch(q("dashboard_endpoints_for_tenant"), t)
            admission = await conn.fetch(q("dashboard_admission_for_tenant"), t, now)
        return Dashboard(
            jobs_by_state={r["state"]: r["jobs"] for r in states},
            oldest_eligible_seconds=ages["oldest_eligible_seconds"],
            review_queue_age_seconds=ages["review_queue_age_seconds"],
            review_queue_size=ages["review_queue_size"],
            dead_letters=dlq["total"],
            dead_letters_unreplayed=dlq["unreplayed"],
            deliveries_by_state={r["state"]: r["deliveries"] for r in deliveries},
            acknowledgements_by_state={r["ack_state"]: r["deliveries"] for r in acks},
            endpoints=[dict(r.items()) for r in endpoints],
            admission=[dict(r.items()) for r in admission],
            read_at=now or datetime.now(UTC),
        )

    async def jobs(
        self, principal: Principal, state: str | None, limit: int = 200
    ) -> list[dict[str, Any]]:
        """The tenant's jobs in ``state`` (None: any), most recently changed first."""
        async with self._acquire() as conn:
            rows = await conn.fetch(
                q("console_job_list_for_tenant"), principal.tenant_id, state, limit
            )
        return [dict(r.items()) for r in rows]

    async def dead_letters(self, principal: Principal, limit: int = 200) -> list[dict[str, Any]]:
        """The tenant's dead letters, newest first."""
        async with self._acquire() as conn:
            rows = await conn.fetch(
                q("console_dead_letter_list_for_tenant"), principal.tenant_id, limit
            )
        return [dict(r.items()) for r in rows]

    async def deliveries(
        self,
        principal: Principal,
        *,
        state: str | None,
        endpoint_id: uuid.UUID | None,
        ack_state: str | None = None,
        limit: int = 200,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The tenant's deliveries (by state, to one endpoint, by acknowledgement state)
        and that endpoint's row.

        Raises:
            NotFound: ``endpoint_id`` names no endpoint of this tenant.
        """
        t = principal.tenant_id
        async with self._acquire() as conn:
            endpoint = None
            if endpoint_id is not None:
                found = await conn.fetchrow(q("endpoint_get_for_tenant"), endpoint_id, t)
                if found is None:
                    raise NotFound(f"endpoint {endpoint_id}")
                endpoint = dict(found.items())
            rows = await conn.fetch(
                q("console_delivery_list_for_tenant"), t, state, endpoint_id, limit, ack_state
            )
        return [dict(r.items()) for r in rows], endpoint

    async def timeline(self, principal: Principal, job_id: uuid.UUID) -> dict[str, Any]:
        """The ``explain`` data of one of the principal's jobs, each review, correction
        and re-drive with ``who``: the acting key's label where it has one, else its
        human-readable prefix; never its id."""
        async with self._acquire() as conn:
            owned = await conn.fetchval(q("job_get_for_tenant"), job_id, principal.tenant_id)
        if owned is None:
            raise NotFound(f"job {job_id}")
        data = await self.store.explain(job_id)
        acts = [*data["reviews"], *data["corrections"], *data["redrives"]]
        ids = {key for key in map(_acting_key, acts) if key is not None}
        async with self._acquire() as conn:
            rows = await conn.fetch(
                q("console_api_key_names_for_tenant"), principal.tenant_id, list(ids)
            )
        names = {r["id"]: key_name(r["label"], r["key_prefix"]) for r in rows}
        for act in acts:
            key = _acting_key(act)
            act["who"] = (
                names[key]
                if key in names
                else str(act.get("requested_by") or "a key no longer known")
            )
        return data


def key_name(label: str | None, prefix: str | None) -> str:
    """How the console names the key behind an act: its label ("Ana Ruiz"), else its
    printed prefix ("key flk_AbCd…")."""
    if label:
        return label
    return f"key {prefix}\u2026" if prefix else "a key no longer known"


def _with_who(row: asyncpg.Record) -> dict[str, Any]:
    """A review or correction row with ``who``: its key's name (see :func:`key_name`)."""
    return {**dict(row.items()), "who": key_name(row["key_label"], row["key_prefix"])}


def _acting_key(act: dict[str, Any]) -> uuid.UUID | None:
    """The API key behind a review, correction (``api_key_id``) or re-drive
    (``requested_by`` = ``key:<uuid>``); None for anything else (a CLI operator)."""
    key = act.get("api_key_id")
    if isinstance(key, uuid.UUID):
        return key
    by = str(act.get("requested_by") or "")
    if by.startswith("key:"):
        try:
            return uuid.UUID(by[4:])
        except ValueError:
            return None
    return None


def seconds_since(at: datetime | None) -> float | None:
    return None if at is None else (datetime.now(UTC) - at).total_seconds()
