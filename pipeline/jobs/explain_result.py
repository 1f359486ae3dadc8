"""``fenceline explain``'s result section: how the job's result was read, each value's
evidence, and the reasons it was reviewed.

A result read from an e-invoice's XML (issue 44) says so: every value's evidence is
``match: "xml"`` with the XML path it was read from as its quote. The section then names
the reader (the attempt's engine, ``cii-xml/1`` or ``ubl-xml/1``), the tokens every
attempt reported (0), and whether any model call was admitted (an admission grant is one).
Its reasons carry
the XML's own (``einvoice_invalid`` with the schema validator's messages,
``einvoice_not_holdable``, ``xml_text_mismatch`` naming the fields the page does not
print) beside validation's.

A credit note or corrected invoice (contract v3's ``document_type``) says so on the
result line, and its preceding invoice (the number and where it was read) is one of its
fields.

The evidence is read from the stored result as stored: a value without evidence shows
``-``; a model's evidence shows its page, span and quote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: Header fields of a contract v2 result, in the order they are printed.
_HEADER = (
    "supplier.name",
    "supplier.vat_id",
    "invoice_number",
    "issue_date",
    "due_date",
    "currency",
    "net_total",
    "tax_total",
    "gross_total",
    "iban",
)
#: The header as printed: contract v3's seller tax number beside the VAT id.
_PRINTED = (*_HEADER[:2], "supplier.tax_number", *_HEADER[2:])


def _value_at(result: dict[str, Any], path: str) -> Any:
    node: Any = result
    for step in path.split("."):
        node = node.get(step) if isinstance(node, dict) else None
    return node


def evidenced_fields(result: dict[str, Any]) -> Iterator[tuple[str, Any, dict[str, Any] | None]]:
    """(field, value, evidence) of every evidenced value: the header, the preceding
    invoice a credit note names, a national account to pay (``SE:BANKGIRO:50501055``),
    the prepaid amount and amount due, a second (tax) currency, the payment means where
    the supplier collects (a direct debit's mandate reference and debited account with
    it), then rows. The header includes the seller's tax number (contract v3) where the
    result holds one."""
    for name in _PRINTED:
        node = _value_at(result, name)
        if isinstance(node, dict):
            yield name, node.get("value"), node.get("evidence")
    preceding = result.get("preceding_invoice")
    if isinstance(preceding, dict):
        yield "preceding_invoice", preceding.get("number"), preceding.get("evidence")
    payee = result.get("payee_account")
    if isinstance(payee, dict):  # a national account: SCHEME:ID, or the mark of one unopened
        shown = f"{payee['scheme']}:{payee.get('id')}" if "scheme" in payee else payee.get("value")
        yield "payee_account", shown, payee.get("evidence")
    for name in (
        "prepaid_amount",
        "rounding_amount",
        "amount_due",
        "tax_currency",
        "tax_total_in_tax_currency",
        "payment_means",
        "mandate_reference",
        "debited_account",
    ):
        node = result.get(name)
        if isinstance(node, dict):
            yield name, node.get("value"), node.get("evidence")
    for group, label in (("line_items", "description"), ("tax_lines", "rate")):
        for i, row in enumerate(result.get(group) or []):
            if isinstance(row, dict):
                value = row.get(label)
                if value is None and row.get("tax_category"):  # not subject to VAT: no rate
                    value = f"category {row['tax_category']}"
                yield f"{group}[{i}]", value, row.get("evidence")


def read_from_xml(result: dict[str, Any]) -> bool:
    """Whether a stored result was read from an e-invoice's XML: it has evidence, and
    every evidence is ``match: "xml"``."""
    evidence = [e for _, _, e in evidenced_fields(result) if isinstance(e, dict)]
    return bool(evidence) and all(e.get("match") == "xml" for e in evidence)


def evidence_text(evidence: dict[str, Any] | None) -> str:
    """One evidence as a line: ``xml /ubl:Invoice/cbc:ID`` or ``page 1 [10:18] '...'``."""
    if not evidence:
        return "-"
    if evidence.get("match") == "xml":
        return f"xml {evidence.get('quote')}"
    return (
        f"page {evidence.get('page')} [{evidence.get('start')}:{evidence.get('end')}]"
        f" {evidence.get('quote')!r} ({evidence.get('match')})"
    )


def result_section(
    result: dict[str, Any] | None,
    attempts: list[dict[str, Any]],
    admission: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """The result's reading: decision, read from XML or not, reader, tokens, model calls,
    each field's evidence and the reasons (``None``: the job has no result)."""
    if result is None:
        return None
    stored = result.get("result") or {}
    validation = result.get("validation") or {}
    fields = [
        {"field": f, "value": v, "evidence": e}
        for f, v, e in evidenced_fields(stored)
        if e is not None
    ]
    from_xml = read_from_xml(stored)
    engines = [a["engine"] for a in attempts if a.get("engine")]
    return {
        "decision": result.get("decision") or validation.get("decision"),
        "document_type": stored.get("document_type") or "invoice",
        "read_from": "xml" if from_xml else "text",
        "engine": engines[-1] if engines else None,
        "prompt_tokens": sum(a.get("prompt_tokens") or 0 for a in attempts),
        "completion_tokens": sum(a.get("completion_tokens") or 0 for a in attempts),
        "model_calls_admitted": len(admission),
        "fields": fields,
        "reasons": list(validation.get("reasons") or []),
        "proofs": list(validation.get("proofs") or []),
    }


def result_lines(section: dict[str, Any] | None) -> list[str]:
    """The section as ``render_explain`` prints it (``result: none`` without a result)."""
    if section is None:
        return ["result: none"]
    tokens = f"{section['prompt_tokens']}/{section['completion_tokens']}"
    calls = section["model_calls_admitted"]
    how = (
        f"read from the e-invoice's XML by {section['engine'] or '-'}: tokens in/out {tokens},"
        + (" no model call" if calls == 0 else f" {calls} model call(s) admitted")
        if section["read_from"] == "xml"
        else f"read from the document's text by {section['engine'] or '-'}: tokens in/out"
        f" {tokens}, {calls} model call(s) admitted"
    )
    kind = section.get("document_type") or "invoice"
    what = "" if kind == "invoice" else f" ({kind.replace('_', ' ')})"
    lines = [f"result: {section['decision']}{what}, {how}"]
    for f in section["fields"]:
        lines.append(f"  {f['field']} = {f['value']!r}  <- {evidence_text(f['evidence'])}")
    for r in section["reasons"]:
        lines.append(f"  reason {r.get('code')}@{r.get('field')}: {r.get('detail')}")
    for p in section.get("proofs") or ():
        lines.append(f"  proven {p.get('field')} ({p.get('rule')}): {p.get('detail')}")
    return lines
