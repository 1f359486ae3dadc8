"""Identity of documents and requests.

A filename is not document identity: the content digest is. The request hash
covers everything that changes the result — document version, extraction
schema version, model policy and result-affecting options — as canonical JSON,
so the same idempotency key with a different request is detected (409).

An invoice has an identity of its own (:class:`InvoiceIdentity`): the same
supplier invoice under two idempotency keys is two requests but one invoice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any


def content_digest(content: bytes) -> str:
    """sha256 hex of the exact document bytes."""
    return hashlib.sha256(content).hexdigest()


def object_version(digest: str) -> str:
    """The immutable version string stored with a document: its content address."""
    return f"sha256:{digest}"


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def request_hash(
    *,
    object_version: str,
    schema_version: int,
    model_policy: str,
    options: dict[str, Any] | None = None,
) -> str:
    """sha256 of the canonical request: what decides whether two requests are 'the same'."""
    body = {
        "object_version": object_version,
        "schema_version": schema_version,
        "model_policy": model_policy,
        "options": options or {},
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


#: The validation reason of a job whose supplier invoice another job already holds.
DUPLICATE_INVOICE = "duplicate_invoice"


@dataclass(frozen=True)
class InvoiceIdentity:
    """What makes two jobs the same supplier invoice, whatever their documents.

    Supplier (VAT id when printed, else the tax number an e-invoice states, else the
    name), invoice number and gross total
    with its currency, each normalised so layout and case do not matter: the same
    invoice scanned twice, resubmitted under a new idempotency key, has one
    identity, and a posting to the ERP must happen for only one of its jobs.
    """

    supplier: str
    invoice_number: str
    gross_total: str


def _value(node: Any) -> Any:
    """A contract field's printed value (``{"value": ..., "evidence": ...}`` or plain)."""
    return node.get("value") if isinstance(node, dict) else node


def _squash(text: Any) -> str:
    return "".join(str(text).split()).upper() if text is not None else ""


def invoice_identity(result: Mapping[str, Any]) -> InvoiceIdentity | None:
    """The identity of an extraction result, or None without an invoice number or supplier."""
    raw = result.get("supplier")
    supplier: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    vat = _squash(_value(supplier.get("vat_id")))
    tax = _squash(_value(supplier.get("tax_number")))
    name = " ".join(str(_value(supplier.get("name")) or "").split()).casefold()
    number = _squash(_value(result.get("invoice_number")))
    if not number or not (vat or tax or name):
        return None
    total = _value(result.get("gross_total"))
    try:
        gross = f"{Decimal(str(total)).quantize(Decimal('0.01'))}" if total is not None else ""
    except InvalidOperation:
        gross = _squash(total)
    currency = _squash(_value(result.get("currency")))
    return InvoiceIdentity(
        supplier=f"vat:{vat}" if vat else f"tax:{tax}" if tax else f"name:{name}",
        invoice_number=number,
        gross_total=f"{gross} {currency}".strip(),
    )
