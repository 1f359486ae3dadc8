"""The oracle engine: what a perfect model answers under each document's grammar.

``fenceline eval --engine oracle`` answers every invoice with the truth, written as the
grammar lets a model write it: for each field the offered string that reads as the true
value (an amount string that reads as the true net, a date string one of whose readings
is the true date, the description cell that is the true description). A field whose
true value no offered string reads as is left null, as a model bound to the grammar
would have to.

It measures the system without the model: what grounding, the role proofs and
validation make of a perfect answer on *your* documents (a real corpus, a fuzzer's
export), so a false accept here is the system's own, and a review names what the system
cannot read or prove on that layout. It is no measure of a model: compare a live run
with it to see what the model costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from benchmarks.eval.dataset import Case
from benchmarks.eval.engines import EngineAnswer, ExtractFn
from benchmarks.eval.truth import Truth
from pipeline.errors import MalformedOutput
from pipeline.extraction import document_in_prompt, shown_document
from pipeline.extraction.answer import Answer, ItemRef, dump_answer
from pipeline.extraction.layout import Layout
from pipeline.invoice import (
    CURRENCY_SYMBOLS,
    compact_id,
    compact_text,
    date_readings,
    decimal_mark,
    normalise_name,
    normalise_text,
    numbers_in,
    read_number,
    uses_space_groups,
)


def _enum(schema: dict[str, Any], key: str) -> list[str] | None:
    """The strings the grammar offers for ``key``; None where it takes free text."""
    prop = schema["properties"].get(key)
    if prop is None:
        return None
    for choice in prop.get("anyOf", [prop]):
        if "enum" in choice:
            return [str(v) for v in choice["enum"]]
    return None


def _pick(offered: list[str] | None, free: str | None, fits: Any) -> str | None:
    """The first offered string ``fits`` accepts; free text where the grammar takes any."""
    if offered is None:
        return free
    return next((s for s in offered if fits(s)), None)


def _cell(cells: list[str], description: str) -> str | None:
    want = normalise_text(description)
    return next((c for c in cells if normalise_text(c).rstrip(":") == want), None)


def oracle_answer(truth: Truth, ocr_text: str, schema: dict[str, Any]) -> str:
    """The answer a perfect model gives for ``ocr_text`` under ``schema`` (compact JSON)."""
    mark = decimal_mark(ocr_text)
    space = uses_space_groups(ocr_text, mark)
    doc = Layout.read(ocr_text)

    def amount(key: str, value: Decimal | None) -> str | None:
        if value is None:
            return None
        return _pick(_enum(schema, key), None, lambda s: read_number(s, mark) == value)

    def when(key: str, value: Any) -> str | None:
        if value is None:
            return None
        return _pick(_enum(schema, key), value.isoformat(), lambda s: value in date_readings(s))

    code = truth.currency
    currency = (
        _pick(
            _enum(schema, "currency"),
            code,
            lambda s: s.strip().upper() == code or code in CURRENCY_SYMBOLS.get(s.strip(), ()),
        )
        if code
        else None
    )
    vat = truth.supplier.vat_id
    answer = Answer(
        supplier=_pick(
            _enum(schema, "supplier"),
            truth.supplier.name,
            lambda s: normalise_name(s) == normalise_name(truth.supplier.name or ""),
        )
        if truth.supplier.name
        else None,
        vat_id=_pick(_enum(schema, "vat_id"), vat, lambda s: compact_id(s) == compact_id(vat))
        if vat
        else None,
        number=_pick(
            _enum(schema, "number"),
            truth.invoice_number,
            lambda s: compact_text(s) == compact_text(truth.invoice_number),
        ),
        issue_date=when("issue_date", truth.issue_date),
        due_date=when("due_date", truth.due_date),
        currency=currency,
        iban=_pick(_enum(schema, "iban"), None, lambda s: compact_text(s).upper() == truth.iban)
        if truth.iban
        else None,
        net=amount("net", truth.net_total),
        tax=amount("tax", truth.tax_total),
        gross=amount("gross", truth.gross_total),
        items=_items(truth, doc, schema),
        taxes=_taxes(truth, doc, schema, mark, space),
    )
    return dump_answer(answer)


def _items(truth: Truth, doc: Layout, schema: dict[str, Any]) -> tuple[ItemRef, ...] | None:
    prop = schema["properties"].get("items")
    if prop is None:
        return None
    positions = prop.get("prefixItems")
    if positions:  # a whole table: one position per row whose description is a choice
        out = []
        for position in positions:
            line = position["prefixItems"][0]["enum"][0]
            cells = [str(c) for c in position["prefixItems"][1]["enum"]]
            chosen = next(
                (c for item in truth.line_items if (c := _cell(cells, item.description))),
                cells[0],
            )
            out.append(ItemRef(line=line, description=chosen))
        return tuple(out)
    item = prop["items"]["prefixItems"]
    lines = item[0].get("enum")
    cells = item[1].get("enum")
    refs = []
    for truth_item in truth.line_items:
        description = truth_item.description
        if cells is not None:
            description = _cell([str(c) for c in cells], description) or ""
            if not description:
                continue
        at = next(
            (
                ln.number
                for ln in doc.lines
                if description in ln.text and (not lines or ln.number in lines)
            ),
            None,
        )
        if at is not None:
            refs.append(ItemRef(line=at, description=description))
    return tuple(refs)


def _taxes(
    truth: Truth, doc: Layout, schema: dict[str, Any], mark: str, space: bool
) -> tuple[int, ...] | None:
    if "taxes" not in schema["properties"]:
        return None
    out = []
    for tax in truth.tax_lines:
        for line in doc.lines:
            values = {p.value for p in numbers_in(line.text, mark, space_groups=space)}
            if tax.amount in values and tax.base in values and line.number not in out:
                out.append(line.number)
                break
    return tuple(out)


def oracle_extract(cases: Sequence[Case]) -> ExtractFn:
    """An engine that answers each of ``cases`` as :func:`oracle_answer` does."""
    by_text = {shown_document(case.record.text): case for case in cases}

    async def extract(
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        max_tokens: int,  # noqa: ARG001
    ) -> EngineAnswer:
        text = document_in_prompt(messages)
        case = by_text.get(text) if text is not None else None
        if case is None:
            raise MalformedOutput("oracle: the prompt shows no invoice of the dataset")
        record = case.record
        return EngineAnswer(oracle_answer(record.truth, record.text, schema), None)

    return extract
