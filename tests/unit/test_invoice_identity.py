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


def test_without_a_vat_id_the_tax_number_identifies_the_supplier() -> None:
    """An e-invoice's seller known by its tax number (BT-32): the same invoice under
    another spelling of the name is still one invoice, another tax number another."""
    seller = {
        "name": {"value": "Acme GmbH"},
        "vat_id": None,
        "tax_number": {"value": "201/113 40209"},
    }
    ident = invoice_identity(result(supplier=seller))
    assert ident is not None and ident.supplier == "tax:201/11340209"
    renamed = {**seller, "name": {"value": "ACME Gesellschaft mbH"}}
    assert invoice_identity(result(supplier=renamed)) == ident
    other = {**seller, "tax_number": {"value": "201/113/40208"}}
    assert invoice_identity(result(supplier=other)) != ident
    # a VAT id, where stated, stays the key: the tax number beside it changes nothing
    with_vat = {**seller, "vat_id": {"value": "DE123456789"}}
    vat_ident = invoice_identity(result(supplier=with_vat))
    assert vat_ident is not None and vat_ident.supplier == "vat:DE123456789"


def test_no_invoice_number_or_no_supplier_means_no_identity() -> None:
    assert invoice_identity(result(invoice_number=None)) is None
    assert invoice_identity(result(supplier={"name": None, "vat_id": None})) is None
    assert invoice_identity({"raw_output": "{}"}) is None
