"""The extraction contract: what the model must return for one invoice.

The contract is versioned (:data:`EXTRACTION_SCHEMA_VERSION`); the version is
recorded on every job next to the validation policy version, so a stored result
can always be read against the schema it was produced under. Bump the version on
any change a stored result or a guided-decoding grammar could notice.

Invariants the types enforce (parsing is the first gate of spec section 4):

* Money, quantities and rates are :class:`~decimal.Decimal` on the Python side
  and JSON *strings* on the wire (``"1234.50"``: ``.`` decimal point, no
  thousands separator, no exponent). A JSON number is rejected, never coerced:
  a float has already lost the cents that matter.
* Dates are ISO ``YYYY-MM-DD`` strings.
* Every financial field carries an :class:`Evidence` reference (page, start,
  end, quote) into the OCR text, which :mod:`pipeline.validation.decide` resolves
  against the real document; a line item and a tax line carry one reference to
  their printed row, which must contain each of their numbers.
* Every field is *required* but most are nullable: the model says ``null`` for
  what it cannot find instead of inventing a value, and lists what it is unsure
  of in ``uncertain_fields``. Validation turns both into REVIEW_REQUIRED; a
  missing financial field never passes silently.

The value types live in :mod:`pipeline.invoice.wire_types`, the evidence types in
:mod:`pipeline.invoice.evidence`; this module re-exports the names callers use.

Evidence offsets: the OCR text's pages are separated by form feed (``\\f``);
``page`` is 1-based, ``start``/``end`` are 0-based code-point offsets within
that page's text, ``end`` exclusive, and ``quote`` is the text at those offsets.

:mod:`pipeline.invoice.grammar_schema` exports the same contract as a self-contained
JSON schema for guided decoding, contract v3's fields left out.

Contract v3 (:data:`CONTRACT_V3`) adds what e-invoices state and v2 has no place for:
allowances and charges at document and line level (EN 16931 BG-20/BG-21, BG-27/BG-28),
the document type (BT-3: invoice, credit note, corrective invoice), the preceding
invoice a credit note refers to (BG-3), a line's price basis quantity (BT-149), and the
prepaid amount, rounding amount and amount due (BT-113 to BT-115), and a second, tax
currency with the tax total in it (BT-6, BT-111), the payment means where the
supplier collects (BT-81: card, direct debit), the seller's tax registration number
(BT-32: ``supplier.tax_number``, which identifies a seller without VAT id against master
data), and the VAT category "not subject to VAT" (``tax_category`` ``O`` on a line, a
tax line or an allowance or charge: EN 16931 BR-O-05 to BR-O-07 give it no rate, so its
rate is None, which only category ``O`` may leave out), and the national account to pay
where the invoice states one that is no IBAN (BT-84: ``payee_account``, a Swedish
bankgiro, held against the supplier's accounts on file). Each is optional
with an empty default (a plain invoice), dumped only where set, so a v2 result reads and
dumps exactly as before; only an e-invoice reader fills them (:func:`parse_extraction`
refuses a model's answer that does).

Sign rule (EN 16931): a credit note states its amounts as an invoice would, positive;
its type says they are owed to the buyer. The type carries the direction, never the
sign: a negative total on either type is reviewed by the reader, not read as a credit.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from pipeline.errors import MalformedOutput
from pipeline.invoice.evidence import (
    Evidence,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
)
from pipeline.invoice.national_accounts import national_account
from pipeline.invoice.wire_types import (
    Amount,
    ContractModel,
    IsoDate,
    NonEmptyStr,
    Quantity,
    Rate,
)

_M = TypeVar("_M", bound=BaseModel)

#: Header fields of a stored result, as dotted paths (eval and the demo compare these).
SCALAR_FIELDS = (
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

#: Version of the extraction contract; recorded on the job with the result.
EXTRACTION_SCHEMA_VERSION = "fenceline.extraction/1"
#: Contract v3: a result that holds what only v3 has a place for records this version.
CONTRACT_V3 = "fenceline.extraction/3"
#: UNTDID 4461 payment means by which the supplier collects (48 bank card, 49 direct
#: debit, 54 credit card, 55 debit card, 59 SEPA direct debit): the buyer pays no
#: account of the supplier's, so such an invoice needs no IBAN.
COLLECTED_PAYMENT_MEANS = frozenset({"48", "49", "54", "55", "59"})
#: The direct debits among them (49 direct debit, 59 SEPA direct debit): the supplier
#: debits the buyer's account under a mandate (EN 16931 BG-19).
DIRECT_DEBIT_PAYMENT_MEANS = frozenset({"49", "59"})
#: Contract v3's direct debit: the mandate reference (BT-89) and the debited account
#: (BT-91), set only with a direct debit payment means.
DIRECT_DEBIT_FIELDS = ("mandate_reference", "debited_account")
#: Contract v3's amounts after the gross total (EN 16931 BT-113, BT-114, BT-115).
PAYABLE_FIELDS = ("prepaid_amount", "rounding_amount", "amount_due")
#: Contract v3's second currency: the VAT accounting currency (BT-6) and the tax total in
#: it (BT-111), set only where it is not the invoice currency.
TAX_CURRENCY_FIELDS = ("tax_currency", "tax_total_in_tax_currency")

#: The request's ``schema_version`` values the system can honour: each selects a
#: contract it implements (1 is :data:`EXTRACTION_SCHEMA_VERSION`, the invoice without
#: contract v3's fields; 3 is :data:`CONTRACT_V3`: what a v1 job's result may hold is
#: :mod:`pipeline.invoice.schema_versions`). Any other is refused at intake, never
#: accepted and served with the default.
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 3)

#: The request ``options`` the system knows and honours, by name, each with what it
#: asks for. A name not here is refused at intake (422 ``unknown_option`` naming
#: these), never stored and ignored. Values are JSON, carried as given and hashed into
#: the request's idempotency check; each is checked at intake
#: (:mod:`pipeline.api.request_options`) and read by the attempt.
#:
#: ``locale`` is not offered: the decimal mark is decided by the document's own
#: numbers and a date's day/month order by the readings validation proves, and a
#: client's hint would have to reach prepare, grounding, corrections and review alike
#: to mean the same everywhere. Refused rather than accepted and ignored.
SUPPORTED_OPTIONS: dict[str, str] = {
    "ocr_languages": "the Tesseract languages to read this job's scanned pages with, "
    '\'+\'-joined or a list (deu+fra, ["deu", "fra"]), each one the deployment '
    "installs (FENCELINE_OCR_LANGUAGES); the first is tesseract's primary language",
}

#: The VAT category "not subject to VAT" (UNCL 5305 ``O``, EN 16931 BR-O-*): it has no
#: rate (BR-O-05 to BR-O-07) and no tax (BR-O-09), so a line, tax line, allowance or
#: charge of it states none; no other category may leave its rate out (contract v3).
NOT_SUBJECT_TO_VAT = "O"
NoRateCategory = Literal["O"]
#: Rates only a contract v3 result may leave out (category ``O``): a model's grammar
#: offers them as required values, as before.
V3_NULLABLE_RATES = (("line_items", "tax_rate"), ("tax_lines", "rate"))

#: Model output larger than this is rejected before parsing (200 evidenced line
#: items stay well below it); it bounds the memory one bad answer can take.
MAX_OUTPUT_CHARS = 2_000_000


class V3Model(ContractModel):
    """A contract model with contract v3 fields (:data:`V3_FIELDS`): each one at its
    default means "not stated" and is not dumped, so a result without v3 values reads
    and dumps exactly as under contract v2."""

    #: This model's v3 fields.
    v3_fields: ClassVar[tuple[str, ...]] = ()

    def states_v3(self) -> bool:
        """Whether any of this model's own v3 fields is off its default."""
        return any(
            getattr(self, name) != type(self).model_fields[name].default for name in self.v3_fields
        )

    @model_serializer(mode="wrap")
    def _without_default_v3_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name in self.v3_fields:
                if getattr(self, name) == type(self).model_fields[name].default:
                    data.pop(name, None)
        return data


class Supplier(V3Model):
    v3_fields = ("tax_number",)

    name: EvidencedText | None
    vat_id: EvidencedText | None
    #: The seller's tax registration number (EN 16931 BT-32; contract v3, an e-invoice
    #: reader's only): set where the XML states one, so a seller without VAT id (one not
    #: subject to VAT, category O) is still identified. Dumped only where set.
    tax_number: EvidencedText | None = None


#: An allowance (EN 16931 BG-20, BG-27: ``ChargeIndicator`` false) or a charge (BG-21,
#: BG-28: true).
AllowanceKind = Literal["allowance", "charge"]


class LineAllowanceCharge(ContractModel):
    """A line-level allowance or charge (EN 16931 BG-27, BG-28; contract v3): it changes
    the line's net amount, at the line's VAT rate. ``amount`` is without VAT (BT-136,
    BT-141); ``reason`` and ``reason_code`` say why (BT-139/140, BT-144/145)."""

    kind: AllowanceKind
    amount: Amount
    reason: str | None = None
    reason_code: str | None = None
    evidence: Evidence


def _rate_or_category_o(rate: object, category: str | None, what: str) -> None:
    """A rate is left out only for category ``O``, which states none (BR-O-05 to BR-O-07)."""
    if rate is None and category != NOT_SUBJECT_TO_VAT:
        raise ValueError(f"{what} states no rate: only category O (not subject to VAT) has none")
    if rate is not None and category == NOT_SUBJECT_TO_VAT:
        raise ValueError(f"{what} of category O (not subject to VAT) states no rate")


class LineItem(V3Model):
    """One printed row; ``evidence`` spans the whole row and must show every number.

    ``line_amount`` is the line's net amount: quantity x unit price / price basis
    quantity, less its allowances, plus its charges (contract v3; EN 16931 BT-131,
    BT-149: a price per 100 pieces has basis 100; None is 1). ``tax_rate`` is None only
    for a line not subject to VAT (contract v3: ``tax_category`` ``O``, BT-151)."""

    v3_fields = ("allowances_charges", "price_basis_quantity", "tax_category")

    description: str
    quantity: Quantity
    unit_price: Amount
    line_amount: Amount
    tax_rate: Rate | None
    evidence: Evidence
    #: Line-level allowances and charges (contract v3; an e-invoice reader's only).
    allowances_charges: tuple[LineAllowanceCharge, ...] = ()
    #: The quantity the unit price is stated for (BT-149; contract v3), None for 1.
    price_basis_quantity: Quantity | None = None
    #: ``O`` where the line is not subject to VAT (BT-151; contract v3): no rate.
    tax_category: NoRateCategory | None = None

    @model_validator(mode="after")
    def _rate_unless_category_o(self) -> LineItem:
        _rate_or_category_o(self.tax_rate, self.tax_category, "a line")
        return self


class TaxLine(V3Model):
    """Tax for one rate: ``amount`` = ``base`` x ``rate`` / 100, rounded per policy.

    Contract v3: the breakdown of an invoice not subject to VAT (``tax_category`` ``O``,
    BT-118) has no rate and its ``amount`` is 0 (BR-O-09)."""

    v3_fields = ("tax_category",)

    rate: Rate | None
    base: Amount
    amount: Amount
    evidence: Evidence
    #: ``O`` where the breakdown is "not subject to VAT" (BT-118; contract v3): no rate.
    tax_category: NoRateCategory | None = None

    @model_validator(mode="after")
    def _rate_unless_category_o(self) -> TaxLine:
        _rate_or_category_o(self.rate, self.tax_category, "a tax line")
        return self


class AllowanceCharge(ContractModel):
    """A document-level allowance (a discount) or charge (freight, packing): it changes
    the net total and the tax base of its rate, not a line (contract v3).

    ``amount`` is without VAT as stated (BT-92, BT-99); ``tax_rate`` is the rate whose
    base it changes (BT-96, BT-103), ``tax_category`` its VAT category code (BT-95,
    BT-102); ``reason`` and ``reason_code`` say why (BT-97/98, BT-104/105).
    """

    kind: AllowanceKind
    amount: Amount
    tax_rate: Rate | None  # None only for category O (BR-O-06, BR-O-07)
    tax_category: str | None = None
    reason: str | None = None
    reason_code: str | None = None
    evidence: Evidence

    @model_validator(mode="after")
    def _rate_unless_category_o(self) -> AllowanceCharge:
        _rate_or_category_o(self.tax_rate, self.tax_category, f"an {self.kind}")
        return self


#: The document type (EN 16931 BT-3): ``invoice`` (UNTDID 1001 380, and the default),
#: ``credit_note`` (381: the amounts, stated positive, are owed to the buyer),
#: ``corrective_invoice`` (384).
DocumentType = Literal["invoice", "credit_note", "corrective_invoice"]


class PrecedingInvoice(ContractModel):
    """The invoice a credit note or correction refers to (EN 16931 BG-3): its number
    (BT-25) and issue date (BT-26) as stated, the evidence where they were read."""

    number: NonEmptyStr
    issue_date: IsoDate | None = None
    evidence: Evidence


class PayeeAccount(ContractModel):
    """The national account to pay (EN 16931 BT-84 that is no IBAN; contract v3, an
    e-invoice reader's only): its scheme (``SE:BANKGIRO``: UBL's
    ``FinancialInstitutionBranch/ID`` or the ID's ``schemeID``) and id, both canonical
    (:mod:`pipeline.invoice.national_accounts`: ``50501055`` for a printed
    ``5050-1055``), the evidence the XML path it was read from."""

    scheme: NonEmptyStr
    id: NonEmptyStr
    evidence: Evidence

    @model_validator(mode="after")
    def _canonical(self) -> PayeeAccount:
        if national_account(self.scheme, self.id) != f"{self.scheme}:{self.id}":
            raise ValueError(
                f"{self.scheme}:{self.id} is no canonical national account (SCHEME:ID, "
                "scheme a country and a name, id letters and digits)"
            )
        return self

    @property
    def canonical(self) -> str:
        """``SCHEME:ID``, as the supplier register holds it."""
        return f"{self.scheme}:{self.id}"


class Extraction(V3Model):
    """One invoice as the model must return it (see the module docstring)."""

    v3_fields = (
        "allowances_charges",
        "document_type",
        "preceding_invoice",
        "payment_means",
        *DIRECT_DEBIT_FIELDS,
        *PAYABLE_FIELDS,
        *TAX_CURRENCY_FIELDS,
        "payee_account",
    )

    supplier: Supplier
    invoice_number: EvidencedText | None
    issue_date: EvidencedDate | None
    due_date: EvidencedDate | None
    currency: EvidencedCurrency | None
    line_items: tuple[LineItem, ...]
    tax_lines: tuple[TaxLine, ...]
    net_total: EvidencedAmount | None
    tax_total: EvidencedAmount | None
    gross_total: EvidencedAmount | None
    iban: EvidencedIban | None
    #: Field paths (``"gross_total"``, ``"line_items[3]"``) the model is unsure of.
    uncertain_fields: tuple[str, ...]
    #: Document-level allowances and charges (contract v3; an e-invoice reader's only).
    allowances_charges: tuple[AllowanceCharge, ...] = ()
    #: The document type (contract v3; a plain invoice is not dumped).
    document_type: DocumentType = "invoice"
    #: The invoice a credit note or correction refers to (contract v3).
    preceding_invoice: PrecedingInvoice | None = None
    #: What was paid already (BT-113), the rounding amount (BT-114) and the amount due
    #: (BT-115 = gross - prepaid + rounding), contract v3: set only where the amount due is
    #: not the gross total (a final invoice after advance payments), so a payment of the
    #: gross total never pays twice. A plain invoice leaves all three None (not dumped).
    prepaid_amount: EvidencedAmount | None = None
    rounding_amount: EvidencedAmount | None = None
    amount_due: EvidencedAmount | None = None
    #: The currency VAT is accounted in (BT-6) and the tax total in it (BT-111), contract
    #: v3: set only where it is not the invoice currency. Nothing is paid in it; every
    #: other amount is in ``currency``.
    tax_currency: EvidencedCurrency | None = None
    tax_total_in_tax_currency: EvidencedAmount | None = None
    #: The payment means code (BT-81, UNTDID 4461), contract v3: set only where the
    #: supplier collects (:data:`COLLECTED_PAYMENT_MEANS`: card, direct debit), so the
    #: ERP never pays such an invoice by transfer.
    payment_means: EvidencedText | None = None
    #: A direct debit's mandate reference (BT-89) and the account it debits (BT-91, the
    #: buyer's, usually an IBAN), contract v3: set only where ``payment_means`` is a
    #: direct debit (:data:`DIRECT_DEBIT_PAYMENT_MEANS`) and the XML states them. The
    #: debited account is personal data: sealed where results are stored
    #: (:mod:`pipeline.sealed_results`), as the IBAN is.
    mandate_reference: EvidencedText | None = None
    debited_account: EvidencedText | None = None
    #: The national account to pay (BT-84 that is no IBAN: a Swedish bankgiro), contract
    #: v3: set only where the XML states no IBAN and one account of a scheme the supplier
    #: register can hold. Validation accepts it only where it is on file for the
    #: supplier (``payee_account_not_registered`` otherwise). Personal data: sealed where
    #: results are stored (:mod:`pipeline.sealed_results`), as the IBAN is.
    payee_account: PayeeAccount | None = None

    def pays_no_account(self) -> bool:
        """Whether the buyer pays no account of the supplier's: a credit note (the supplier
        owes the amount), or an invoice the supplier collects (contract v3's
        ``payment_means``: card, direct debit). Such an invoice needs no IBAN."""
        collected = (
            self.payment_means is not None and self.payment_means.value in COLLECTED_PAYMENT_MEANS
        )
        return self.document_type == "credit_note" or collected

    def not_subject_to_vat(self) -> bool:
        """Whether the invoice is not subject to VAT (contract v3): its one tax line is of
        category ``O`` (EN 16931 BR-O-11), so the seller states no VAT id (BR-O-02)."""
        return len(self.tax_lines) == 1 and self.tax_lines[0].tax_category == NOT_SUBJECT_TO_VAT


#: Contract v3's fields (dotted paths): optional, empty by default, written only by an
#: e-invoice reader, never offered to or accepted from a model.
V3_FIELDS = (
    *Extraction.v3_fields,
    *(f"supplier.{name}" for name in Supplier.v3_fields),
    *(
        f"{rows}.{name}"
        for rows, model in (("line_items", LineItem), ("tax_lines", TaxLine))
        for name in model.v3_fields
    ),
)


def uses_v3(extraction: Extraction) -> bool:
    """Whether ``extraction`` holds anything only contract v3 has a place for."""
    return (
        extraction.states_v3()
        or extraction.supplier.states_v3()
        or any(item.states_v3() for item in extraction.line_items)
        or any(tax.states_v3() for tax in extraction.tax_lines)
    )


def parse_extraction(text: str) -> Extraction:
    """Parse model output into an :class:`Extraction`.

    A single surrounding Markdown code fence is tolerated (models without
    guided decoding add one); nothing else is repaired, because a repaired
    answer is a guessed answer.

    Raises:
        MalformedOutput: the text is too large, not JSON, or not the contract (a
            contract v3 field, which only an e-invoice reader writes, included).
            It is retryable: another attempt may produce a conformant answer.
    """
    extraction = parse_contract(Extraction, text, MAX_OUTPUT_CHARS)
    if uses_v3(extraction):
        raise MalformedOutput(
            f"model output is schema-invalid JSON: {', '.join(V3_FIELDS)} is no model's to write"
        )
    return extraction


def parse_contract(model: type[_M], text: str, max_chars: int) -> _M:
    """Parse a model's raw answer into a contract ``model`` (any contract version).

    A single surrounding Markdown code fence is tolerated; nothing else is repaired.

    Raises:
        MalformedOutput: over ``max_chars``, not JSON, or not the contract (retryable).
    """
    if len(text) > max_chars:
        raise MalformedOutput(f"model output has {len(text)} characters (> {max_chars})")
    body = _strip_code_fence(text)
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        kinds = {err["type"] for err in exc.errors()}
        what = "invalid JSON" if "json_invalid" in kinds else "schema-invalid JSON"
        summary = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise MalformedOutput(f"model output is {what}: {summary}") from exc


_FENCE_RE = re.compile(r"^\s*```[A-Za-z]*\s*\n(?P<body>.*)\n\s*```\s*$", re.DOTALL)


def _strip_code_fence(text: str) -> str:
    match = _FENCE_RE.match(text)
    return match.group("body") if match else text
