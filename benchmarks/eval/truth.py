"""A dataset line's truth and master data (docs/eval-dataset.md).

Truth holds values only (no evidence spans): the evaluation compares what the
extraction says, whatever contract the model answered in. It holds what real
invoices print, including what contract v2 cannot: a supplier with a tax number and
no VAT id (``supplier.vat_id`` null), no currency printed (``currency`` null), an
amount-only row such as shipping or a flat fee (an item's ``quantity`` and
``unit_price`` null). Such a line is evaluated, not refused; a null compares as null.
Contract v3's values are optional keys (:class:`Truth`): the supplier's tax number,
allowances and charges at document and line level, a line's price basis, the payable
amounts, a tax currency, a payment means, a credit note and its preceding invoice.
:func:`truth_from_extraction` writes a ground-truth extraction's values in this form.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, PlainSerializer, PlainValidator

from pipeline.invoice import Extraction, TenantMasterData

_DECIMAL_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_CURRENCY_RE = re.compile(r"[A-Z]{3}")
_IBAN_RE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}")


def _decimal(value: object) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if not isinstance(value, str) or not _DECIMAL_RE.fullmatch(value):
        raise ValueError(f'must be a decimal string such as "1234.50", got {value!r}')
    return Decimal(value)


def _date(value: object) -> date:
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        raise ValueError(f"must be a date string YYYY-MM-DD, got {value!r}")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"is not a calendar date: {value!r}") from exc


def _pattern(pattern: re.Pattern[str], what: str) -> Any:
    def check(value: object) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return check


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__}")
    return value


def _family(value: object) -> str:
    """Names joined by ``+`` (a fuzzer's transformations), each non-empty; spaces
    around a name are dropped so ``"a + b"`` and ``"a+b"`` are one family."""
    names = [name.strip() for name in _text(value).split("+")]
    if not all(names):
        raise ValueError(f'must be one name or names joined by "+", got {value!r}')
    return "+".join(names)


DecimalStr = Annotated[
    Decimal,
    PlainValidator(_decimal),
    PlainSerializer(lambda d: format(d, "f"), return_type=str, when_used="json"),
]
DateStr = Annotated[
    date,
    PlainValidator(_date),
    PlainSerializer(lambda d: d.isoformat(), return_type=str, when_used="json"),
]
Currency = Annotated[str, PlainValidator(_pattern(_CURRENCY_RE, "an ISO 4217 code like EUR"))]
Iban = Annotated[
    str, PlainValidator(_pattern(_IBAN_RE, "a compact upper-case IBAN like DE89370400440532013000"))
]
Text = Annotated[str, PlainValidator(_text)]
Family = Annotated[str, PlainValidator(_family)]


class _Strict(BaseModel):
    """Inside ``truth`` and ``master_data``: every key known (leaf types never coerce)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TruthSupplier(_Strict):
    name: Text
    #: Null: the supplier prints no VAT id (a tax number only, say).
    vat_id: Text | None
    #: Contract v3: the seller's tax registration number (BT-32), where stated.
    tax_number: Text | None = None


class TruthLineAllowanceCharge(_Strict):
    """Contract v3: a line-level allowance or charge (BG-27, BG-28), without VAT."""

    kind: Literal["allowance", "charge"]
    amount: DecimalStr


class TruthLineItem(_Strict):
    """One row; ``quantity`` and ``unit_price`` null for an amount-only row (shipping).

    Contract v3 (optional): the row's ``allowances_charges`` and the quantity its unit
    price is stated for (``price_basis_quantity``, BT-149; null for 1)."""

    description: Text
    quantity: DecimalStr | None
    unit_price: DecimalStr | None
    line_amount: DecimalStr
    tax_rate: DecimalStr
    allowances_charges: tuple[TruthLineAllowanceCharge, ...] = ()
    price_basis_quantity: DecimalStr | None = None


class TruthAllowanceCharge(_Strict):
    """Contract v3: a document-level allowance or charge (BG-20, BG-21), without VAT,
    with the VAT rate whose base it changes."""

    kind: Literal["allowance", "charge"]
    amount: DecimalStr
    tax_rate: DecimalStr


class TruthPrecedingInvoice(_Strict):
    """Contract v3: the invoice a credit note or correction refers to (BG-3)."""

    number: Text
    issue_date: DateStr | None = None


class TruthTaxLine(_Strict):
    rate: DecimalStr
    base: DecimalStr
    amount: DecimalStr


class Truth(_Strict):
    """The invoice's true values.

    The keys after ``tax_lines`` are contract v3's (docs/eval-dataset.md): optional, each
    left out (or empty, null, ``"invoice"``) where the invoice states no such value.
    """

    supplier: TruthSupplier
    invoice_number: Text
    issue_date: DateStr
    due_date: DateStr | None
    currency: Currency | None
    iban: Iban | None
    net_total: DecimalStr
    tax_total: DecimalStr
    gross_total: DecimalStr
    line_items: tuple[TruthLineItem, ...]
    tax_lines: tuple[TruthTaxLine, ...]
    document_type: Literal["invoice", "credit_note", "corrective_invoice"] = "invoice"
    preceding_invoice: TruthPrecedingInvoice | None = None
    allowances_charges: tuple[TruthAllowanceCharge, ...] = ()
    prepaid_amount: DecimalStr | None = None
    rounding_amount: DecimalStr | None = None
    amount_due: DecimalStr | None = None
    tax_currency: Currency | None = None
    tax_total_in_tax_currency: DecimalStr | None = None
    #: The payment means code (UNTDID 4461) where the supplier collects (card, debit).
    payment_means: Text | None = None
    #: A direct debit's mandate reference (BT-89) and the account it debits (BT-91).
    mandate_reference: Text | None = None
    debited_account: Text | None = None
    #: The national account to pay (BT-84 that is no IBAN), canonical ``SCHEME:ID``
    #: (``SE:BANKGIRO:50501055``, contract v3's ``payee_account``).
    payee_account: Text | None = None

    def as_json(self) -> dict[str, Any]:
        """The truth as a dataset line states it: every required key (a null kept), and
        each contract v3 key only where it is stated."""
        data: dict[str, Any] = self.model_dump(mode="json")
        _drop_unstated(data, self)
        _drop_unstated(data["supplier"], self.supplier)
        for row, item in zip(data["line_items"], self.line_items, strict=True):
            _drop_unstated(row, item)
        return data


def _drop_unstated(data: dict[str, Any], model: BaseModel) -> None:
    """Remove from ``data`` the optional keys of ``model`` at their default."""
    for name, spec in type(model).model_fields.items():
        if not spec.is_required() and getattr(model, name) == spec.default:
            data.pop(name, None)


class MasterSupplier(_Strict):
    name: Text
    vat_id: Text | None
    ibans: tuple[Iban, ...] = ()


class MasterData(_Strict):
    """The tenant's suppliers and permitted currencies."""

    suppliers: tuple[MasterSupplier, ...]
    currencies: tuple[Currency, ...]

    @classmethod
    def of(cls, master: TenantMasterData) -> MasterData:
        """``master`` as a dataset line states it (IBANs and currencies sorted)."""
        return cls(
            suppliers=tuple(
                MasterSupplier(name=s.name, vat_id=s.vat_id, ibans=tuple(sorted(s.ibans)))
                for s in master.suppliers
            ),
            currencies=tuple(sorted(master.permitted_currencies)),
        )


def truth_from_extraction(e: Extraction) -> Truth:
    """The values of a ground-truth extraction (a generator's, or one an e-invoice's XML
    states, contract v3's values included), its evidence dropped."""
    missing = [
        name
        for name, value in (
            ("supplier.name", e.supplier.name),
            ("invoice_number", e.invoice_number),
            ("issue_date", e.issue_date),
            ("net_total", e.net_total),
            ("tax_total", e.tax_total),
            ("gross_total", e.gross_total),
        )
        if value is None
    ]
    if missing:
        raise ValueError(f"ground truth lacks {', '.join(missing)}")
    assert e.supplier.name and e.invoice_number and e.issue_date
    assert e.net_total and e.tax_total and e.gross_total

    def value(node: Any) -> Any:
        return None if node is None else node.value

    preceding = e.preceding_invoice
    return Truth(
        supplier=TruthSupplier(
            name=e.supplier.name.value,
            vat_id=value(e.supplier.vat_id),
            tax_number=value(e.supplier.tax_number),
        ),
        invoice_number=e.invoice_number.value,
        issue_date=e.issue_date.value,
        due_date=e.due_date.value if e.due_date else None,
        currency=e.currency.value if e.currency else None,
        iban=e.iban.value if e.iban else None,
        net_total=e.net_total.value,
        tax_total=e.tax_total.value,
        gross_total=e.gross_total.value,
        line_items=tuple(
            TruthLineItem(
                description=i.description,
                quantity=i.quantity,
                unit_price=i.unit_price,
                line_amount=i.line_amount,
                tax_rate=i.tax_rate,
                allowances_charges=tuple(
                    TruthLineAllowanceCharge(kind=a.kind, amount=a.amount)
                    for a in i.allowances_charges
                ),
                price_basis_quantity=i.price_basis_quantity,
            )
            for i in e.line_items
        ),
        tax_lines=tuple(
            TruthTaxLine(rate=t.rate, base=t.base, amount=t.amount) for t in e.tax_lines
        ),
        document_type=e.document_type,
        preceding_invoice=(
            TruthPrecedingInvoice(number=preceding.number, issue_date=preceding.issue_date)
            if preceding
            else None
        ),
        allowances_charges=tuple(
            TruthAllowanceCharge(kind=a.kind, amount=a.amount, tax_rate=a.tax_rate)
            for a in e.allowances_charges
        ),
        prepaid_amount=value(e.prepaid_amount),
        rounding_amount=value(e.rounding_amount),
        amount_due=value(e.amount_due),
        tax_currency=value(e.tax_currency),
        tax_total_in_tax_currency=value(e.tax_total_in_tax_currency),
        payment_means=value(e.payment_means),
        mandate_reference=value(e.mandate_reference),
        debited_account=value(e.debited_account),
        payee_account=e.payee_account.canonical if e.payee_account is not None else None,
    )
