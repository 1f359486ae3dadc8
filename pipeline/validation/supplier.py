"""Identity rules: who is paid. Supplier name, VAT id or tax number, IBAN and hidden
characters.

The supplier must match a master record after :func:`normalise_name`; a name
that only matches after :func:`skeleton` is a homoglyph (``supplier_confusable``).
Its VAT id must be the one on file; a result without VAT id (contract v3: an e-invoice
whose seller states only its tax number, EN 16931 BT-32) is identified by its tax
number, which must then be the one on file (``tax_number_mismatch``, also where the
supplier has no tax number on file). An invoice not subject to VAT (contract v3,
category ``O``) states no VAT id (EN 16931 BR-O-02) and may state no tax number either:
then nothing but its name and IBAN names the seller, and a name is no proof (anyone can
print it), so the IBAN must be one on file for the supplier of that name
(``supplier_unidentified`` otherwise, and where it states no IBAN).
The IBAN must pass mod-97 and its country length, be printed in the document,
and be on file for the supplier. A national account to pay (contract v3's
``payee_account``, a Swedish bankgiro, where the invoice states no IBAN) must be on file
for the supplier, always (``payee_account_not_registered``; a supplier with none on file
has none the account could be); it proves a seller not subject to VAT as an IBAN on file
does. Bidi controls and invisible characters in a
name, VAT id or invoice number (and bidi controls in a line description) are
reasons of their own, because they change what a reviewer sees without
changing what a program reads.
"""

from __future__ import annotations

import unicodedata

from pipeline.invoice import (
    BIDI_CONTROLS,
    IBAN_LENGTHS,
    Extraction,
    Reason,
    ReasonCode,
    SupplierRecord,
    TenantMasterData,
    compact_id,
    compact_text,
    iban_checksum_ok,
    mixed_script_tokens,
    normalise_name,
    skeleton,
)


def _format_characters(value: str, path: str) -> list[Reason]:
    bidi = sorted({f"U+{ord(ch):04X}" for ch in value if ch in BIDI_CONTROLS})
    if bidi:
        return [
            Reason(
                ReasonCode.BIDI_CONTROL,
                path,
                f"contains {', '.join(bidi)}",
                rule="validation.bidi_control",
            )
        ]
    hidden = sorted({f"U+{ord(ch):04X}" for ch in value if unicodedata.category(ch) == "Cf"})
    if hidden:
        return [
            Reason(
                ReasonCode.INVISIBLE_CHARACTER,
                path,
                f"contains {', '.join(hidden)}",
                rule="validation.invisible_character",
            )
        ]
    return []


def match_supplier(
    name: str,
    master_data: TenantMasterData,
    vat_id: str | None = None,
    tax_number: str | None = None,
    iban: str | None = None,
    account: str | None = None,
) -> SupplierRecord | None:
    """The master record whose name equals ``name`` after :func:`normalise_name`.

    Two suppliers may trade under the same name (one per country, say): among
    records of that name the one whose VAT id is ``vat_id`` wins; without ``vat_id``,
    the one whose tax number is ``tax_number``; without either, the one with ``iban``
    (or the national ``account``, canonical ``SCHEME:ID``) on file; else the first.
    """
    wanted = normalise_name(name)
    named = [r for r in master_data.suppliers if normalise_name(r.name) == wanted]
    for field, given in (("vat_id", vat_id), ("tax_number", None if vat_id else tax_number)):
        if given is None:
            continue
        for record in named:
            on_file = getattr(record, field)
            if on_file is not None and compact_id(on_file) == compact_id(given):
                return record
    if vat_id is None and tax_number is None:
        for record in named:
            if (iban is not None and iban in record.ibans) or (
                account is not None and account in record.accounts
            ):
                return record
    return named[0] if named else None


def _ids(extraction: Extraction) -> tuple[str | None, str | None, str | None, str | None]:
    """The result's VAT id, tax number, IBAN and national account (``SCHEME:ID``) values
    (None: not stated)."""
    supplier = extraction.supplier
    vat = supplier.vat_id.value if supplier.vat_id is not None else None
    tax = supplier.tax_number.value if supplier.tax_number is not None else None
    iban = extraction.iban.value if extraction.iban is not None else None
    payee = extraction.payee_account
    return vat, tax, iban, payee.canonical if payee is not None else None


def _same(stated: str, on_file: str | None) -> bool:
    return on_file is not None and compact_id(stated) == compact_id(on_file)


def check_supplier(extraction: Extraction, master_data: TenantMasterData) -> list[Reason]:
    """The supplier is a known one, spelled with one script per word and no hidden
    characters, and the VAT id is the one on file.

    A name that matches no record but whose :func:`skeleton` equals a record's
    is reported as ``supplier_confusable``: it renders like a known supplier
    while being a different string, the homoglyph attack.
    """
    reasons: list[Reason] = []
    supplier = extraction.supplier
    for path, evidenced in (
        ("supplier.name", supplier.name),
        ("supplier.vat_id", supplier.vat_id),
        ("supplier.tax_number", supplier.tax_number),
    ):
        if evidenced is not None:
            reasons += _format_characters(evidenced.value, path)
    if supplier.name is None:
        return reasons
    name = supplier.name.value
    mixed = mixed_script_tokens(name)
    if mixed:
        reasons.append(
            Reason(
                ReasonCode.SUPPLIER_MIXED_SCRIPT,
                "supplier.name",
                f"mixed scripts in {mixed!r}",
                rule="validation.supplier_mixed_script",
            )
        )
    vat, tax, iban, account = _ids(extraction)
    record = match_supplier(name, master_data, vat, tax, iban, account)
    if record is None:
        lookalikes = [r.name for r in master_data.suppliers if skeleton(r.name) == skeleton(name)]
        if lookalikes:
            reasons.append(
                Reason(
                    ReasonCode.SUPPLIER_CONFUSABLE,
                    "supplier.name",
                    f"{name!r} renders like known supplier {lookalikes[0]!r} but differs",
                    rule="validation.supplier_confusable",
                )
            )
        else:
            reasons.append(
                Reason(
                    ReasonCode.SUPPLIER_UNKNOWN,
                    "supplier.name",
                    f"{name!r} not in master data",
                    rule="validation.supplier_unknown",
                )
            )
        return reasons
    if vat is not None and not _same(vat, record.vat_id):
        reasons.append(
            Reason(
                ReasonCode.VAT_ID_MISMATCH,
                "supplier.vat_id",
                f"{vat!r} is not {record.name!r}'s VAT id on file",
                rule="validation.vat_id_mismatch",
            )
        )
    if vat is None and tax is None and extraction.not_subject_to_vat():
        reasons += _proven_by_iban(record, iban, account)
    if tax is not None and (vat is None or record.tax_number is not None):
        # without a VAT id the tax number is the supplier's identity; beside one, a tax
        # number on file must still be the one stated
        if not _same(tax, record.tax_number):
            on_file = "no tax number" if record.tax_number is None else "another tax number"
            reasons.append(
                Reason(
                    ReasonCode.TAX_NUMBER_MISMATCH,
                    "supplier.tax_number",
                    f"{tax!r} is not {record.name!r}'s tax number ({on_file} on file)",
                    rule="validation.tax_number_mismatch",
                )
            )
    return reasons


def _proven_by_iban(
    record: SupplierRecord, iban: str | None, account: str | None = None
) -> list[Reason]:
    """A seller not subject to VAT without VAT id or tax number: its IBAN (or national
    account) must be on file for the supplier of its name, the one thing master data
    holds that it states."""
    if iban is not None and iban in record.ibans:
        return []
    if iban is None and account is not None:
        if account in record.accounts:
            return []
        why = "and its account to pay is not one on file"
    elif iban is None:
        why = "and no IBAN"
    else:
        why = "and its IBAN is " + ("not one" if record.ibans else "none (no IBAN)")
        why += " on file"
    return [
        Reason(
            ReasonCode.SUPPLIER_UNIDENTIFIED,
            "supplier.name",
            f"not subject to VAT, states neither VAT id nor tax number {why}: nothing "
            f"on file proves it is {record.name!r}",
            rule="validation.supplier_unidentified",
        )
    ]


def check_iban(
    extraction: Extraction, ocr_text: str, master_data: TenantMasterData
) -> list[Reason]:
    """Mod-97 checksum, country length, printed in the document, and on file for the supplier."""
    if extraction.iban is None:
        return []
    iban = extraction.iban.value
    reasons = []
    if not iban_checksum_ok(iban):
        reasons.append(
            Reason(
                ReasonCode.IBAN_CHECKSUM_INVALID,
                "iban",
                "mod-97 check fails",
                rule="validation.iban_checksum",
            )
        )
    expected_len = IBAN_LENGTHS.get(iban[:2])
    if expected_len is not None and len(iban) != expected_len:
        reasons.append(
            Reason(
                ReasonCode.IBAN_LENGTH_INVALID,
                "iban",
                f"{iban[:2]} IBANs have {expected_len} characters, got {len(iban)}",
                rule="validation.iban_length",
            )
        )
    if iban not in compact_text(ocr_text):
        reasons.append(
            Reason(
                ReasonCode.IBAN_NOT_IN_TEXT,
                "iban",
                "not printed in the document",
                rule="validation.iban_not_in_text",
            )
        )
    name = extraction.supplier.name
    record = (
        match_supplier(name.value, master_data, *_ids(extraction)) if name is not None else None
    )
    if record is not None and record.ibans and iban not in record.ibans:
        reasons.append(
            Reason(
                ReasonCode.IBAN_NOT_REGISTERED,
                "iban",
                f"not on file for {record.name!r}",
                rule="validation.iban_not_registered",
            )
        )
    return reasons


def check_payee_account(extraction: Extraction, master_data: TenantMasterData) -> list[Reason]:
    """A national account to pay (contract v3's ``payee_account``) must be on file for
    the supplier (rule ``validation.payee_account_not_registered``): unlike an IBAN, a
    supplier with none on file accepts none, and a supplier not on file none either."""
    payee = extraction.payee_account
    if payee is None:
        return []
    name = extraction.supplier.name
    record = (
        match_supplier(name.value, master_data, *_ids(extraction)) if name is not None else None
    )
    if record is not None and payee.canonical in record.accounts:
        return []
    whose = repr(record.name) if record is not None else "the supplier (not on file)"
    return [
        Reason(
            ReasonCode.PAYEE_ACCOUNT_NOT_REGISTERED,
            "payee_account",
            f"{payee.scheme} account not on file for {whose}",
            rule="validation.payee_account_not_registered",
        )
    ]


def check_identifier_characters(extraction: Extraction) -> list[Reason]:
    """Bidi or invisible characters in the invoice number; bidi controls in line descriptions."""
    reasons = []
    if extraction.invoice_number is not None:
        reasons += _format_characters(extraction.invoice_number.value, "invoice_number")
    for i, item in enumerate(extraction.line_items):
        if any(ch in BIDI_CONTROLS for ch in item.description):
            reasons.append(
                Reason(
                    ReasonCode.BIDI_CONTROL,
                    f"line_items[{i}].description",
                    "bidi control",
                    rule="validation.bidi_control",
                )
            )
    return reasons
