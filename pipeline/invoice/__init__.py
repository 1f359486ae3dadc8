"""The invoice model every stage shares: the extraction result and its evidence, the
reasons (with the rule ids they name), the number reader, date readings, currencies,
IBANs, the comparison forms of printed text and a tenant's master data.

It sits above the root foundation and below everything else in ``pipeline``:
extraction builds these values, validation checks them, the worker stores them, and
none of that is known here.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.invoice.contract import (
    COLLECTED_PAYMENT_MEANS,
    CONTRACT_V3,
    DIRECT_DEBIT_FIELDS,
    DIRECT_DEBIT_PAYMENT_MEANS,
    EXTRACTION_SCHEMA_VERSION,
    NOT_SUBJECT_TO_VAT,
    PAYABLE_FIELDS,
    SCALAR_FIELDS,
    SUPPORTED_OPTIONS,
    SUPPORTED_SCHEMA_VERSIONS,
    TAX_CURRENCY_FIELDS,
    V3_FIELDS,
    AllowanceCharge,
    AllowanceKind,
    DocumentType,
    Extraction,
    LineAllowanceCharge,
    LineItem,
    PayeeAccount,
    PrecedingInvoice,
    Supplier,
    TaxLine,
    parse_contract,
    parse_extraction,
    uses_v3,
)
from pipeline.invoice.currencies import CURRENCY_SYMBOLS, ISO_4217, currency_mentions
from pipeline.invoice.dates import date_readings, european_locales, locale_data
from pipeline.invoice.evidence import (
    Evidence,
    Evidenced,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
    MatchKind,
)
from pipeline.invoice.grammar_schema import extraction_json_schema
from pipeline.invoice.ibans import IBAN_LENGTHS, iban_checksum_ok
from pipeline.invoice.master_data import SupplierRecord, TenantMasterData
from pipeline.invoice.national_accounts import national_account, parse_account
from pipeline.invoice.numbers import (
    CENT,
    Printed,
    amount_strings,
    decimal_mark,
    number_readings,
    numbers_in,
    read_number,
    uses_space_groups,
)
from pipeline.invoice.reasons import Reason, ReasonCode
from pipeline.invoice.rules import RULES
from pipeline.invoice.schema_versions import (
    SCHEMA_V1,
    SCHEMA_V3,
    binding_v3_fields,
    within_v1,
)
from pipeline.invoice.text import (
    BIDI_CONTROLS,
    CONFUSABLES,
    compact_id,
    compact_text,
    mixed_script_tokens,
    names_a_registration,
    normalise_name,
    normalise_text,
    skeleton,
)

__all__ = [
    "BIDI_CONTROLS",
    "CENT",
    "COLLECTED_PAYMENT_MEANS",
    "CONFUSABLES",
    "CONTRACT_V3",
    "CURRENCY_SYMBOLS",
    "DIRECT_DEBIT_FIELDS",
    "DIRECT_DEBIT_PAYMENT_MEANS",
    "EXTRACTION_SCHEMA_VERSION",
    "IBAN_LENGTHS",
    "ISO_4217",
    "NOT_SUBJECT_TO_VAT",
    "PAYABLE_FIELDS",
    "RULES",
    "SCALAR_FIELDS",
    "SCHEMA_V1",
    "SCHEMA_V3",
    "SUPPORTED_OPTIONS",
    "SUPPORTED_SCHEMA_VERSIONS",
    "TAX_CURRENCY_FIELDS",
    "V3_FIELDS",
    "AllowanceCharge",
    "AllowanceKind",
    "DocumentType",
    "Evidence",
    "Evidenced",
    "EvidencedAmount",
    "EvidencedCurrency",
    "EvidencedDate",
    "EvidencedIban",
    "EvidencedText",
    "Extraction",
    "LineAllowanceCharge",
    "LineItem",
    "MatchKind",
    "PayeeAccount",
    "PrecedingInvoice",
    "Printed",
    "Reason",
    "ReasonCode",
    "Supplier",
    "SupplierRecord",
    "TaxLine",
    "TenantMasterData",
    "amount_strings",
    "binding_v3_fields",
    "compact_id",
    "compact_text",
    "currency_mentions",
    "date_readings",
    "decimal_mark",
    "european_locales",
    "extraction_json_schema",
    "iban_checksum_ok",
    "locale_data",
    "mixed_script_tokens",
    "names_a_registration",
    "national_account",
    "normalise_name",
    "normalise_text",
    "number_readings",
    "numbers_in",
    "parse_account",
    "parse_contract",
    "parse_extraction",
    "read_number",
    "skeleton",
    "uses_space_groups",
    "uses_v3",
    "within_v1",
]
