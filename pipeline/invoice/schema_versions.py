"""What a job's requested ``schema_version`` lets its result hold.

A job asks for a contract by number (:data:`~pipeline.invoice.SUPPORTED_SCHEMA_VERSIONS`):
``1`` for the invoice as :class:`~pipeline.invoice.Extraction` holds it without contract
v3's fields, ``3`` for contract v3 (:data:`~pipeline.invoice.CONTRACT_V3`). Only an
e-invoice reader writes v3 values, so only a result read from XML can hold more than a
v1 job asked for. Such a result's v3 values are of two kinds:

* **Binding** (:func:`binding_v3_fields`): without them a v1 result says something
  else about what is payable or who is paid. Allowances and charges (document or line
  level: the net total is not the lines' sum), an amount due other than the gross total
  (prepaid, rounding: a payment of the gross pays twice), a line's price basis quantity
  (its amount is not quantity x unit price), a tax currency, a payment means by which
  the supplier collects (no IBAN to pay), a national account to pay (no IBAN: the
  account on file is another than the one stated), a credit note or corrective invoice (the
  amounts are owed to the buyer, or replace another invoice's), and a supplier
  identified by its tax number alone (no VAT id to match it by), a VAT category "not
  subject to VAT" (rows without a rate, a seller perhaps without any tax id). A v1
  job's result holding any of them is not delivered as a v1 result (validation's
  ``contract_v3_required``). So is one holding a v3 value this module does not know
  (a field added to the contract later): unknown means binding, never dropped.
* **Additional** (:func:`within_v1`): left out, the v1 result still says what the
  invoice says. A tax number beside a VAT id, a preceding invoice on a plain invoice,
  payable amounts whose amount due is the gross total.
"""

from __future__ import annotations

from pipeline.invoice.contract import (
    PAYABLE_FIELDS,
    TAX_CURRENCY_FIELDS,
    Extraction,
    Supplier,
    uses_v3,
)

#: The request's ``schema_version`` for the invoice without contract v3's fields.
SCHEMA_V1 = 1
#: The request's ``schema_version`` for contract v3.
SCHEMA_V3 = 3


def binding_v3_fields(extraction: Extraction) -> tuple[str, ...]:
    """The paths (``amount_due``, ``line_items[2].allowances_charges``) of the v3 values
    in ``extraction`` that a v1 result cannot leave out without changing what is payable
    or who is paid (see the module docstring); empty when it has none."""
    e = extraction
    paths: list[str] = []
    if e.supplier.tax_number is not None and e.supplier.vat_id is None:
        paths.append("supplier.tax_number")
    if e.document_type != "invoice":
        paths.append("document_type")
    if e.allowances_charges:
        paths.append("allowances_charges")
    if not _amount_due_is_gross(e):
        paths.extend(name for name in PAYABLE_FIELDS if getattr(e, name) is not None)
    paths.extend(name for name in TAX_CURRENCY_FIELDS if getattr(e, name) is not None)
    if e.payment_means is not None:
        paths.append("payment_means")
    if e.payee_account is not None:
        paths.append("payee_account")
    for n, item in enumerate(e.line_items):
        if item.allowances_charges:
            paths.append(f"line_items[{n}].allowances_charges")
        if item.price_basis_quantity is not None:
            paths.append(f"line_items[{n}].price_basis_quantity")
        if item.tax_category is not None:
            paths.append(f"line_items[{n}].tax_category")
    paths.extend(
        f"tax_lines[{n}].tax_category"
        for n, line in enumerate(e.tax_lines)
        if line.tax_category is not None
    )
    if not paths and uses_v3(_less_additional(e)):
        paths.append("contract_v3")  # a v3 value not classified here: binding
    return tuple(paths)


def within_v1(extraction: Extraction) -> Extraction:
    """``extraction`` less its additional v3 values (see the module docstring), for a
    result without binding ones (:func:`binding_v3_fields` empty): what a v1 job gets.

    Raises:
        ValueError: ``extraction`` holds a binding v3 value, which no v1 result may drop.
    """
    binding = binding_v3_fields(extraction)
    if binding:
        raise ValueError(f"a v1 result cannot leave out {', '.join(binding)}")
    return _less_additional(extraction)


def _less_additional(extraction: Extraction) -> Extraction:
    defaults = Extraction.model_fields
    return extraction.model_copy(
        update={
            "supplier": extraction.supplier.model_copy(
                update={"tax_number": Supplier.model_fields["tax_number"].default}
            ),
            "preceding_invoice": defaults["preceding_invoice"].default,
            **{name: defaults[name].default for name in PAYABLE_FIELDS},
        }
    )


def _amount_due_is_gross(e: Extraction) -> bool:
    """The payable amounts, where stated, leave the gross total to pay."""
    if all(getattr(e, name) is None for name in PAYABLE_FIELDS):
        return True
    return (
        e.amount_due is not None
        and e.gross_total is not None
        and e.amount_due.value == e.gross_total.value
    )
