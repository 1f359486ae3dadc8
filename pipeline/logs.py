"""Structured logs: one JSON object per line, with the ids of the job a line is about.

The spec keeps job, attempt and fence ids out of metric labels and puts them in
logs and traces instead; this module is the logs' half. Code that works on a
job binds its ids once (:func:`job_log_context` for a lease, :func:`bind_job`
for anything else) and every ``logging`` call inside, in any module, carries
them: a :class:`contextvars.ContextVar` follows asyncio tasks, so concurrent
attempts in one driver never mix their ids. The trace id is read from the
current OpenTelemetry span when the line is written, so a line can be looked
up in the tracing UI and a span's lines found by its trace id.

Standard ``logging`` only: :class:`JsonFormatter` is a formatter, installed by
:func:`configure_logging` (``Settings.log_format``) at service start.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from pipeline.tracing import current_trace_id

#: The ids every line about a job carries (``None`` values are left out).
JOB_FIELDS = ("job_id", "attempt", "fence", "tenant", "worker", "delivery_id")

_job: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "fenceline_job", default=None
)

#: ``LogRecord`` attributes that are not ``extra=`` fields.
_RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class _LeaseLike(Protocol):
    @property
    def job_id(self) -> Any: ...
    @property
    def attempt(self) -> int: ...
    @property
    def fence(self) -> int: ...
    @property
    def tenant_id(self) -> Any: ...
    @property
    def worker_id(self) -> str: ...


@contextlib.contextmanager
def bind_job(**ids: Any) -> Iterator[None]:
    """Put ``ids`` (see :data:`JOB_FIELDS`) on every log line written inside."""
    merged = dict(_job.get() or {})
    merged.update({k: str(v) if k in ("job_id", "tenant") else v for k, v in ids.items()})
    token = _job.set(merged)
    try:
        yield
    finally:
        _job.reset(token)


def job_log_context(lease: _LeaseLike) -> contextlib.AbstractContextManager[None]:
    """:func:`bind_job` with a lease's ids."""
    return bind_job(
        job_id=lease.job_id,
        attempt=lease.attempt,
        fence=lease.fence,
        tenant=lease.tenant_id,
        worker=lease.worker_id,
    )


def job_fields() -> dict[str, Any]:
    """The ids bound here now, plus the current trace id."""
    out = {k: v for k, v in (_job.get() or {}).items() if v is not None}
    trace_id = current_trace_id()
    if trace_id:
        out["trace_id"] = trace_id
    return out


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", <job ids>, "trace_id", <extra>}`` per line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(getattr(record, "fenceline", None) or job_fields())
        for key, value in vars(record).items():
            if key not in _RESERVED and key != "fenceline" and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class JobContextFilter(logging.Filter):
    """Captures the job ids and trace id when a record is made (a handler on another
    thread formats it later, outside the job's context)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "fenceline"):
            record.fenceline = job_fields()
        return True


def json_handler(stream: Any = None) -> logging.Handler:
    """A stream handler writing :class:`JsonFormatter` lines with the job ids attached."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(JobContextFilter())
    return handler


def configure_logging(log_format: str = "json", level: int = logging.INFO) -> None:
    """Replace the root logger's handlers with one writing ``log_format`` lines."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    if log_format == "json":
        root.addHandler(json_handler())
    else:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    root.setLevel(level)
