"""How the extraction contract's values travel: money, quantities and rates as
Decimal in Python and plain decimal strings in JSON (a JSON number is refused, never
coerced), ISO dates, currency codes, IBANs in electronic form, evidence offsets; and
the base of every contract model (unknown keys are errors, values immutable).

:mod:`pipeline.invoice.contract` builds the contract from these types.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
)

DECIMAL_PATTERN = r"^-?[0-9]{1,15}(\.[0-9]{1,6})?$"
RATE_PATTERN = r"^[0-9]{1,2}(\.[0-9]{1,2})?$"
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
CURRENCY_PATTERN = r"^[A-Z]{3}$"
IBAN_PATTERN = r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$"

_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
_RATE_RE = re.compile(RATE_PATTERN)
_DATE_RE = re.compile(DATE_PATTERN)
_CURRENCY_RE = re.compile(CURRENCY_PATTERN)
_IBAN_RE = re.compile(IBAN_PATTERN)


def _decimal_validator(pattern: re.Pattern[str], what: str) -> Any:
    """Build a validator accepting a pattern-conformant string or a Decimal.

    Decimals are accepted so Python code (the generator, tests) can build
    extractions directly; they must still print in plain notation within the
    pattern, so the JSON form of any accepted value parses back to itself.
    """

    def validate(value: object) -> Decimal:
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"{what} must be finite")
            text = format(value, "f")
        elif isinstance(value, str):
            text = value
        else:
            raise ValueError(f'{what} must be a JSON string such as "1234.50", not a number')
        if not pattern.fullmatch(text):
            raise ValueError(f"{what} {text!r} does not match {pattern.pattern}")
        try:
            return Decimal(text)
        except InvalidOperation as exc:  # pragma: no cover - the pattern excludes this
            raise ValueError(f"{what} {text!r} is not a decimal") from exc

    return validate


def _decimal_to_str(value: Decimal) -> str:
    return format(value, "f")


def _date_from_str(value: object) -> date:
    if isinstance(value, date):
        return value
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        raise ValueError(f"date must be an ISO string YYYY-MM-DD, got {value!r}")
    return date.fromisoformat(value)


def _date_to_str(value: date) -> str:
    return value.isoformat()


def _pattern_str(pattern: re.Pattern[str], what: str, *, personal: bool = False) -> Any:
    """A validator of strings matching ``pattern``; ``personal``: its refusal names the
    value's length, not the value (it becomes an attempt's error detail, stored as it
    is: docs/data-lifecycle.md)."""

    def validate(value: object) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            got = f"{len(value)} characters" if personal and isinstance(value, str) else repr(value)
            raise ValueError(f"{what} must match {pattern.pattern}, got {got}")
        return value

    return validate


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank; use null for a missing value")
    return value


def _non_negative(value: int) -> int:
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _positive(value: int) -> int:
    if value < 1:
        raise ValueError("must be >= 1")
    return value


#: A money amount: Decimal in Python, a plain decimal string in JSON.
Amount = Annotated[
    Decimal,
    PlainValidator(_decimal_validator(_DECIMAL_RE, "amount")),
    PlainSerializer(_decimal_to_str, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": DECIMAL_PATTERN}),
]
#: A quantity: same wire form as an amount (fractional hours, kilograms).
Quantity = Amount
#: A tax rate in percent (``"19"``, ``"8.1"``), 0 to 99.99.
Rate = Annotated[
    Decimal,
    PlainValidator(_decimal_validator(_RATE_RE, "tax rate")),
    PlainSerializer(_decimal_to_str, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": RATE_PATTERN}),
]
IsoDate = Annotated[
    date,
    PlainValidator(_date_from_str),
    PlainSerializer(_date_to_str, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "pattern": DATE_PATTERN}),
]
CurrencyCode = Annotated[
    str,
    PlainValidator(_pattern_str(_CURRENCY_RE, "currency")),
    WithJsonSchema({"type": "string", "pattern": CURRENCY_PATTERN}),
]
IbanStr = Annotated[
    str,
    PlainValidator(_pattern_str(_IBAN_RE, "IBAN", personal=True)),
    WithJsonSchema({"type": "string", "pattern": IBAN_PATTERN}),
]
NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]
Offset = Annotated[int, Field(strict=True), AfterValidator(_non_negative)]
PageNumber = Annotated[int, Field(strict=True), AfterValidator(_positive)]


class ContractModel(BaseModel):
    """Base of every contract model: unknown keys are errors, values immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
