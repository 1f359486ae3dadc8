"""The evaluation dataset: one invoice per JSON line, with its true values.

The format is documented in ``docs/eval-dataset.md``. :class:`EvalRecord` models
one line; :func:`load_dataset` reads a file line by line and never raises for a
bad line (it is reported with its number and skipped); :func:`record_from_generated`
turns a :class:`~benchmarks.invoices.generator.GeneratedInvoice` into the same record, so
generated and supplied invoices are scored by one code path; :func:`export_dataset`
writes generated invoices in the format.

Truth holds values only (no evidence spans): the evaluation compares what the
extraction says, whatever contract the model answered in. It holds what real
invoices print, including what contract v2 cannot: a supplier with a tax number and
no VAT id (``supplier.vat_id`` null), no currency printed (``currency`` null), an
amount-only row such as shipping or a flat fee (an item's ``quantity`` and
``unit_price`` null). Such a line is evaluated, not refused; a null compares as null.
Contract v3's values are optional keys (:class:`Truth`): the supplier's tax number,
allowances and charges at document and line level, a line's price basis, the payable
amounts, a tax currency, a payment means, a credit note and its preceding invoice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    model_validator,
)

from benchmarks.invoices.generator import GeneratedInvoice
from pipeline.documents import read_document, sniff_media_type
from pipeline.errors import FencelineError
from pipeline.invoice import Extraction, SupplierRecord, TenantMasterData
from pipeline.settings import Settings
from pipeline.worker import OcrConfidences

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


class EvalRecord(BaseModel):
    """One dataset line. Unknown top-level keys are ignored (and listed by the loader)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Text
    #: The document's text; or, instead, ``document``: a file read as the worker reads it.
    ocr_text: Text | None = None
    #: A PDF, scan, photo or text file, its path relative to the dataset file: read by
    #: the document stage's reader (a PDF's text layer on a grid, OCR for what has none).
    document: Text | None = None
    truth: Truth
    master_data: MasterData | None = None
    expected_decision: Literal["SUCCEEDED", "REVIEW_REQUIRED"] | None = None
    #: The validation date for date plausibility; default: the truth's issue date.
    today: DateStr | None = None
    #: Layout family or a fuzzer's transformations joined by "+"; the report groups by it.
    family: Family | None = None
    #: Free text for the dataset's author (where the invoice came from, what it tests).
    notes: Text | None = None

    @model_validator(mode="after")
    def _text_or_document(self) -> EvalRecord:
        if self.ocr_text is None and self.document is None:
            raise ValueError("missing required key 'ocr_text' (or a 'document' file)")
        if self.ocr_text is not None and self.document is not None:
            raise ValueError("give 'ocr_text' or 'document', not both")
        return self

    @property
    def text(self) -> str:
        """The text the invoice is read from (``ocr_text``, or the file's once read)."""
        if self.ocr_text is None:
            raise ValueError(f"{self.id}: its document has not been read")
        return self.ocr_text

    def validation_date(self) -> date:
        return self.today if self.today is not None else self.truth.issue_date

    def tenant_master_data(self) -> TenantMasterData:
        """The master data validation runs against (built from the truth when absent).

        A supplier without a VAT id is on file with an empty one: validation still
        requires a VAT id on the invoice (``missing_field``) and refuses any other
        (``vat_id_mismatch``), so such an invoice goes to review, never through. (The
        tenant master data a deployment stores refuses a supplier without a VAT id.)
        A truth without a currency permits none: any currency read is not printed.
        """
        if self.master_data is None:
            t = self.truth
            ibans = frozenset({t.iban}) if t.iban else frozenset()
            return TenantMasterData(
                suppliers=(SupplierRecord(t.supplier.name, t.supplier.vat_id or "", ibans),),
                permitted_currencies=frozenset({t.currency}) if t.currency else frozenset(),
            )
        return TenantMasterData(
            suppliers=tuple(
                SupplierRecord(s.name, s.vat_id or "", frozenset(s.ibans))
                for s in self.master_data.suppliers
            ),
            permitted_currencies=frozenset(self.master_data.currencies),
        )

    def to_json(self) -> dict[str, Any]:
        """The line as written to a dataset file (absent options and unstated contract
        v3 values left out)."""
        data: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        data["truth"] = self.truth.as_json()  # keep due_date/iban nulls
        return data


EVAL_RECORD_KEYS = frozenset(EvalRecord.model_fields)


@dataclass(frozen=True)
class Case:
    """One invoice to evaluate: its record, where it came from, and extra row columns."""

    record: EvalRecord
    line: int | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    #: The confidence of each word OCR read (a document OCR read), None otherwise.
    ocr: OcrConfidences | None = None


@dataclass
class Dataset:
    """What :func:`load_dataset` read: the evaluable cases and what it refused or ignored."""

    cases: list[Case] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)


def _where(loc: Sequence[int | str]) -> str:
    return ".".join(str(p) for p in loc) or "<line>"


def describe_errors(exc: ValidationError) -> str:
    """One readable message for every problem pydantic found on a line."""
    parts: list[str] = []
    for err in exc.errors():
        where = _where(err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing required key {where!r}")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"{where}: {msg}" if err["loc"] else msg)  # the line as a whole
    shown = parts[:4]
    more = f" (and {len(parts) - 4} more)" if len(parts) > 4 else ""
    return "; ".join(shown) + more


def parse_line(text: str) -> tuple[EvalRecord, list[str]]:
    """Parse one dataset line; returns the record and its ignored top-level keys.

    Raises:
        ValueError: with a one-line message saying what is wrong.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"must be a JSON object, got {type(data).__name__}")
    try:
        record = EvalRecord.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc)) from exc
    return record, sorted(k for k in data if k not in EVAL_RECORD_KEYS)


def load_dataset(path: Path) -> Dataset:
    """Read a dataset file; bad lines are skipped with their line number and reason."""
    dataset = Dataset()
    ignored: set[str] = set()
    seen: dict[str, int] = {}
    with path.open("rb") as fh:
        for number, data in enumerate(fh, start=1):
            try:
                raw = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                dataset.skipped.append({"line": number, "error": f"not UTF-8: {exc.reason}"})
                continue
            if not raw.strip():
                continue
            try:
                record, extra = parse_line(raw)
                if record.id in seen:
                    first = seen[record.id]
                    raise ValueError(f"duplicate id {record.id!r} (first on line {first})")
            except ValueError as exc:
                dataset.skipped.append({"line": number, "error": str(exc)})
                continue
            tags: dict[str, Any] = {}
            ocr: OcrConfidences | None = None
            if record.document is not None:
                try:
                    record, tags, ocr = read_record_document(record, path.parent)
                except (OSError, FencelineError) as exc:
                    dataset.skipped.append(
                        {"line": number, "error": f"document {record.document!r}: {exc}"}
                    )
                    continue
            seen[record.id] = number
            ignored.update(extra)
            dataset.cases.append(Case(record, line=number, tags=tags, ocr=ocr))
    dataset.ignored_keys = sorted(ignored)
    return dataset


def read_record_document(
    record: EvalRecord, folder: Path
) -> tuple[EvalRecord, dict[str, Any], OcrConfidences | None]:
    """``record`` with its ``document`` file read into ``ocr_text`` as the worker's
    document stage reads it (media type sniffed from the bytes, limits of the process's
    settings), the tags its row gets (the media type and the pages OCR read), and the
    confidence of each word OCR read.

    Raises:
        OSError: the file cannot be read.
        FencelineError: the document stage refuses it (type, size, pages, no text).
    """
    assert record.document is not None
    data = (folder / record.document).read_bytes()
    settings = Settings()
    media = sniff_media_type(data, max_bytes=settings.max_document_file_bytes)
    read = read_document(data, media, settings)
    tags = {"media_type": media.value, "ocr_pages": len(read.ocr_pages)}
    return record.model_copy(update={"ocr_text": read.text}), tags, OcrConfidences.of(read)


# --- generated invoices --------------------------------------------------------------------------


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
    )


def record_from_generated(invoice: GeneratedInvoice) -> EvalRecord:
    """A generated invoice as a dataset record.

    ``expected_decision`` is the decision a *faithful* transcription must reach
    (the generator's ``truth_decision``). The generator's ``expected_decision``
    is what its faulty ``candidate`` answer reaches instead; the two differ for
    the prompt-injection variant, where a model that ignores the injection is
    right to be accepted.
    """
    md = invoice.master_data
    return EvalRecord(
        id=f"gen-{invoice.seed}-{invoice.variant.value}",
        ocr_text=invoice.ocr_text,
        truth=truth_from_extraction(invoice.truth),
        master_data=MasterData(
            suppliers=tuple(
                MasterSupplier(name=s.name, vat_id=s.vat_id, ibans=tuple(sorted(s.ibans)))
                for s in md.suppliers
            ),
            currencies=tuple(sorted(md.permitted_currencies)),
        ),
        expected_decision=invoice.truth_decision.value,
        today=invoice.today,
    )


def generated_cases(invoices: Iterable[GeneratedInvoice]) -> list[Case]:
    """Generated invoices as cases, tagged with how they were generated."""
    return [
        Case(
            record_from_generated(inv),
            tags={
                "seed": inv.seed,
                "variant": inv.variant.value,
                "language": inv.language,
                "layout": inv.layout,
            },
        )
        for inv in invoices
    ]


def export_dataset(invoices: Iterable[GeneratedInvoice], path: Path) -> int:
    """Write generated invoices as a dataset file; returns how many lines were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for invoice in invoices:
            fh.write(json.dumps(record_from_generated(invoice).to_json(), ensure_ascii=False))
            fh.write("\n")
            n += 1
    return n
