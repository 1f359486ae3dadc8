"""Rendering the console: the Jinja2 environment and the review page's view model.

Autoescaping is on for every template, and attacker-controlled text goes
through :func:`pipeline.api.evidence_marks.reveal` as well, which escapes it and
shows hidden characters. Templates never mark text ``|safe``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pipeline.api.console.views import ReviewSubject, age_text
from pipeline.api.evidence_marks import (
    anchor_id,
    evidence_spans,
    field_id,
    marked_pages,
    reveal,
)
from pipeline.extraction import CORRECTABLE_FIELDS, ROW_FIELDS
from pipeline.validation import needs_contract_v3

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = Path(__file__).resolve().parent / "static"


def _age(at: datetime | None) -> str:
    return "-" if at is None else age_text((datetime.now(UTC) - at).total_seconds())


def utc_text(at: datetime | None) -> str:
    """``2026-12-07 01:02:03 UTC``: an absolute time at second precision (title text)."""
    return "-" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_text(at: datetime) -> str:
    """``2026-12-07T01:02:03+00:00``: the machine-readable form of :func:`utc_text`."""
    return at.astimezone(UTC).isoformat(timespec="seconds")


def ago_text(at: datetime | None, now: datetime | None = None) -> str:
    """``3m 5s ago`` or ``in 40s``: a time relative to now, as a person reads it."""
    if at is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - at).total_seconds()
    if seconds < 0:
        return f"in {age_text(-seconds)}"
    return "just now" if seconds < 1 else f"{age_text(seconds)} ago"


def usage_of(used: int, limit: int | None, known: bool = True) -> str:
    """``12 / 600 (2 %)`` for usage against a limit; ``12 / no limit`` where the scope
    enforces none; ``12 / unknown`` where no actor recorded the scope's limits."""
    if not known:
        return f"{used:,} / unknown"
    if limit is None:
        return f"{used:,} / no limit"
    return f"{used:,} / {limit:,} ({100 * used / limit:.0f} %)"


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=False,
    )
    env.filters["reveal"] = reveal
    env.globals["age"] = _age
    env.globals["age_s"] = age_text
    env.globals["of"] = usage_of
    env.globals["utc"] = utc_text
    env.globals["ago"] = ago_text
    env.globals["iso"] = iso_text
    return env


_ENV = environment()
_DEFAULTS: dict[str, Any] = {
    "principal": None,
    "csrf": None,
    "flash": None,
    "events_url": None,
    "fragment_url": None,
    "state_version": None,
    "page": "",
}


def render(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = _ENV.get_template(name).render(**{**_DEFAULTS, **context})
    return HTMLResponse(html, status_code=status_code)


def render_fragment(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(name).render(**context))


def _node(result: dict[str, Any], path: str) -> Any:
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _reason_view(r: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "code": str(r.get("code", "")),
        "field": str(r.get("field", "")),
        "detail": str(r.get("detail", "")),
        "key": i,
    }


def _owner(field: str) -> str:
    """The row a reason's field belongs to: ``line_items[2].line_amount`` → ``line_items[2]``."""
    if field.startswith(("line_items[", "tax_lines[")):
        return field.split("]")[0] + "]"
    return field


def review_page_model(
    subject: ReviewSubject, submitted: dict[str, str] | None = None
) -> dict[str, Any]:
    """Fields with values, evidence and the reasons that point at them; the marked text.

    ``submitted``: values a reviewer posted that were not stored (a refused approval),
    shown in the inputs instead of the stored ones so no typing is lost.
    """
    kept = submitted or {}
    result = subject.result or {}
    reasons = [
        _reason_view(r, i)
        for i, r in enumerate(subject.validation.get("reasons", []))
        if isinstance(r, dict)
    ]
    by_field: dict[str, list[dict[str, Any]]] = {}
    for r in reasons:
        by_field.setdefault(_owner(r["field"]), []).append(r)
    fields = []
    for path in CORRECTABLE_FIELDS:
        node = _node(result, path)
        evidence = node.get("evidence") if isinstance(node, dict) else None
        fields.append(
            {
                "path": path,
                "anchor": anchor_id(path),
                "row_id": field_id(path),
                "value": kept[path]
                if path in kept
                else (None if not isinstance(node, dict) else node.get("value")),
                "has_evidence": isinstance(evidence, dict),
                "quote": evidence.get("quote") if isinstance(evidence, dict) else None,
                "match": evidence.get("match") if isinstance(evidence, dict) else None,
                "reasons": by_field.pop(path, []),
            }
        )
    rows = []
    for group, names in ROW_FIELDS.items():
        items = result.get(group)
        for i, item in enumerate(items if isinstance(items, list) else []):
            path = f"{group}[{i}]"
            cells = item if isinstance(item, dict) else {}
            rows.append(
                {
                    "path": path,
                    "anchor": anchor_id(path),
                    "row_id": field_id(path),
                    "cells": [
                        {
                            "name": name,
                            "path": f"{path}.{name}",
                            "input_id": "value-" + anchor_id(f"{path}.{name}"),
                            "value": kept.get(
                                f"{path}.{name}",
                                "" if cells.get(name) is None else str(cells.get(name)),
                            ),
                        }
                        for name in names
                    ],
                    "has_evidence": isinstance(cells.get("evidence"), dict),
                    "reasons": by_field.pop(path, []),
                }
            )
    general = [r for rs in by_field.values() for r in rs]
    pages = marked_pages(subject.ocr_text, evidence_spans(result))
    return {
        "fields": fields,
        "fields_by_path": {f["path"]: f for f in fields},
        "rows": rows,
        "general_reasons": general,
        "pages": pages,
        "approvable": subject.validation.get("schema_valid") is not False
        and subject.result is not None
        and not needs_contract_v3(subject.validation),
    }
