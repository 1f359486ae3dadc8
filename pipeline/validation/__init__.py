"""The extraction contract and the validation policy: arithmetic, currency, dates,
evidence and supplier rules that decide SUCCEEDED or REVIEW_REQUIRED.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.validation.contract import (
    EXTRACTION_SCHEMA_VERSION,
    SCALAR_FIELDS,
    Evidence,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
    Extraction,
    LineItem,
    MatchKind,
    Supplier,
    TaxLine,
    extraction_json_schema,
    parse_contract,
    parse_extraction,
)
from pipeline.validation.currency import CURRENCY_SYMBOLS, ISO_4217
from pipeline.validation.dates import date_readings
from pipeline.validation.decide import validate
from pipeline.validation.policy import (
    DEFAULT_POLICY,
    VALIDATION_POLICY_VERSION,
    Decision,
    Reason,
    ReasonCode,
    SupplierRecord,
    TenantMasterData,
    ValidationPolicy,
    ValidationReport,
    policy_for,
    unvalidated_outcome,
)
from pipeline.validation.rules import RULES
from pipeline.validation.supplier import IBAN_LENGTHS, iban_checksum_ok
from pipeline.validation.text import compact_id, compact_text, normalise_name, normalise_text

__all__ = [
    "CURRENCY_SYMBOLS",
    "DEFAULT_POLICY",
    "EXTRACTION_SCHEMA_VERSION",
    "IBAN_LENGTHS",
    "ISO_4217",
    "RULES",
    "SCALAR_FIELDS",
    "VALIDATION_POLICY_VERSION",
    "Decision",
    "Evidence",
    "EvidencedAmount",
    "EvidencedCurrency",
    "EvidencedDate",
    "EvidencedIban",
    "EvidencedText",
    "Extraction",
    "LineItem",
    "MatchKind",
    "Reason",
    "ReasonCode",
    "Supplier",
    "SupplierRecord",
    "TaxLine",
    "TenantMasterData",
    "ValidationPolicy",
    "ValidationReport",
    "compact_id",
    "compact_text",
    "date_readings",
    "extraction_json_schema",
    "iban_checksum_ok",
    "normalise_name",
    "normalise_text",
    "parse_contract",
    "parse_extraction",
    "policy_for",
    "unvalidated_outcome",
    "validate",
]
