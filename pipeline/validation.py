"""The validation policy: decides SUCCEEDED or REVIEW_REQUIRED for a parsed extraction.

Spec section 4: JSON that parses is not a correct invoice. A schema-valid
:class:`~pipeline.extraction.Extraction` is checked here against the OCR text
the job holds and the tenant's master data. The outcome is a
:class:`ValidationReport`: a decision, machine-readable reasons and the policy
version, all stored on the job.

Invariants:

* ``SUCCEEDED`` if and only if there is no reason. Every rule that fails adds a
  reason; there are no silent downgrades and no warnings that pass.
* A missing (null) or model-flagged-uncertain financial field is a reason
  (``missing_field`` / ``model_uncertain``), never a pass.
* Money is compared as :class:`~decimal.Decimal` rounded explicitly
  (``ROUND_HALF_UP`` to 2 places by default) within ``tolerance`` (default 0).
* Nothing here performs I/O: the OCR text and the model output are data, and no
  content of either can make validation reach the network or change state.
* The rules are pure functions of (extraction, OCR text, master data, today,
  policy), so a stored result can be re-validated under the recorded version.

Rules (one function each, composed by :func:`validate`): presence, arithmetic,
currency, supplier (NFKC, confusables, mixed script, bidi/invisible characters,
VAT id), IBAN (mod-97, length, presence in the OCR text, registration), evidence
(each span resolved against the OCR text and showing its value) and dates.
Changing what any rule accepts means bumping :data:`VALIDATION_POLICY_VERSION`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext
from enum import StrEnum
from typing import Any

from pipeline.extraction import EXTRACTION_SCHEMA_VERSION, Evidence, Extraction
from pipeline.states import JobState

#: Version of the rules below; recorded on the job with every decision.
VALIDATION_POLICY_VERSION = "fenceline.validation/1"


class Decision(StrEnum):
    """Validation outcome; each value is the :class:`JobState` the job moves to."""

    #: Eligible for ERP delivery.
    SUCCEEDED = "SUCCEEDED"
    #: Inspectable but unacceptable; withheld from delivery until a reviewer decides.
    REVIEW_REQUIRED = "REVIEW_REQUIRED"

    @property
    def job_state(self) -> JobState:
        return JobState(self.value)


class ReasonCode(StrEnum):
    MISSING_FIELD = "missing_field"
    MODEL_UNCERTAIN = "model_uncertain"
    LINE_AMOUNT_MISMATCH = "line_amount_mismatch"
    NET_TOTAL_MISMATCH = "net_total_mismatch"
    TAX_BASE_MISMATCH = "tax_base_mismatch"
    TAX_LINE_MISMATCH = "tax_line_mismatch"
    TAX_TOTAL_MISMATCH = "tax_total_mismatch"
    GROSS_TOTAL_MISMATCH = "gross_total_mismatch"
    CURRENCY_NOT_ISO4217 = "currency_not_iso4217"
    CURRENCY_NOT_PERMITTED = "currency_not_permitted"
    CURRENCY_MIXED = "currency_mixed"
    SUPPLIER_UNKNOWN = "supplier_unknown"
    SUPPLIER_CONFUSABLE = "supplier_confusable"
    SUPPLIER_MIXED_SCRIPT = "supplier_mixed_script"
    VAT_ID_MISMATCH = "vat_id_mismatch"
    BIDI_CONTROL = "bidi_control"
    INVISIBLE_CHARACTER = "invisible_character"
    IBAN_CHECKSUM_INVALID = "iban_checksum_invalid"
    IBAN_LENGTH_INVALID = "iban_length_invalid"
    IBAN_NOT_IN_TEXT = "iban_not_in_text"
    IBAN_NOT_REGISTERED = "iban_not_registered"
    EVIDENCE_OUT_OF_RANGE = "evidence_out_of_range"
    EVIDENCE_QUOTE_MISMATCH = "evidence_quote_mismatch"
    EVIDENCE_VALUE_MISMATCH = "evidence_value_mismatch"
    EVIDENCE_DUPLICATE = "evidence_duplicate"
    DATE_IMPLAUSIBLE = "date_implausible"


#: Arithmetic reason codes; a perturbed amount must produce at least one of them.
ARITHMETIC_CODES: frozenset[ReasonCode] = frozenset(
    {
        ReasonCode.LINE_AMOUNT_MISMATCH,
        ReasonCode.NET_TOTAL_MISMATCH,
        ReasonCode.TAX_BASE_MISMATCH,
        ReasonCode.TAX_LINE_MISMATCH,
        ReasonCode.TAX_TOTAL_MISMATCH,
        ReasonCode.GROSS_TOTAL_MISMATCH,
    }
)


@dataclass(frozen=True)
class Reason:
    """Why a result needs review: ``field`` is a path such as ``line_items[3].line_amount``."""

    code: ReasonCode
    field: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code.value, "field": self.field, "detail": self.detail}


@dataclass(frozen=True)
class ValidationReport:
    """The stored outcome: ``decision`` is SUCCEEDED exactly when ``reasons`` is empty."""

    decision: Decision
    reasons: tuple[Reason, ...]
    policy_version: str
    schema_version: str = EXTRACTION_SCHEMA_VERSION

    @property
    def codes(self) -> frozenset[ReasonCode]:
        return frozenset(r.code for r in self.reasons)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the job row, the review API and the audit trail."""
        return {
            "decision": self.decision.value,
            "reasons": [r.as_dict() for r in self.reasons],
            "policy_version": self.policy_version,
            "schema_version": self.schema_version,
        }


#: Paths a policy may require; each names a nullable field or a list of the contract.
REQUIRABLE_FIELDS: frozenset[str] = frozenset(
    {
        "supplier.name",
        "supplier.vat_id",
        "invoice_number",
        "issue_date",
        "due_date",
        "currency",
        "line_items",
        "tax_lines",
        "net_total",
        "tax_total",
        "gross_total",
        "iban",
    }
)
DEFAULT_REQUIRED_FIELDS: frozenset[str] = frozenset(
    {
        "supplier.name",
        "supplier.vat_id",
        "invoice_number",
        "issue_date",
        "currency",
        "line_items",
        "net_total",
        "tax_total",
        "gross_total",
        "iban",
    }
)


@dataclass(frozen=True)
class ValidationPolicy:
    """Tunable thresholds; any change to a default is a new policy version.

    Attributes:
        tolerance: largest accepted absolute difference in every arithmetic identity.
        money_places: decimal places computed amounts are rounded to.
        rounding: :mod:`decimal` rounding mode for computed amounts.
        max_future_days: how far after ``today`` an issue date may lie.
        max_invoice_age_days: how far before ``today`` an issue date may lie.
        max_payment_term_days: largest due date - issue date.
        required_fields: paths whose null value forces review.
        malformed_exhausted_state: where the job driver sends a job whose attempts
            all returned malformed output (nothing inspectable: terminal by default).
    """

    version: str = VALIDATION_POLICY_VERSION
    tolerance: Decimal = Decimal("0.00")
    money_places: int = 2
    rounding: str = ROUND_HALF_UP
    max_future_days: int = 1
    max_invoice_age_days: int = 730
    max_payment_term_days: int = 180
    required_fields: frozenset[str] = DEFAULT_REQUIRED_FIELDS
    malformed_exhausted_state: JobState = JobState.FAILED_TERMINAL

    def __post_init__(self) -> None:
        if self.tolerance < 0:
            raise ValueError("tolerance must be >= 0")
        if unknown := self.required_fields - REQUIRABLE_FIELDS:
            raise ValueError(f"unknown required fields: {sorted(unknown)}")
        if self.malformed_exhausted_state not in (
            JobState.REVIEW_REQUIRED,
            JobState.FAILED_TERMINAL,
        ):
            raise ValueError("malformed_exhausted_state must be REVIEW_REQUIRED or FAILED_TERMINAL")

    def round(self, value: Decimal) -> Decimal:
        return value.quantize(Decimal(1).scaleb(-self.money_places), rounding=self.rounding)


DEFAULT_POLICY = ValidationPolicy()


@dataclass(frozen=True)
class SupplierRecord:
    """One supplier in a tenant's master data; ``ibans`` empty means "not on file"."""

    name: str
    vat_id: str
    ibans: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TenantMasterData:
    """What a tenant knows independently of any document."""

    suppliers: tuple[SupplierRecord, ...]
    permitted_currencies: frozenset[str] = field(default_factory=frozenset)


# --- reference data ---------------------------------------------------------------

#: Active ISO 4217 alphabetic codes (circulating currencies and fund codes;
#: metals, bond units, testing and "no currency" codes excluded).
ISO_4217: frozenset[str] = frozenset(
    """AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV
    BRL BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF
    DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF
    IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR
    LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO
    NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK
    SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX
    USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG""".split()
)
#: Fund and complementary codes: valid ISO but never looked for in free text
#: (``CHE`` would otherwise fire on every Swiss UID ``CHE-123.456.789``).
_FUND_CODES = frozenset({"BOV", "CHE", "CHW", "CLF", "COU", "MXV", "USN", "UYI", "UYW"})
_TEXT_CODES = ISO_4217 - _FUND_CODES
#: Symbols and the codes each may stand for.
CURRENCY_SYMBOLS: Mapping[str, frozenset[str]] = {
    "€": frozenset({"EUR"}),
    "£": frozenset({"GBP"}),
    "$": frozenset({"USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"}),
    "¥": frozenset({"JPY", "CNY"}),
}
_SYMBOLS = "".join(CURRENCY_SYMBOLS)
_CURRENCY_MENTION_RE = re.compile(
    rf"(?<![A-Za-z])(?P<pre>[A-Z]{{3}}|[{_SYMBOLS}])\s?(?=\d)"
    rf"|(?<=\d)\s?(?P<post>[A-Z]{{3}}|[{_SYMBOLS}])(?![A-Za-z])"
)

#: IBAN length per country (the common SEPA and neighbouring countries).
IBAN_LENGTHS: Mapping[str, int] = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "CH": 21, "CY": 28, "CZ": 24,
    "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FR": 27, "GB": 22, "GR": 27,
    "HR": 21, "HU": 28, "IE": 22, "IS": 26, "IT": 27, "LI": 21, "LT": 20, "LU": 20,
    "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PL": 28, "PT": 25, "RO": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
}  # fmt: skip

#: Bidirectional formatting characters (Trojan-Source class): they reorder what a
#: reviewer sees without changing what a program reads.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

#: Compact confusables map (a subset of Unicode TR39 for Latin lookalikes),
#: applied before case folding so each case maps to the letter it resembles.
CONFUSABLES: Mapping[str, str] = {
    # Cyrillic
    "А": "A", "а": "a", "В": "B", "в": "b", "Е": "E", "е": "e", "Ё": "E", "ё": "e",
    "Ѕ": "S", "ѕ": "s", "І": "I", "і": "i", "Ї": "I", "ї": "i", "Ј": "J", "ј": "j",
    "К": "K", "к": "k", "М": "M", "м": "m", "Н": "H", "н": "h", "О": "O", "о": "o",
    "Р": "P", "р": "p", "С": "C", "с": "c", "Т": "T", "т": "t", "У": "Y", "у": "y",
    "Х": "X", "х": "x", "Ү": "Y", "ү": "y", "Һ": "H", "һ": "h", "Ԁ": "D", "ԁ": "d",
    "Ԛ": "Q", "ԛ": "q", "Ԝ": "W", "ԝ": "w", "Ӏ": "I", "ӏ": "l", "Ь": "b", "ь": "b",
    "Г": "r", "г": "r", "З": "3", "з": "3", "П": "n", "п": "n",
    # Greek
    "Α": "A", "α": "a", "Β": "B", "β": "b", "Ε": "E", "ε": "e", "Ζ": "Z", "Η": "H",
    "η": "n", "Ι": "I", "ι": "i", "Κ": "K", "κ": "k", "Μ": "M", "Ν": "N", "ν": "v",
    "Ο": "O", "ο": "o", "Ρ": "P", "ρ": "p", "Τ": "T", "τ": "t", "Υ": "Y", "υ": "u",
    "Χ": "X", "χ": "x", "ϲ": "c", "Ϲ": "C", "ϳ": "j", "γ": "y",
    # Latin and digit lookalikes
    "ı": "i", "ȷ": "j", "ɡ": "g", "ɑ": "a", "0": "O", "1": "l", "I": "l",
    "|": "l",
}  # fmt: skip
_SKELETON_PAIRS = (("rn", "m"), ("vv", "w"))


# --- normalisation ----------------------------------------------------------------


def normalise_text(text: str) -> str:
    """NFKC, then every whitespace run to one space, trimmed: the evidence comparison form."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def normalise_name(name: str) -> str:
    """Comparison form of a party name: NFKC, format characters dropped, case-folded."""
    nfkc = unicodedata.normalize("NFKC", name)
    visible = "".join(ch for ch in nfkc if unicodedata.category(ch) != "Cf")
    return " ".join(visible.casefold().split())


def skeleton(name: str) -> str:
    """Fold lookalikes so two names that render alike compare equal (TR39 style).

    As in TR39 the mapping runs on the decomposed form and the result is
    decomposed again, so a lookalike base letter keeps its accent (``е́`` = ``é``).
    """
    nfd = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", name))
    mapped = "".join(CONFUSABLES.get(ch, ch) for ch in nfd if unicodedata.category(ch) != "Cf")
    folded = " ".join(unicodedata.normalize("NFD", mapped.casefold()).split())
    for pair, repl in _SKELETON_PAIRS:
        folded = folded.replace(pair, repl)
    return folded


def _script(ch: str) -> str | None:
    if not unicodedata.category(ch).startswith("L"):
        return None
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"


def mixed_script_tokens(name: str) -> list[str]:
    """Words whose letters come from more than one script (``Асme``: Cyrillic + Latin)."""
    out = []
    for token in unicodedata.normalize("NFKC", name).split():
        scripts = {s for s in map(_script, token) if s is not None}
        if len(scripts) > 1:
            out.append(token)
    return out


def compact_id(value: str) -> str:
    """VAT id comparison form: NFKC, upper case, ASCII letters and digits only.

    Swiss UIDs keep their number only (``CHE-123.456.789 MWST`` → ``CHE123456789``).
    """
    compact = re.sub(r"[^0-9A-Z]", "", unicodedata.normalize("NFKC", value).upper())
    return re.sub(r"^(CHE\d{9})(MWST|TVA|IVA)$", r"\1", compact)


def _compact_text(text: str) -> str:
    nfkc = unicodedata.normalize("NFKC", text).upper()
    return "".join(ch for ch in nfkc if not ch.isspace() and unicodedata.category(ch) != "Cf")


def iban_checksum_ok(iban: str) -> bool:
    """ISO 13616 mod-97: the rearranged IBAN as a number is 1 modulo 97."""
    iban = iban.replace(" ", "").upper()
    if not re.fullmatch(r"[A-Z]{2}[0-9]{2}[A-Z0-9]+", iban):
        return False
    digits = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
    return int(digits) % 97 == 1


# --- readings of printed values ------------------------------------------------------

_NUMBER_RUN_RE = re.compile(r"\d[\d.,'’ ]*\d|\d")
_GROUP_RE = re.compile(r"\d{3}(?:[.,]\d+)?")
_PLAIN_RE = re.compile(r"\d+(?:\.\d+)?")


def number_readings(text: str) -> set[Decimal]:
    """Every value a printed number in ``text`` can mean, in any common locale.

    ``1.234,56``, ``1,234.56``, ``1 234,56`` and ``1'234.56`` all read as
    1234.56; an ambiguous ``1,234`` reads as both 1.234 and 1234. A superset is
    safe here because the span must also sit at its stated offsets in the real
    text, and the arithmetic rules check the values themselves.
    """
    norm = normalise_text(text)
    out: set[Decimal] = set()
    for match in _NUMBER_RUN_RE.finditer(norm):
        negative = match.start() > 0 and norm[match.start() - 1] in "-−("
        pieces = match.group().split(" ")
        candidates = []
        for i in range(len(pieces)):
            candidates.append(pieces[i])
            joined = pieces[i]
            for nxt in pieces[i + 1 :]:
                if not _GROUP_RE.fullmatch(nxt):
                    break
                joined += nxt
                candidates.append(joined)
        for cand in candidates:
            cand = cand.strip(".,'’")
            for reading in (
                cand.replace(",", "").replace("'", "").replace("’", ""),
                cand.replace(".", "").replace("'", "").replace("’", "").replace(",", "."),
            ):
                if _PLAIN_RE.fullmatch(reading):
                    value = Decimal(reading)
                    out.add(value)
                    if negative:
                        out.add(-value)
    return out


_MONTHS: Mapping[str, int] = {
    name: number
    for number, names in enumerate(
        [
            "january jan januar janvier janv",
            "february feb februar février fevrier févr fevr",
            "march mar märz maerz mär mars",
            "april apr avril avr",
            "may mai",
            "june jun juni juin",
            "july jul juli juillet juil",
            "august aug août aout",
            "september sep sept septembre",
            "october oct oktober okt octobre",
            "november nov novembre",
            "december dec dezember dez décembre decembre déc",
        ],
        start=1,
    )
    for name in names.split()
}
_ISO_DATE_RE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_NUMERIC_DATE_RE = re.compile(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})")
_DAY_MONTH_RE = re.compile(r"(\d{1,2})\.?\s+([^\W\d_]+)\.?\s+(\d{4})")
_MONTH_DAY_RE = re.compile(r"([^\W\d_]+)\.?\s+(\d{1,2}),?\s+(\d{4})")


def date_readings(text: str) -> set[date]:
    """Every date a printed date in ``text`` can mean (ISO, D.M.Y, D/M/Y or M/D/Y, month names
    in English, German and French)."""
    norm = normalise_text(text)
    triples: list[tuple[int, int, int]] = []  # (year, month, day)
    for y, m, d in _ISO_DATE_RE.findall(norm):
        triples.append((int(y), int(m), int(d)))
    for a, b, y in _NUMERIC_DATE_RE.findall(norm):
        triples += [(int(y), int(b), int(a)), (int(y), int(a), int(b))]
    for d, name, y in _DAY_MONTH_RE.findall(norm):
        if (month := _MONTHS.get(name.casefold())) is not None:
            triples.append((int(y), month, int(d)))
    for name, d, y in _MONTH_DAY_RE.findall(norm):
        if (month := _MONTHS.get(name.casefold())) is not None:
            triples.append((int(y), month, int(d)))
    out = set()
    for y, m, d in triples:
        try:
            out.add(date(y, m, d))
        except ValueError:
            continue
    return out


def currency_mentions(text: str) -> list[tuple[str, frozenset[str]]]:
    """Currency codes and symbols printed next to a number: ``(label, codes it may mean)``."""
    norm = unicodedata.normalize("NFKC", text)
    out = []
    for match in _CURRENCY_MENTION_RE.finditer(norm):
        label = match.group("pre") or match.group("post")
        if label in CURRENCY_SYMBOLS:
            out.append((label, CURRENCY_SYMBOLS[label]))
        elif label in _TEXT_CODES:
            out.append((label, frozenset({label})))
    return out


# --- rules ---------------------------------------------------------------------------------


def _r(code: ReasonCode, field: str, detail: str) -> Reason:
    return Reason(code, field, detail)


_FIELD_GETTERS: Mapping[str, Callable[[Extraction], object]] = {
    "supplier.name": lambda e: e.supplier.name,
    "supplier.vat_id": lambda e: e.supplier.vat_id,
    "invoice_number": lambda e: e.invoice_number,
    "issue_date": lambda e: e.issue_date,
    "due_date": lambda e: e.due_date,
    "currency": lambda e: e.currency,
    "line_items": lambda e: e.line_items or None,
    "tax_lines": lambda e: e.tax_lines or None,
    "net_total": lambda e: e.net_total,
    "tax_total": lambda e: e.tax_total,
    "gross_total": lambda e: e.gross_total,
    "iban": lambda e: e.iban,
}


def check_presence(
    extraction: Extraction, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """A required field that is null (or an empty list) and every field the model flagged."""
    reasons = [
        _r(ReasonCode.MISSING_FIELD, path, "required by policy but null or empty")
        for path, get in _FIELD_GETTERS.items()
        if path in policy.required_fields and get(extraction) is None
    ]
    reasons += [
        _r(ReasonCode.MODEL_UNCERTAIN, path, "the model marked this field as uncertain")
        for path in extraction.uncertain_fields
    ]
    return reasons


def check_arithmetic(
    extraction: Extraction, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """Line = qty x unit price; sum(lines) = net; per rate base and tax; sum(tax) = tax total;
    net + tax = gross; each rounded per policy and compared within ``tolerance``.

    Identities with a missing side are skipped: presence already reported them.
    Tax is computed per rate on the rate's base (not per line), the EU invoicing
    norm; a rate of 0 needs no tax line.
    """
    reasons: list[Reason] = []
    tol = policy.tolerance

    def off(a: Decimal, b: Decimal) -> bool:
        return abs(a - b) > tol

    with localcontext() as ctx:
        ctx.prec = 60  # 15-digit quantity x 15-digit price stays exact
        bases: dict[Decimal, Decimal] = defaultdict(Decimal)
        for i, item in enumerate(extraction.line_items):
            expected = policy.round(item.quantity * item.unit_price)
            if off(expected, item.line_amount):
                reasons.append(
                    _r(
                        ReasonCode.LINE_AMOUNT_MISMATCH,
                        f"line_items[{i}].line_amount",
                        f"{item.quantity} x {item.unit_price} = {expected}, "
                        f"stated {item.line_amount}",
                    )
                )
            bases[item.tax_rate] += item.line_amount
        lines_sum = sum((item.line_amount for item in extraction.line_items), Decimal(0))
        if extraction.net_total is not None and extraction.line_items:
            if off(lines_sum, extraction.net_total.value):
                reasons.append(
                    _r(
                        ReasonCode.NET_TOTAL_MISMATCH,
                        "net_total",
                        f"sum of line amounts {lines_sum}, stated {extraction.net_total.value}",
                    )
                )
        by_rate: dict[Decimal, int] = {}
        for j, tax in enumerate(extraction.tax_lines):
            path = f"tax_lines[{j}]"
            if tax.rate in by_rate:
                reasons.append(_r(ReasonCode.TAX_LINE_MISMATCH, path, f"rate {tax.rate} repeated"))
                continue
            by_rate[tax.rate] = j
            expected = policy.round(tax.base * tax.rate / 100)
            if off(expected, tax.amount):
                reasons.append(
                    _r(
                        ReasonCode.TAX_LINE_MISMATCH,
                        f"{path}.amount",
                        f"{tax.base} x {tax.rate}% = {expected}, stated {tax.amount}",
                    )
                )
            if extraction.line_items and off(bases.get(tax.rate, Decimal(0)), tax.base):
                reasons.append(
                    _r(
                        ReasonCode.TAX_BASE_MISMATCH,
                        f"{path}.base",
                        f"lines at {tax.rate}% sum to {bases.get(tax.rate, Decimal(0))}, "
                        f"stated {tax.base}",
                    )
                )
        for rate, base in bases.items():
            if rate not in by_rate and rate != 0:
                reasons.append(
                    _r(
                        ReasonCode.TAX_BASE_MISMATCH,
                        "tax_lines",
                        f"no tax line for rate {rate}% (lines sum to {base})",
                    )
                )
        tax_sum = sum((t.amount for t in extraction.tax_lines), Decimal(0))
        if extraction.tax_total is not None:
            if off(tax_sum, extraction.tax_total.value):
                reasons.append(
                    _r(
                        ReasonCode.TAX_TOTAL_MISMATCH,
                        "tax_total",
                        f"sum of tax lines {tax_sum}, stated {extraction.tax_total.value}",
                    )
                )
        net, tax_total, gross = extraction.net_total, extraction.tax_total, extraction.gross_total
        if net is not None and tax_total is not None and gross is not None:
            if off(net.value + tax_total.value, gross.value):
                reasons.append(
                    _r(
                        ReasonCode.GROSS_TOTAL_MISMATCH,
                        "gross_total",
                        f"{net.value} + {tax_total.value} = {net.value + tax_total.value}, "
                        f"stated {gross.value}",
                    )
                )
    return reasons


def check_currency(
    extraction: Extraction, ocr_text: str, master_data: TenantMasterData
) -> list[Reason]:
    """ISO 4217, the tenant's allow list, and no other currency printed beside an amount."""
    if extraction.currency is None:
        return []
    code = extraction.currency.value
    reasons = []
    if code not in ISO_4217:
        reasons.append(_r(ReasonCode.CURRENCY_NOT_ISO4217, "currency", f"{code} is not ISO 4217"))
    elif code not in master_data.permitted_currencies:
        allowed = ", ".join(sorted(master_data.permitted_currencies)) or "none"
        reasons.append(
            _r(ReasonCode.CURRENCY_NOT_PERMITTED, "currency", f"{code} not in [{allowed}]")
        )
    others = sorted({label for label, codes in currency_mentions(ocr_text) if code not in codes})
    if others:
        reasons.append(
            _r(
                ReasonCode.CURRENCY_MIXED,
                "currency",
                f"document also prices amounts in {', '.join(others)}, extracted {code}",
            )
        )
    return reasons


def _format_characters(value: str, path: str) -> list[Reason]:
    bidi = sorted({f"U+{ord(ch):04X}" for ch in value if ch in BIDI_CONTROLS})
    if bidi:
        return [_r(ReasonCode.BIDI_CONTROL, path, f"contains {', '.join(bidi)}")]
    hidden = sorted({f"U+{ord(ch):04X}" for ch in value if unicodedata.category(ch) == "Cf"})
    if hidden:
        return [_r(ReasonCode.INVISIBLE_CHARACTER, path, f"contains {', '.join(hidden)}")]
    return []


def match_supplier(name: str, master_data: TenantMasterData) -> SupplierRecord | None:
    """The master record whose name equals ``name`` after :func:`normalise_name`."""
    wanted = normalise_name(name)
    for record in master_data.suppliers:
        if normalise_name(record.name) == wanted:
            return record
    return None


def check_supplier(extraction: Extraction, master_data: TenantMasterData) -> list[Reason]:
    """The supplier is a known one, spelled with one script per word and no hidden
    characters, and the VAT id is the one on file.

    A name that matches no record but whose :func:`skeleton` equals a record's
    is reported as ``supplier_confusable``: it renders like a known supplier
    while being a different string, the homoglyph attack.
    """
    reasons: list[Reason] = []
    supplier = extraction.supplier
    for path, evidenced in (("supplier.name", supplier.name), ("supplier.vat_id", supplier.vat_id)):
        if evidenced is not None:
            reasons += _format_characters(evidenced.value, path)
    if supplier.name is None:
        return reasons
    name = supplier.name.value
    mixed = mixed_script_tokens(name)
    if mixed:
        reasons.append(
            _r(ReasonCode.SUPPLIER_MIXED_SCRIPT, "supplier.name", f"mixed scripts in {mixed!r}")
        )
    record = match_supplier(name, master_data)
    if record is None:
        lookalikes = [r.name for r in master_data.suppliers if skeleton(r.name) == skeleton(name)]
        if lookalikes:
            reasons.append(
                _r(
                    ReasonCode.SUPPLIER_CONFUSABLE,
                    "supplier.name",
                    f"{name!r} renders like known supplier {lookalikes[0]!r} but differs",
                )
            )
        else:
            reasons.append(
                _r(ReasonCode.SUPPLIER_UNKNOWN, "supplier.name", f"{name!r} not in master data")
            )
        return reasons
    if supplier.vat_id is not None and compact_id(supplier.vat_id.value) != compact_id(
        record.vat_id
    ):
        reasons.append(
            _r(
                ReasonCode.VAT_ID_MISMATCH,
                "supplier.vat_id",
                f"{supplier.vat_id.value!r} is not {record.name!r}'s VAT id on file",
            )
        )
    return reasons


def check_iban(
    extraction: Extraction, ocr_text: str, master_data: TenantMasterData
) -> list[Reason]:
    """Mod-97 checksum, country length, printed in the document, and on file for the supplier."""
    if extraction.iban is None:
        return []
    iban = extraction.iban.value
    reasons = []
    if not iban_checksum_ok(iban):
        reasons.append(_r(ReasonCode.IBAN_CHECKSUM_INVALID, "iban", "mod-97 check fails"))
    expected_len = IBAN_LENGTHS.get(iban[:2])
    if expected_len is not None and len(iban) != expected_len:
        reasons.append(
            _r(
                ReasonCode.IBAN_LENGTH_INVALID,
                "iban",
                f"{iban[:2]} IBANs have {expected_len} characters, got {len(iban)}",
            )
        )
    if iban not in _compact_text(ocr_text):
        reasons.append(_r(ReasonCode.IBAN_NOT_IN_TEXT, "iban", "not printed in the document"))
    name = extraction.supplier.name
    record = match_supplier(name.value, master_data) if name is not None else None
    if record is not None and record.ibans and iban not in record.ibans:
        reasons.append(
            _r(ReasonCode.IBAN_NOT_REGISTERED, "iban", f"not on file for {record.name!r}")
        )
    return reasons


ValueCheck = Callable[[str], bool]


def _amount_in(value: Decimal) -> ValueCheck:
    return lambda text: value in number_readings(text)


def _numbers_in(*values: Decimal) -> ValueCheck:
    def check(text: str) -> bool:
        readings = number_readings(text)
        return all(v in readings for v in values)

    return check


def _text_in(value: str) -> ValueCheck:
    return lambda text: normalise_text(value) in normalise_text(text)


def _id_in(value: str) -> ValueCheck:
    return lambda text: compact_id(value) in compact_id(text)


def _date_in(value: date) -> ValueCheck:
    return lambda text: value in date_readings(text)


def _currency_in(code: str) -> ValueCheck:
    def check(text: str) -> bool:
        norm = normalise_text(text)
        if re.search(rf"(?<![A-Za-z]){code}(?![A-Za-z])", norm):
            return True
        return any(sym in norm and code in codes for sym, codes in CURRENCY_SYMBOLS.items())

    return check


def evidenced_fields(extraction: Extraction) -> Iterator[tuple[str, Evidence, ValueCheck]]:
    """Every evidence reference with its field path and the test its quote must pass."""
    e = extraction
    if e.supplier.name is not None:
        yield "supplier.name", e.supplier.name.evidence, _text_in(e.supplier.name.value)
    if e.supplier.vat_id is not None:
        yield "supplier.vat_id", e.supplier.vat_id.evidence, _id_in(e.supplier.vat_id.value)
    if e.invoice_number is not None:
        yield "invoice_number", e.invoice_number.evidence, _text_in(e.invoice_number.value)
    for path, dated in (("issue_date", e.issue_date), ("due_date", e.due_date)):
        if dated is not None:
            yield path, dated.evidence, _date_in(dated.value)
    if e.currency is not None:
        yield "currency", e.currency.evidence, _currency_in(e.currency.value)
    for i, item in enumerate(e.line_items):
        check = _numbers_in(item.quantity, item.unit_price, item.line_amount, item.tax_rate)
        yield f"line_items[{i}]", item.evidence, check
    for j, tax in enumerate(e.tax_lines):
        yield f"tax_lines[{j}]", tax.evidence, _numbers_in(tax.rate, tax.base, tax.amount)
    for path, amount in (
        ("net_total", e.net_total),
        ("tax_total", e.tax_total),
        ("gross_total", e.gross_total),
    ):
        if amount is not None:
            yield path, amount.evidence, _amount_in(amount.value)
    if e.iban is not None:
        iban = e.iban.value
        yield "iban", e.iban.evidence, lambda text: iban in _compact_text(text)


def check_evidence(extraction: Extraction, ocr_text: str) -> list[Reason]:
    """Resolve every evidence span against the OCR text.

    The quote must equal ``page_text[start:end]`` after :func:`normalise_text`
    (so a fabricated or shifted span fails), the text there must show the
    extracted value, must not hide bidi controls, and no two line items may cite
    the same row.
    """
    pages = ocr_text.split("\f")
    reasons: list[Reason] = []
    rows: dict[tuple[int, int, int], int] = {}
    for path, ev, shows_value in evidenced_fields(extraction):
        if ev.page > len(pages) or ev.start >= ev.end or ev.end > len(pages[ev.page - 1]):
            reasons.append(
                _r(
                    ReasonCode.EVIDENCE_OUT_OF_RANGE,
                    path,
                    f"page {ev.page} [{ev.start}:{ev.end}] is outside the document "
                    f"({len(pages)} page(s))",
                )
            )
            continue
        actual = pages[ev.page - 1][ev.start : ev.end]
        wanted = normalise_text(ev.quote)
        if not wanted or wanted != normalise_text(actual):
            reasons.append(
                _r(
                    ReasonCode.EVIDENCE_QUOTE_MISMATCH,
                    path,
                    f"quote {ev.quote[:60]!r} is not the text at page {ev.page} "
                    f"[{ev.start}:{ev.end}] ({actual[:60]!r})",
                )
            )
            continue
        if any(ch in BIDI_CONTROLS for ch in actual):
            reasons.append(_r(ReasonCode.BIDI_CONTROL, path, "evidence span hides bidi controls"))
        if not shows_value(actual):
            reasons.append(
                _r(
                    ReasonCode.EVIDENCE_VALUE_MISMATCH,
                    path,
                    f"the text at the span ({actual[:60]!r}) does not show the extracted value",
                )
            )
        if path.startswith("line_items["):
            key = (ev.page, ev.start, ev.end)
            if key in rows:
                reasons.append(
                    _r(
                        ReasonCode.EVIDENCE_DUPLICATE,
                        path,
                        f"cites the same row as line_items[{rows[key]}]",
                    )
                )
            else:
                rows[key] = int(path[len("line_items[") : -1])
    return reasons


def check_dates(
    extraction: Extraction, today: date, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """Issue date within [today - max age, today + max future]; due date within the term."""
    reasons = []
    issue = extraction.issue_date.value if extraction.issue_date else None
    due = extraction.due_date.value if extraction.due_date else None
    if issue is not None:
        if issue > today + timedelta(days=policy.max_future_days):
            reasons.append(
                _r(ReasonCode.DATE_IMPLAUSIBLE, "issue_date", f"{issue} is after {today}")
            )
        elif issue < today - timedelta(days=policy.max_invoice_age_days):
            reasons.append(
                _r(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "issue_date",
                    f"{issue} is more than {policy.max_invoice_age_days} days before {today}",
                )
            )
    if issue is not None and due is not None:
        if due < issue:
            reasons.append(
                _r(ReasonCode.DATE_IMPLAUSIBLE, "due_date", f"{due} is before issue date {issue}")
            )
        elif (due - issue).days > policy.max_payment_term_days:
            reasons.append(
                _r(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "due_date",
                    f"payment term {(due - issue).days} days > {policy.max_payment_term_days}",
                )
            )
    return reasons


def _identifier_characters(extraction: Extraction) -> list[Reason]:
    reasons = []
    if extraction.invoice_number is not None:
        reasons += _format_characters(extraction.invoice_number.value, "invoice_number")
    for i, item in enumerate(extraction.line_items):
        if any(ch in BIDI_CONTROLS for ch in item.description):
            reasons.append(
                _r(ReasonCode.BIDI_CONTROL, f"line_items[{i}].description", "bidi control")
            )
    return reasons


def validate(
    extraction: Extraction,
    ocr_text: str,
    master_data: TenantMasterData,
    *,
    today: date,
    policy: ValidationPolicy = DEFAULT_POLICY,
) -> ValidationReport:
    """Decide SUCCEEDED or REVIEW_REQUIRED for one parsed extraction.

    Args:
        extraction: the parsed model output (see :func:`pipeline.extraction.parse_extraction`).
        ocr_text: the OCR text the job holds; pages separated by form feed.
        master_data: the tenant's suppliers and permitted currencies.
        today: the validation date (from the injected clock), for date plausibility.
        policy: the versioned thresholds; its version is recorded in the report.

    Returns:
        A report whose decision is SUCCEEDED exactly when no rule found a reason.
    """
    reasons: list[Reason] = []
    reasons += check_presence(extraction, policy)
    reasons += check_arithmetic(extraction, policy)
    reasons += check_currency(extraction, ocr_text, master_data)
    reasons += check_supplier(extraction, master_data)
    reasons += _identifier_characters(extraction)
    reasons += check_iban(extraction, ocr_text, master_data)
    reasons += check_evidence(extraction, ocr_text)
    reasons += check_dates(extraction, today, policy)
    decision = Decision.REVIEW_REQUIRED if reasons else Decision.SUCCEEDED
    return ValidationReport(decision, tuple(reasons), policy.version)
