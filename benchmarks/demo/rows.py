"""One row per demo invoice: what was extracted, what was decided, what the ERP got.

Pure functions over the rows ``report_invoice_rows`` returns (one per job, see
``sql/queries/reports.sql``) and the generator's truth, so the table the demo
prints can be tested without Ray, vLLM or a database.

* **Extracted values** are read from the job's stored result tolerantly: an
  evidenced field (``{"value": ..., "evidence": ...}``) or a plain value, and
  nothing at all for a result that is the model's raw text
  (``{"raw_output": ...}``, malformed output sent to review).
* **Truth**: the same fields of the generator's ``truth`` (the faithful
  transcription). Strings compare after NFC and whitespace folding (a name
  printed in NFD is the same name), amounts and quantities as decimals
  (``"19"`` equals ``"19.00"``), IBANs without spaces. Line items compare by
  their numbers only (quantity, unit price, amount, rate), not descriptions.
  Evidence offsets are not compared: the system derives them.
* **ERP posting** comes from the reference receiver's own ``erp_postings``, in
  the ERP's database, joined to the job's row by id (:mod:`benchmarks.demo.erp`):
  ``applications`` counts every run of its posting step per job (once per
  delivery id that passed its inbox), so a job that reached the ERP twice
  shows ``posted 2x`` even though the job-level guard let only one post.
* A **false accept** is a SUCCEEDED job (delivered to the ERP) whose invoice
  should have gone to review, or whose extracted values differ from the truth.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from pipeline.invoice import SCALAR_FIELDS

#: Every compared field name (a differing-field list names some of these).
COMPARED_FIELDS = (*SCALAR_FIELDS, "line_items", "tax_lines")
_DECIMAL_FIELDS = frozenset({"net_total", "tax_total", "gross_total"})
_LINE_NUMBERS = ("quantity", "unit_price", "line_amount", "tax_rate")
_TAX_NUMBERS = ("rate", "base", "amount")

SUCCEEDED = "SUCCEEDED"
REVIEW = "REVIEW_REQUIRED"
FAILED = "FAILED_TERMINAL"


def _value(node: Any) -> Any:
    """The value of an evidenced field (``{"value": v, ...}``) or of a plain one."""
    if isinstance(node, Mapping):
        return node.get("value")
    return node


def _at(result: Mapping[str, Any], path: str) -> Any:
    node: Any = result
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return _value(node)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return " ".join(unicodedata.normalize("NFC", str(value)).split())


def _number(value: Any) -> Decimal | str | None:
    if value is None:
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return _text(value)


def _numbers(items: Any, keys: Sequence[str]) -> tuple[tuple[Decimal | str | None, ...], ...]:
    if not isinstance(items, list | tuple):
        return ()
    rows = (
        tuple(_number(_value(i.get(k))) if isinstance(i, Mapping) else None for k in keys)
        for i in items
    )
    return tuple(sorted(rows, key=repr))  # as a multiset, like fenceline eval


def has_extraction(result: Mapping[str, Any] | None) -> bool:
    """Whether ``result`` holds extracted fields (not missing, not raw model text)."""
    return isinstance(result, Mapping) and ("supplier" in result or "gross_total" in result)


def comparable(result: Mapping[str, Any]) -> dict[str, Any]:
    """The compared fields of a stored result (or of ``truth.model_dump(mode="json")``)."""
    out: dict[str, Any] = {}
    for path in SCALAR_FIELDS:
        raw = _at(result, path)
        if path in _DECIMAL_FIELDS:
            out[path] = _number(raw)
        elif path == "iban":
            out[path] = None if raw is None else str(raw).replace(" ", "").upper()
        else:
            out[path] = _text(raw)
    out["line_items"] = _numbers(result.get("line_items"), _LINE_NUMBERS)
    out["tax_lines"] = _numbers(result.get("tax_lines"), _TAX_NUMBERS)
    return out


def differing_fields(result: Mapping[str, Any], truth: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the compared fields whose extracted value is not the truth's."""
    got, want = comparable(result), comparable(truth)
    return tuple(k for k in want if got.get(k) != want[k])


def _reasons(job: Mapping[str, Any]) -> tuple[str, ...]:
    """Reason codes: validation's for a result, the failure's for a terminal job."""
    codes: list[str] = []
    validation = job.get("validation")
    if isinstance(validation, Mapping):
        for r in validation.get("reasons") or []:
            codes.append(str(r.get("code", r)) if isinstance(r, Mapping) else str(r))
    if job.get("state") == FAILED or not codes:
        for key in ("terminal_reason", "last_error_class"):
            if job.get(key) and job.get("state") != SUCCEEDED:
                codes.append(str(job[key]))
    return tuple(dict.fromkeys(codes))


@dataclass(frozen=True)
class InvoiceRow:
    """What the demo shows for one invoice (and writes to ``demo.json``'s ``invoices``)."""

    index: int
    job_id: str
    tenant: str
    seed: int
    variant: str
    expected: str
    decision: str
    reasons: tuple[str, ...]
    supplier: str | None
    invoice_number: str | None
    gross_total: str | None
    currency: str | None
    erp_applications: int
    erp_posted: bool
    delivery: str | None
    extracted: bool
    differing_fields: tuple[str, ...]
    completion_tokens: int = 0
    attempts: int = 0
    error_detail: str | None = None
    #: How the invoice was sent: ``text`` (pasted), ``pdf`` or ``scan`` (uploaded files).
    document: str = "text"

    @property
    def matches_truth(self) -> bool | None:
        """True/False when something was extracted, None when nothing was."""
        return not self.differing_fields if self.extracted else None

    @property
    def erp(self) -> str:
        """``posted once``, ``not posted`` or ``posted Nx`` (N applications of one job)."""
        if self.erp_applications > 1:
            return f"posted {self.erp_applications}x"
        if self.erp_posted or self.erp_applications == 1:
            return "posted once"
        return "not posted"

    @property
    def posted_exactly_once(self) -> bool:
        return self.erp_posted and self.erp_applications == 1

    @property
    def false_accept(self) -> bool:
        """Accepted (SUCCEEDED) although it should have gone to review or is wrong."""
        return self.decision == SUCCEEDED and (
            self.expected != SUCCEEDED or self.matches_truth is not True
        )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reasons"] = list(self.reasons)
        out["differing_fields"] = list(self.differing_fields)
        out.update(
            job_id_short=self.job_id[:8],
            gross=None if self.gross_total is None else f"{self.gross_total} {self.currency or ''}",
            matches_truth=self.matches_truth,
            erp_posting=self.erp,
            posted_exactly_once=self.posted_exactly_once,
            false_accept=self.false_accept,
            decision_as_expected=self.decision == self.expected,
        )
        return out


def build_row(
    index: int,
    submitted: Mapping[str, Any],
    job: Mapping[str, Any],
    truth: Mapping[str, Any],
) -> InvoiceRow:
    """One row from what the demo submitted, the job's report row and the truth's JSON.

    ``submitted`` has ``job_id``, ``tenant``, ``seed``, ``variant`` and ``expected``, and
    ``document`` (``text`` where absent);
    ``job`` is a ``report_invoice_rows`` row with the ERP's ``erp_applications`` and
    ``erp_posted`` joined in (``result``/``validation`` None when the job stored no
    result).
    """
    result = job.get("result")
    extracted = has_extraction(result)
    values: Mapping[str, Any] = result if extracted and isinstance(result, Mapping) else {}
    gross = _at(values, "gross_total")
    return InvoiceRow(
        index=index,
        job_id=str(submitted["job_id"]),
        tenant=str(submitted["tenant"]),
        seed=int(submitted["seed"]),
        variant=str(submitted["variant"]),
        expected=str(submitted["expected"]),
        decision=str(job.get("state") or "?"),
        reasons=_reasons(job),
        supplier=_text(_at(values, "supplier.name")),
        invoice_number=_text(_at(values, "invoice_number")),
        gross_total=None if gross is None else str(gross),
        currency=_text(_at(values, "currency")),
        erp_applications=int(job.get("erp_applications") or 0),
        erp_posted=bool(job.get("erp_posted")),
        delivery=job.get("delivery_states"),
        extracted=extracted,
        differing_fields=differing_fields(values, truth) if extracted else (),
        completion_tokens=int(job.get("completion_tokens") or 0),
        attempts=int(job.get("attempt") or 0),
        error_detail=None if not job.get("last_error") else str(job["last_error"])[:200],
        document=str(submitted.get("document") or "text"),
    )


def summarise_rows(rows: Iterable[InvoiceRow], wall_seconds: float) -> dict[str, Any]:
    """The summary line's figures."""
    rows = list(rows)
    by = {s: sum(1 for r in rows if r.decision == s) for s in (SUCCEEDED, REVIEW, FAILED)}
    return {
        "invoices": len(rows),
        "succeeded": by[SUCCEEDED],
        "review_required": by[REVIEW],
        "failed": by[FAILED],
        "unsettled": len(rows) - sum(by.values()),
        "posted_exactly_once": sum(1 for r in rows if r.posted_exactly_once),
        "posted_more_than_once": sum(1 for r in rows if r.erp_applications > 1),
        "false_accepts": sum(1 for r in rows if r.false_accept),
        "decisions_as_expected": sum(1 for r in rows if r.decision == r.expected),
        "extracted_equal_to_truth": sum(1 for r in rows if r.matches_truth is True),
        "wall_seconds": wall_seconds,
    }
