"""One invoice through an engine and the validation policy, scored against its truth.

:func:`evaluate_one` uses only :func:`pipeline.extraction.extractor.prepare_call` (what to
send) and :func:`pipeline.worker.interpret` (what the answer means); the row
is computed from the returned extraction's *values* and the report's decision
and reasons, so it stays right whatever contract sits behind those two functions.

Field comparison: values are normalised (amounts as :class:`~decimal.Decimal`
in plain notation, names through :func:`~pipeline.invoice.normalise_name`,
other text through :func:`~pipeline.invoice.normalise_text`, VAT ids through
:func:`~pipeline.invoice.compact_id`); line items and tax lines are compared
per field as multisets, so one skipped row costs one miss rather than shifting
all the rows after it. A null compares as null, in a list field as in a scalar one:
it adds nothing to the field's multiset, so the truth's null quantity of an
amount-only row is matched by no quantity, and any quantity read for it differs.
Contract v3's values (:data:`V3_SCORED_FIELDS`) are fields like the others: a value
the truth states and the extraction lacks or holds otherwise differs, so a SUCCEEDED
invoice with one is a false accept (:func:`judge`).

A row also carries what its family is (the record's ``family``; a generated
invoice's layout, language and variant as tags) and every review reason with the
field path it names (``reason_details``), so the report can say where wrong
invoices were accepted and which rule sent the others to review.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from typing import Any

import httpx

from benchmarks.eval.dataset import Case
from benchmarks.eval.engines import ExtractFn
from benchmarks.eval.partial_json import parse_prefix, salvage
from benchmarks.eval.truth import Truth
from pipeline.errors import FencelineError, MalformedOutput
from pipeline.extraction import DEFAULT_CONTRACT, prepare_call
from pipeline.invoice import (
    EXTRACTION_SCHEMA_VERSION,
    PAYABLE_FIELDS,
    SCALAR_FIELDS,
    SCHEMA_V1,
    TAX_CURRENCY_FIELDS,
    Extraction,
    compact_id,
    normalise_name,
    normalise_text,
)
from pipeline.worker import interpret

OUTCOMES = ("SUCCEEDED", "REVIEW_REQUIRED", "MALFORMED", "ENGINE_ERROR")
ITEM_FIELDS = ("description", "quantity", "unit_price", "line_amount", "tax_rate")
TAX_FIELDS = ("rate", "base", "amount")
#: Contract v3's header values: each compares as null where it is not stated (a plain
#: invoice's ``document_type``; payable amounts that leave the gross total due).
V3_SCALAR_FIELDS = (
    "supplier.tax_number",
    "document_type",
    "preceding_invoice.number",
    "preceding_invoice.issue_date",
    *PAYABLE_FIELDS,
    *TAX_CURRENCY_FIELDS,
    "payment_means",
    "mandate_reference",
    "debited_account",
    "payee_account",
)
ALLOWANCE_FIELDS = ("kind", "amount", "tax_rate")
LINE_ALLOWANCE_FIELDS = ("kind", "amount")
#: Contract v3's scored values (docs/eval-dataset.md): compared as every other field.
V3_SCORED_FIELDS = (
    *V3_SCALAR_FIELDS,
    *(f"allowances_charges[].{f}" for f in ALLOWANCE_FIELDS),
    "line_items[].price_basis_quantity",
    *(f"line_items[].allowances_charges[].{f}" for f in LINE_ALLOWANCE_FIELDS),
)
FIELDS = (
    *SCALAR_FIELDS,
    *(f"line_items[].{f}" for f in ITEM_FIELDS),
    *(f"tax_lines[].{f}" for f in TAX_FIELDS),
    *V3_SCORED_FIELDS,
)

Values = dict[str, Counter[str]]


def _amount(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _norm(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if name == "supplier.name":
        return normalise_name(value)
    if name in ("supplier.vat_id", "supplier.tax_number"):
        return compact_id(value)
    if isinstance(value, Decimal):
        return _amount(value)
    if isinstance(value, date):
        return value.isoformat()
    return normalise_text(str(value))


def _stated(scalars: dict[str, Any]) -> dict[str, Any]:
    """``scalars`` with contract v3's unstated values as null: a plain invoice's document
    type, and payable amounts that leave the gross total due (no prepaid, no rounding),
    which contract v3 states only where the amount due differs."""
    out = dict(scalars)
    if out.get("document_type") == "invoice":
        out["document_type"] = None
    due, gross = out.get("amount_due"), out.get("gross_total")
    if (
        due is not None
        and due == gross
        and not out.get("prepaid_amount")
        and not out.get("rounding_amount")
    ):
        out.update(dict.fromkeys(PAYABLE_FIELDS))
    return out


def _normalised(
    scalars: dict[str, Any],
    items: Iterable[dict[str, Any]],
    taxes: Iterable[dict[str, Any]],
    allowances: Iterable[dict[str, Any]] = (),
) -> Values:
    """The comparison form of raw values; list fields pool all rows into one multiset.

    An item row may carry ``price_basis_quantity`` and ``allowances_charges`` (a list
    of ``kind``/``amount`` dicts), contract v3's; ``allowances`` are the document's."""
    stated = _stated(scalars)
    out: Values = {}
    for name in (*SCALAR_FIELDS, *V3_SCALAR_FIELDS):
        v = _norm(name, stated.get(name))
        out[name] = Counter([v] if v is not None else [])
    item_rows, tax_rows = list(items), list(taxes)
    for name in ITEM_FIELDS:
        out[f"line_items[].{name}"] = Counter(
            normalise_text(row[name]).casefold() if name == "description" else _amount(row[name])
            for row in item_rows
            if row[name] is not None
        )
    for name in TAX_FIELDS:
        out[f"tax_lines[].{name}"] = Counter(_amount(row[name]) for row in tax_rows)
    entries = list(allowances)
    for name in ALLOWANCE_FIELDS:
        out[f"allowances_charges[].{name}"] = Counter(
            str(_norm(name, entry[name])) for entry in entries
        )
    out["line_items[].price_basis_quantity"] = Counter(
        _amount(row["price_basis_quantity"])
        for row in item_rows
        if row.get("price_basis_quantity") is not None
    )
    line_entries = [entry for row in item_rows for entry in row.get("allowances_charges", ())]
    for name in LINE_ALLOWANCE_FIELDS:
        out[f"line_items[].allowances_charges[].{name}"] = Counter(
            str(_norm(name, entry[name])) for entry in line_entries
        )
    return out


def _item_row(item: Any) -> dict[str, Any]:
    """An item's scored values (a truth's or an extraction's line item)."""
    return {f: getattr(item, f) for f in ITEM_FIELDS} | {
        "price_basis_quantity": item.price_basis_quantity,
        "allowances_charges": [
            {"kind": a.kind, "amount": a.amount} for a in item.allowances_charges
        ],
    }


def _allowance_rows(entries: Iterable[Any]) -> list[dict[str, Any]]:
    return [{f: getattr(entry, f) for f in ALLOWANCE_FIELDS} for entry in entries]


def truth_values(truth: Truth, *, schema_version: int) -> Values:
    """The values a result of a job asking for ``schema_version`` must hold to be right.

    A v1 result (:data:`~pipeline.invoice.SCHEMA_V1`: every invoice a model reads, whatever
    the job asked) leaves out contract v3's *additional* values, which the invoice's
    meaning does not need (a seller's tax number beside its VAT id, the preceding invoice
    of a plain invoice; :func:`~pipeline.invoice.within_v1`), so they are not scored. Its
    *binding* values (allowances, an amount due other than the gross, a credit note...)
    are: a SUCCEEDED v1 result without them says something else about what is payable,
    a false accept. A v3 result (:data:`~pipeline.invoice.SCHEMA_V3`) is scored on all.
    """
    if schema_version == SCHEMA_V1:
        truth = _within_v1(truth)
    scalars = {
        name: getattr(truth, name)
        for name in (*SCALAR_FIELDS, *V3_SCALAR_FIELDS)
        if "." not in name
    }
    scalars["supplier.name"] = truth.supplier.name
    scalars["supplier.vat_id"] = truth.supplier.vat_id
    scalars["supplier.tax_number"] = truth.supplier.tax_number
    preceding = truth.preceding_invoice
    scalars["preceding_invoice.number"] = preceding.number if preceding else None
    scalars["preceding_invoice.issue_date"] = preceding.issue_date if preceding else None
    return _normalised(
        scalars,
        (_item_row(i) for i in truth.line_items),
        (dict(t) for t in truth.tax_lines),
        _allowance_rows(truth.allowances_charges),
    )


def _within_v1(truth: Truth) -> Truth:
    """``truth`` less what a v1 result leaves out (:func:`~pipeline.invoice.within_v1`)."""
    supplier = truth.supplier
    if supplier.vat_id is not None:
        supplier = supplier.model_copy(update={"tax_number": None})
    plain = truth.document_type == "invoice"
    return truth.model_copy(
        update={
            "supplier": supplier,
            "preceding_invoice": None if plain else truth.preceding_invoice,
        }
    )


def extraction_values(e: Extraction) -> Values:
    """The values an extraction holds (evidence and model flags are not values)."""

    def value(node: Any) -> Any:
        return None if node is None else node.value

    scalars = {
        name: value(getattr(e, name))
        for name in (*SCALAR_FIELDS, *V3_SCALAR_FIELDS)
        if "." not in name and name not in ("document_type", "payee_account")
    }
    scalars["document_type"] = e.document_type
    scalars["payee_account"] = e.payee_account.canonical if e.payee_account else None
    scalars["supplier.name"] = value(e.supplier.name)
    scalars["supplier.vat_id"] = value(e.supplier.vat_id)
    scalars["supplier.tax_number"] = value(e.supplier.tax_number)
    preceding = e.preceding_invoice
    scalars["preceding_invoice.number"] = preceding.number if preceding else None
    scalars["preceding_invoice.issue_date"] = preceding.issue_date if preceding else None
    return _normalised(
        scalars,
        (_item_row(i) for i in e.line_items),
        ({f: getattr(t, f) for f in TAX_FIELDS} for t in e.tax_lines),
        _allowance_rows(e.allowances_charges),
    )


def _field_counts(predicted: Values, truth: Values) -> dict[str, list[int]]:
    """Per field ``[true positives, predicted, true]``."""
    return {
        name: [
            sum((predicted[name] & truth[name]).values()),
            sum(predicted[name].values()),
            sum(truth[name].values()),
        ]
        for name in FIELDS
    }


def _salvaged(text: str | None, contract: str) -> Values | None:
    """What a cut-off answer had already written, for contracts whose wire form is known."""
    if not text or contract != EXTRACTION_SCHEMA_VERSION:
        return None
    salvaged = salvage(Extraction, parse_prefix(text))
    return extraction_values(salvaged) if salvaged is not None else None


async def evaluate_one(
    case: Case,
    extract: ExtractFn,
    *,
    max_tokens: int | None = None,
    include_schema: bool = True,
    contract: str = DEFAULT_CONTRACT,
) -> dict[str, Any]:
    """Run one invoice through the engine and the validation policy; never raises.

    ``max_tokens`` caps the output bound (a small model's context window may not
    hold the full estimate); ``include_schema`` also prints the schema in the prompt.
    """
    record = case.record
    call = prepare_call(record.text, contract=contract, include_schema=include_schema)
    budget = call.max_tokens if max_tokens is None else min(call.max_tokens, max_tokens)
    row: dict[str, Any] = {
        "id": record.id,
        **({"line": case.line} if case.line is not None else {}),
        **case.tags,
        **({"family": record.family} if record.family is not None else {}),
        **({"notes": record.notes} if record.notes is not None else {}),
        "line_items": len(record.truth.line_items),
        "expected_decision": record.expected_decision,
        "contract": call.contract,
        "prompt_version": call.prompt_version,
        "reasons": [],
        "reason_details": [],
        "rules": [],
        "changes": [],
        "error": None,
        "completion_tokens": None,
    }
    truth = truth_values(record.truth, schema_version=SCHEMA_V1)  # a model's reading
    predicted: Values = {name: Counter() for name in FIELDS}
    before_cap: Values | None = None
    text: str | None = None
    started = time.perf_counter()
    try:
        answer = await extract(call.messages, call.json_schema, budget)
        text = answer.text
        row["completion_tokens"] = answer.completion_tokens
        master_data, today = record.tenant_master_data(), record.validation_date()
        result = interpret(
            answer.text,
            record.text,
            master_data,
            today=today,
            contract=call.contract,
            read_by_ocr=bool(case.tags.get("ocr_pages")),  # as the worker decides a scan
            ocr=case.ocr,
        )
    except MalformedOutput as exc:
        row.update(outcome="MALFORMED", error=str(exc)[:300])
        before_cap = _salvaged(exc.text if exc.text is not None else text, call.contract)
        if exc.usage is not None and row["completion_tokens"] is None:
            row["completion_tokens"] = exc.usage.completion_tokens
    except FencelineError as exc:  # timeouts, context too long, engine down
        row.update(outcome="ENGINE_ERROR", error=f"{type(exc).__name__}: {exc}"[:300])
        if exc.usage is not None:
            row["completion_tokens"] = exc.usage.completion_tokens
    except (httpx.HTTPError, KeyError, IndexError, ValueError, TypeError) as exc:
        row.update(outcome="ENGINE_ERROR", error=f"{type(exc).__name__}: {exc}"[:300])
    else:
        predicted = extraction_values(result.extraction)
        row.update(
            outcome=result.report.decision.value,
            reasons=[r.code.value for r in result.report.reasons],
            reason_details=[
                {"code": r.code.value, "field": r.field, "detail": r.detail[:200]}
                | ({"rule": r.rule} if r.rule is not None else {})
                for r in result.report.reasons
            ],
            rules=[r.rule for r in result.report.reasons if r.rule is not None],
            changes=[c.rule for c in result.changes],
        )
    row["latency_s"] = round(time.perf_counter() - started, 4)
    row["answer"] = text  # the engine's raw reply, to read why a field differs
    row.update(judge(row["outcome"], predicted, truth, record.expected_decision))
    written = before_cap if before_cap is not None else predicted
    row["fields_before_cap"] = _field_counts(written, truth)
    return row


def judge(outcome: str, predicted: Values, truth: Values, expected: str | None) -> dict[str, Any]:
    """A row's verdict on one invoice decided ``outcome`` with values ``predicted``:
    its ``fields`` counts, ``differing_fields`` (every field of :data:`FIELDS`, contract
    v3's included), ``exact_match``, ``decision_right``, ``acceptable`` and
    ``false_accept`` (SUCCEEDED, and not acceptable)."""
    parsed = outcome in ("SUCCEEDED", "REVIEW_REQUIRED")
    differing = [n for n in FIELDS if predicted[n] != truth[n]] if parsed else []
    exact = parsed and not differing
    # Right to deliver: every value equals the truth and nothing asks for review.
    acceptable = exact and expected != "REVIEW_REQUIRED"
    return {
        "fields": _field_counts(predicted, truth),
        "differing_fields": differing,
        "exact_match": exact,
        "decision_right": None if expected is None else outcome == expected,
        "acceptable": acceptable,
        "false_accept": outcome == "SUCCEEDED" and not acceptable,
    }
