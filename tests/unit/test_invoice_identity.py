"""The identity of a supplier invoice: what makes two jobs the same invoice."""

from __future__ import annotations

from typing import Any

from pipeline.identity import InvoiceIdentity, invoice_identity


def result(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "supplier": {"name": {"value": "ACME  GmbH"}, "vat_id": {"value": "de 123 456 789"}},
        "invoice_number": {"value": " inv-42 "},
        "gross_total": {"value": "1210.0"},
        "currency": {"value": "eur"},
    }
    base.update(kw)
    return base


def test_layout_and_case_do_not_change_the_identity() -> None:
    a = invoice_identity(result())
    b = invoice_identity(
        result(
            supplier={"name": {"value": "acme gmbh"}, "vat_id": {"value": "DE123456789"}},
            invoice_number={"value": "INV-42"},
            gross_total={"value": 1210},
            currency={"value": "EUR"},
        )
    )
    assert a == b == InvoiceIdentity("vat:DE123456789", "INV-42", "1210.00 EUR")


def test_a_different_total_number_or_supplier_is_another_invoice() -> None:
    a = invoice_identity(result())
    assert invoice_identity(result(gross_total={"value": "1210.01"})) != a
    assert invoice_identity(result(invoice_number={"value": "INV-43"})) != a
    assert invoice_identity(result(supplier={"vat_id": {"value": "DE999"}})) != a


def test_without_a_vat_id_the_name_identifies_the_supplier() -> None:
    ident = invoice_identity(result(supplier={"name": {"value": "Acme   GmbH"}, "vat_id": None}))
    assert ident is not None and ident.supplier == "name:acme gmbh"


def test_no_invoice_number_or_no_supplier_means_no_identity() -> None:
    assert invoice_identity(result(invoice_number=None)) is None
    assert invoice_identity(result(supplier={"name": None, "vat_id": None})) is None
    assert invoice_identity({"raw_output": "{}"}) is None
