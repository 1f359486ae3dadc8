"""Document title rule: a page titled as a credit note is never accepted as an invoice.

A model's answer holds invoices only (contract v2 has no document type), and a credit
note prints what an invoice prints: a number, dates, lines and totals, all positive. Read
as an invoice it would be posted as one and paid, the opposite of what it says. So a
page whose title says credit note or corrected invoice ("Credit note", "Gutschrift",
"Avoir", "Nota di credito", "Rechnungskorrektur", ...) goes to review with
``credit_note_unsupported_on_text`` unless the result is a credit note its XML stated
(the e-invoice path: the type code is the document's own statement, and a Factur-X
credit note prints its title on the page). A corrected invoice's title gives the rule
id :data:`CORRECTION_TITLE_RULE`, the amendment marker of a result read from the text.

A title is the word at the start of a line, alone or followed by a number or a number
label, or a parenthesis ("Gutschrift Nr. 17", "Avoir AV-2017-0005", "Credit note: CN-4",
"Rechnungskorrektur (384) Nr. RK21012345"); the same word
inside a sentence ("Der Betrag wird als Gutschrift verrechnet", "sans avoir") is none.
A missed title costs a wrong accept, a false one a review, so the list is wide and the
shape narrow.
"""

from __future__ import annotations

import re

from pipeline.invoice import Extraction, Reason, ReasonCode

#: Titles of credit notes and corrected invoices, by language (folded to lower case).
CREDIT_NOTE_TITLES = (
    "credit note", "credit-note", "creditnote", "credit memo", "credit memorandum",
    "gutschrift", "gutschriftsanzeige", "rechnungskorrektur", "korrekturrechnung",
    "stornorechnung", "storno-rechnung", "rechnungsstorno",
    "avoir", "facture d'avoir", "facture d’avoir", "note de crédit", "note de credit",
    "facture rectificative",
    "nota di credito", "nota credito", "fattura di storno", "nota de crédito",
    "nota de credito", "factura rectificativa", "nota de abono", "factura de abono",
    "creditnota", "creditfactuur", "kreditnota", "kreditfaktura", "hyvityslasku",
    "faktura korygująca", "nota kredytowa", "dobropis", "opravný daňový doklad",
    "corrective invoice", "corrected invoice",
)  # fmt: skip
#: The titles among them that correct an earlier issue of the same invoice: their reason
#: carries :data:`CORRECTION_TITLE_RULE`, which the version step reads as an amendment
#: marker (:func:`pipeline.jobs.versions.amendment_marker`).
CORRECTION_TITLES = frozenset(
    {
        "rechnungskorrektur", "korrekturrechnung", "facture rectificative",
        "factura rectificativa", "faktura korygująca", "opravný daňový doklad",
        "corrective invoice", "corrected invoice",
    }
)  # fmt: skip
CORRECTION_TITLE_RULE = "validation.correction_title"
_TITLE = re.compile(
    r"^[^\w\n]*(?P<title>"
    + "|".join(re.escape(t).replace(r"\ ", r"[^\S\n]+") for t in CREDIT_NOTE_TITLES)
    + r")(?=[^\S\n]*$|[^\S\n]*(?:nr\b|no\b|n[°º]|#|:|number\b|nummer\b|num[ée]ro\b"
    r"|numero\b|n\.|\()|[^\S\n]+[\w./-]*[0-9])",
    re.IGNORECASE | re.MULTILINE,
)


def printed_title(text: str) -> str | None:
    """The first line of ``text`` titled as a credit note or correction, as printed."""
    match = _TITLE.search(text)
    if match is None:
        return None
    end = text.find("\n", match.start("title"))
    return text[match.start("title") : end if end >= 0 else None].strip()[:80]


def check_document_title(extraction: Extraction, text: str) -> list[Reason]:
    """``credit_note_unsupported_on_text`` where the page is titled as a credit note or
    correction and the result is not a credit note read from its XML."""
    if extraction.document_type == "credit_note":
        return []  # the XML's type code: a Factur-X credit note prints its title
    match = _TITLE.search(text)
    if match is None:
        return []
    title = printed_title(text)
    said = " ".join(match.group("title").casefold().split())
    rule = CORRECTION_TITLE_RULE if said in CORRECTION_TITLES else "validation.credit_note_title"
    return [
        Reason(
            ReasonCode.CREDIT_NOTE_UNSUPPORTED_ON_TEXT,
            "document_type",
            f"the page is titled {title!r}: a credit note, a correction or (German "
            "Gutschrift) a self-billed invoice, which a result read from the text cannot hold",
            rule=rule,
        )
    ]
