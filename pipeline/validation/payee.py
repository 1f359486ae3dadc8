"""Payee rule: an invoice without IBAN is accepted only where it states no account to pay.

The IBAN check exists to stop payment redirection: an IBAN the invoice states must be the
supplier's on file (:func:`~pipeline.validation.supplier.check_iban`). An invoice that
states no account at all cannot redirect money: the ERP pays the supplier's account from
its own vendor master (the delivery body says so, ``payee_account: "on_file"``,
docs/delivery.md). So the default policy, which requires an IBAN, takes a null IBAN as
proven where the text the result was read from states none (rule
``validation.iban_absent``):

* no IBAN-shaped string (two letters, two check digits, 11 to 30 more letters or digits,
  printed compact or in groups, across a line break too) and no ``IBAN`` label anywhere
  in it, read after NFKC and lookalike folding, so a Cyrillic ``ІВАN`` is still a label:
  otherwise the IBAN the page prints is one the result left out, ``missing_field`` as
  before;
* no label of another bank account (``Bankgiro``, ``Kontonummer``, ``BLZ``, ``Sort
  code``, ``BIC``...): an account that is not an IBAN states where to pay and master data
  cannot check it, ``payee_account_not_iban`` naming the label.

An e-invoice's XML is read by code, which sees every payee account it states: one that is
not an IBAN (BT-84 a Swedish bankgiro) is the reader's ``payee_account_not_iban``
(:mod:`pipeline.extraction.einvoice`), and an XML upload's text rules read only what the
XML states (its amounts and IBANs), so the proof holds for one without payment means.

Nothing here accepts a wrong value: the result keeps ``iban: null``, which is what the
document says; a null beside anything IBAN-like printed stays in review.
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.invoice import CONFUSABLES, Reason, ReasonCode

#: An IBAN's shape as printed: country, check digits, then letters or digits, compact or
#: in runs separated by single spaces (``NL57 RABO 0107307510``); or in groups of four
#: separated by a hyphen, a dot or a line break (``DE89-3704-0044-...``, a group on the
#: next line). 15 or more characters compact.
_IBAN_SHAPES = (
    re.compile(r"(?<![A-Z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{1,4}){3,10}"),
    re.compile(
        r"(?<![A-Z0-9])[A-Z]{2}[0-9]{2}(?:(?:[ .\-]| *\n *)[A-Z0-9]{4}){2,7}"
        r"(?:(?:[ .\-]| *\n *)[A-Z0-9]{1,4})?"
    ),
)
_IBAN_MIN_CHARS = 15
#: The IBAN label, dotted or spaced (``I.B.A.N.``), an OCR'd ``1BAN`` or ``lBAN`` too.
_IBAN_LABEL = re.compile(r"(?<![A-Z0-9])[I1L]\.? ?B\.? ?A\.? ?N(?![A-Z0-9])")
#: Labels of a bank account that is no IBAN, or that go with one (a BIC names the bank of
#: an account), in the languages of the corpora: any of them means the page states where
#: to pay.
_ACCOUNT_LABELS = re.compile(
    r"(?<![A-Z0-9])(?:"
    r"BANKGIRO|PLUSGIRO|POSTGIRO|BANKGIROT|PLUSGIROT|"
    r"KONTO|KONTONUMMER|KONTONR|KONTO-?NR|KTO|BLZ|BANKLEITZAHL|BANKVERBINDUNG|BANKKONTO|"
    r"GIROKONTO|BIC|SWIFT|BANK ACCOUNT|ACCOUNT NUMBER|ACCOUNT NO|ACCT|SORT CODE|"
    r"ROUTING NUMBER|BANK DETAILS|RIB|NUM[EÉ]RO DE COMPTE|N° DE COMPTE|"
    r"COORDONN[EÉ]ES BANCAIRES|CONTO CORRENTE|REKENINGNUMMER|"
    r"N[UÚ]MERO DE CUENTA|CUENTA BANCARIA"
    r")(?![A-Z0-9])"
)


def _folded(text: str) -> str:
    """NFKC, format characters dropped, lookalikes outside ASCII to their Latin letter
    (a Cyrillic ``І``; an ASCII ``I`` stays itself), upper case."""
    nfkc = unicodedata.normalize("NFKC", text)
    return "".join(
        CONFUSABLES.get(ch, ch) if not ch.isascii() else ch
        for ch in nfkc
        if unicodedata.category(ch) != "Cf"
    ).upper()


def printed_iban_marks(text: str) -> tuple[str, ...]:
    """The IBAN-shaped strings and ``IBAN`` labels the text prints (folded), in order."""
    folded = _folded(text)
    shapes = [
        m.start()
        for shape in _IBAN_SHAPES
        for m in shape.finditer(folded)
        if len(re.sub(r"[\s.\-]", "", m.group())) >= _IBAN_MIN_CHARS
    ]
    marks = sorted(
        [(at, folded[at : at + 4] + "…") for at in set(shapes)]
        + [(m.start(), "IBAN") for m in _IBAN_LABEL.finditer(folded)]
    )
    return tuple(mark for _, mark in marks)


def printed_account_labels(text: str) -> tuple[str, ...]:
    """The labels of a bank account other than an IBAN the text prints (folded), once each."""
    return tuple(dict.fromkeys(m.group() for m in _ACCOUNT_LABELS.finditer(_folded(text))))


def check_iban_absent(text: str) -> list[Reason]:
    """Why a null IBAN is not proven absent by ``text``: empty where the text states no
    account to pay (rule ``validation.iban_absent``)."""
    if marks := printed_iban_marks(text):
        return [
            Reason(
                ReasonCode.MISSING_FIELD,
                "iban",
                f"required by policy but null, and the document prints {marks[0]!r}",
                rule="validation.iban_absent",
            )
        ]
    if labels := printed_account_labels(text):
        return [
            Reason(
                ReasonCode.PAYEE_ACCOUNT_NOT_IBAN,
                "iban",
                f"the document prints an account to pay that is no IBAN ({', '.join(labels)}): "
                "master data cannot check it",
                rule="validation.payee_account_not_iban",
            )
        ]
    return []
