"""Which values of an answer OCR read with enough certainty to accept.

OCR's misread characters ground as printed: a lost accent or a 5 read as an S is in
the text the evidence points into, so grounding and validation cannot see it. What
can see it is tesseract's own confidence in each word. A value whose text came from
OCR is *proven* when every OCR word its evidence overlaps was read with at least the
threshold's confidence (:data:`DEFAULT_MIN_CONFIDENCE`; a lower one,
:data:`DEFAULT_CHECKED_MIN_CONFIDENCE`, for values whose misread another check catches
exactly: totals and tax lines by arithmetic, supplier, VAT id and IBAN by master
data); a value that is not proven goes to review with ``ocr_unverified`` naming its
field (rule ``documents.ocr_unverified``). Values on a
page read from a PDF's text layer need no proof.

What a value's evidence covers:

* header fields (supplier name and VAT id, invoice number, dates, currency, IBAN,
  totals): their evidence span;
* a line item or a tax line: its whole printed row (the row's evidence), so its
  description, quantity, prices and rate are all covered.

Confidence cannot see a lost accent: tesseract reads "Equerre" for "Équerre" and
"Konsulttjanster" for "Konsulttjänster" sure of itself. So free text is held tighter:

* a value grounded by a fuzzy match (free text whose answer is not what the OCR'd
  text prints: a homoglyph the scan cannot show, a lost letter) is not proven;
* the supplier name must be spelled exactly as a supplier on file (validation's match
  folds case, so a misread case would otherwise be delivered in the OCR's spelling);
* every word of a line item's description must be one the document's language lists
  (tesseract's own word lists, :mod:`pipeline.documents.ocr_lexicon`) and, where the
  OCR saw no accent on it, one that no word of the list spells with an accent
  ("cafe" / "café"); a word the list lacks cannot be told from its accented twin.

Without the words' confidences (a text kept before they were recorded) nothing can be
proven and the whole document goes to review, as before.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

from pipeline.documents import (
    CLEAR,
    INK,
    OTHER_MARK,
    READABLE_WORDS_VERSIONS,
    DocumentText,
    OcrLexicon,
    mark_above,
    mark_below,
    ocr_lexicon,
    strip_accents,
    words_to_keep,
)
from pipeline.invoice import Evidence, Extraction, Reason, ReasonCode, TenantMasterData
from pipeline.settings import Settings
from pipeline.validation import ValueProof

#: The least confidence (tesseract's 0–100) of every OCR word under an accepted value
#: that nothing else checks (invoice number, dates, currency, a line item's row, whose
#: quantity x price is compared only after rounding). On 26 generated scans (seeds
#: 5000-5029) 1.5 % of the words read at 90 or more were misread, 15 % of those read
#: at 85-90 (docs/documents.md, "Values OCR read").
DEFAULT_MIN_CONFIDENCE = 90.0
#: The same for a value a misread of which another check catches exactly: the totals
#: and tax lines (sums and net + tax = gross, tolerance 0), the supplier's name and
#: VAT id (equal to the ones on file) and the IBAN (mod-97, on file).
DEFAULT_CHECKED_MIN_CONFIDENCE = 80.0
_CHECKED = frozenset(
    {"supplier.name", "supplier.vat_id", "iban", "net_total", "tax_total", "gross_total"}
)
RULE = "documents.ocr_unverified"
#: A word OCR read without accents, listed with an accented twin, vouched for because
#: the page shows no ink above or below its letters where the twin carries marks.
BARE_RULE = "documents.ocr_bare_proven"


@dataclass(frozen=True, slots=True)
class WordConfidence:
    """One OCR word: ``start``/``end`` are offsets in its page's text (as evidence's);
    ``marks`` the ink above and below each of its characters on the page image
    (:func:`~pipeline.documents.ocr_marks.mark_codes`), None where not kept."""

    page: int
    start: int
    end: int
    confidence: float
    marks: str | None = None


@dataclass(frozen=True, slots=True)
class OcrConfidences:
    """The OCR'd pages of a document and the confidence of each word on them."""

    pages: frozenset[int]
    words: tuple[WordConfidence, ...]

    @classmethod
    def of(cls, document: DocumentText) -> OcrConfidences | None:
        """The confidences of ``document``'s OCR'd words, as its kept words give them
        (:meth:`from_words` of :func:`~pipeline.documents.words_to_keep`); None where
        OCR read no page."""
        if not document.ocr_pages:
            return None
        return cls.from_words(words_to_keep(document))

    @classmethod
    def from_words(cls, words: Mapping[str, Any] | None) -> OcrConfidences | None:
        """The confidences in a document's kept words (``document_texts.words``,
        migration 025: the one store of them): every word read with a confidence, and
        as OCR'd pages those with such a word (a text layer's words have none). None
        where no words were kept (a text kept before migration 025) or they are not in
        this release's format: no value can then be proven."""
        if words is None or words.get("version") not in READABLE_WORDS_VERSIONS:
            return None
        pages: set[int] = set()
        scored: list[WordConfidence] = []
        for entry in words.get("pages", ()):
            number = int(entry["number"])
            for start, end, _left, _top, _right, _bottom, confidence, *rest in entry["words"]:
                if confidence is not None:
                    pages.add(number)
                    marks = rest[0] if rest and isinstance(rest[0], str) else None
                    scored.append(
                        WordConfidence(number, int(start), int(end), float(confidence), marks)
                    )
        return cls(frozenset(pages), tuple(scored))

    def least(self, evidence: Evidence) -> float | None:
        """The least confidence of the OCR words ``evidence`` overlaps; None where it
        overlaps none (nothing OCR read stands behind it)."""
        scores = [
            w.confidence
            for w in self.words
            if w.page == evidence.page and w.start < evidence.end and w.end > evidence.start
        ]
        return min(scores) if scores else None


def _evidenced(extraction: Extraction) -> Iterable[tuple[str, Evidence]]:
    supplier = extraction.supplier
    for path, field in (
        ("supplier.name", supplier.name),
        ("supplier.vat_id", supplier.vat_id),
        ("invoice_number", extraction.invoice_number),
        ("issue_date", extraction.issue_date),
        ("due_date", extraction.due_date),
        ("currency", extraction.currency),
        ("net_total", extraction.net_total),
        ("tax_total", extraction.tax_total),
        ("gross_total", extraction.gross_total),
        ("iban", extraction.iban),
    ):
        if field is not None:
            yield path, field.evidence
    for i, item in enumerate(extraction.line_items):
        yield f"line_items[{i}]", item.evidence
    for i, tax in enumerate(extraction.tax_lines):
        yield f"tax_lines[{i}]", tax.evidence


_LETTERS = re.compile(r"[^\W\d_]+")
_ITEM_ROW = re.compile(r"line_items\[(\d+)\]")


def _row_least(
    extraction: Extraction,
    index: int,
    pages: list[str],
    confidences: OcrConfidences,
    *,
    min_confidence: float,
    checked_min_confidence: float,
) -> tuple[float, float]:
    """The least confidence of line item ``index``'s row and the floor it must reach.

    The row's words outside its description print its quantity, unit price, amount and
    rate (and words that are no value: a position, a unit). Where the invoice's numbers
    prove each other exactly (:func:`_row_arithmetic_exact`), a misread of any one of
    those breaks an equality: they are held to ``checked_min_confidence``, as the totals
    are, and the description's words to ``min_confidence``. Otherwise (or where the
    description is not found in the row) every word of the row is held to
    ``min_confidence``. Returns the lowest margin: (least, floor) of the part furthest
    below its floor."""
    item = extraction.line_items[index]
    evidence = item.evidence
    row = _words(confidences, evidence.page, evidence.start, evidence.end)
    whole = (min((w.confidence for w in row), default=0.0), min_confidence)
    page = pages[evidence.page - 1] if evidence.page <= len(pages) else ""
    at = page.find(item.description, evidence.start, evidence.end)
    if at < 0 or not _row_arithmetic_exact(extraction, index):
        return whole
    end = at + len(item.description)
    described = [w.confidence for w in row if w.start < end and w.end > at]
    numbers = [w.confidence for w in row if not (w.start < end and w.end > at)]
    parts = [(min(described), min_confidence)] if described else []
    if numbers:
        parts.append((min(numbers), checked_min_confidence))
    return min(parts, key=lambda part: part[0] - part[1]) if parts else whole


def _row_arithmetic_exact(extraction: Extraction, index: int) -> bool:
    """Every number of line item ``index`` is bound by an exact equality, independent
    of the validation policy's tolerance and rounding: quantity x unit price is the line
    amount without rounding (so a misread quantity or price, the amount right, cannot
    give the same product), the line amounts sum to the net total (a misread amount
    breaks it), and a tax line at the item's rate has as its base the sum of the line
    amounts at that rate (a misread rate moves the amount to another rate's sum, or to
    a rate without a tax line). A misread passes only where two misreads cancel exactly.
    """
    item = extraction.line_items[index]
    net = extraction.net_total
    if net is None:
        return False
    with localcontext() as ctx:
        ctx.prec = 60
        if item.quantity * item.unit_price != item.line_amount:
            return False
        if sum((i.line_amount for i in extraction.line_items), Decimal(0)) != net.value:
            return False
        at_rate = sum(
            (i.line_amount for i in extraction.line_items if i.tax_rate == item.tax_rate),
            Decimal(0),
        )
    bases = [t.base for t in extraction.tax_lines if t.rate == item.tax_rate]
    return len(bases) == 1 and bases[0] == at_rate


_LEXICON_LOAD = threading.Lock()


def default_lexicon() -> OcrLexicon | None:
    """The word lists of the languages OCR reads with (the process's settings).

    Loaded on first need, once per process (about 30-40 s for the ten default
    languages; :func:`~pipeline.documents.ocr_lexicon` caches them), and only where a
    line item's description OCR read is to be proven; the lock keeps two attempts
    that need them at once from both loading them."""
    settings = Settings()
    with _LEXICON_LOAD:
        return ocr_lexicon(settings.ocr_tesseract, settings.ocr_languages)


def _words(confidences: OcrConfidences, page: int, start: int, end: int) -> list[WordConfidence]:
    return [w for w in confidences.words if w.page == page and w.start < end and w.end > start]


def _uncertain_words(
    description: str,
    evidence: Evidence,
    pages: list[str],
    confidences: OcrConfidences,
    lexicon: OcrLexicon | None,
    language: str | None,
    proven: list[str] | None = None,
) -> list[str] | None:
    """The words of ``description`` (in its row) no word list vouches for, each with
    why (:func:`doubt`); None where the description is not in its row. Words read
    bare that only the page image vouched for are added to ``proven``."""
    page = pages[evidence.page - 1] if evidence.page <= len(pages) else ""
    at = page.find(description, evidence.start, evidence.end)
    if at < 0:
        return None
    doubtful = []
    for word in _words(confidences, evidence.page, at, at + len(description)):
        text = page[word.start : word.end]
        marks = word.marks if word.marks is not None and len(word.marks) == len(text) else None
        for found in _LETTERS.finditer(text):
            why = doubt(found.group(), text, marks, found.start(), lexicon, language)
            if why is not None:
                doubtful.append(f"{found.group()} ({why})")
            elif proven is not None and not (
                lexicon is None or language is None or lexicon.certain(found.group(), language)
            ):
                if strip_accents(found.group()) == found.group().casefold():
                    proven.append(found.group())
    return doubtful


def doubt(
    letters: str,
    word: str,
    marks: str | None,
    offset: int,
    lexicon: OcrLexicon | None,
    language: str | None,
) -> str | None:
    """Why the word list and the page cannot vouch for ``letters`` (a run of letters at
    ``offset`` of the OCR'd ``word``, whose character ``marks`` are given where kept);
    None where they do.

    * read without an accent: listed, and either no word of the list spells it with
      one (:meth:`OcrLexicon.certain`), or the page shows no ink above or below each
      letter where a twin carries a mark (:func:`_proven_bare`, rule
      :data:`BARE_RULE`);
    * read with an accent: listed, and the page shows ink where each of its marks
      is drawn (an accent tesseract read into a speck-free band is no accent);
      a stroke or a ligature (``ł``, ``ø``, ``æ``, ``ß``), which no band shows, on
      the list alone.
    """
    if lexicon is None or language is None:
        return "no word list"
    if strip_accents(letters) != letters.casefold():
        if not lexicon.knows(letters, language):
            return "not listed"
        return None if _marks_inked(letters, marks, offset) else "its accent not seen inked"
    if lexicon.certain(letters, language):
        return None
    if not lexicon.knows(letters, language):
        return "not listed"
    if letters != word or not letters.isascii() or marks is None:
        return "an accented twin is listed"
    mask = lexicon.twin_mask(letters, language)
    if mask is None or mask & OTHER_MARK:
        return "a twin differs by a stroke or a ligature"
    if _proven_bare(mask, marks):
        return None
    if _marked_band(mask, marks, INK):
        return "an accented twin is listed, and the page has ink where it is accented"
    return "an accented twin is listed, where the page cannot show an accent (an i's dot)"


def _proven_bare(mask: int, marks: str) -> bool:
    """Every band where a twin carries a mark (``mask``,
    :func:`~pipeline.documents.ocr_lexicon.mark_mask`) is CLEAR in ``marks``."""
    if mask & OTHER_MARK:
        return False
    for position, code in enumerate(marks):
        if mask >> (2 * position) & 1 and mark_above(code) != CLEAR:
            return False
        if mask >> (2 * position + 1) & 1 and mark_below(code) != CLEAR:
            return False
    return True


def _marked_band(mask: int, marks: str, state: int) -> bool:
    """Some band where a twin carries a mark is in ``state`` in ``marks``."""
    for position, code in enumerate(marks):
        if mask >> (2 * position) & 1 and mark_above(code) == state:
            return True
        if mask >> (2 * position + 1) & 1 and mark_below(code) == state:
            return True
    return False


def _marks_inked(letters: str, marks: str | None, offset: int) -> bool:
    """Each mark of ``letters`` above or below its letter has INK in that band."""
    for index, ch in enumerate(letters):
        kinds = {unicodedata.combining(m) for m in unicodedata.normalize("NFD", ch)[1:]}
        if not kinds:
            continue  # bare, or a stroke or ligature (no band shows those)
        if marks is None:
            return False
        code = marks[offset + index]
        if kinds & _ABOVE and mark_above(code) != INK:
            return False
        if kinds & _BELOW and mark_below(code) != INK:
            return False
        if kinds - _ABOVE - _BELOW:
            return False
    return True


_ABOVE = frozenset({230, 232, 233, 234})
_BELOW = frozenset({202, 220})


def unverified(path: str, detail: str) -> Reason:
    return Reason(ReasonCode.OCR_UNVERIFIED, path, detail, rule=RULE)


def ocr_reasons(
    extraction: Extraction,
    text: str,
    confidences: OcrConfidences | None,
    master_data: TenantMasterData,
    *,
    read_by_ocr: bool,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    checked_min_confidence: float = DEFAULT_CHECKED_MIN_CONFIDENCE,
    lexicon: OcrLexicon | None = None,
    proofs: list[ValueProof] | None = None,
) -> tuple[Reason, ...]:
    """One ``ocr_unverified`` reason per value of ``extraction`` (grounded in ``text``)
    OCR read without enough certainty. ``lexicon``: the word lists descriptions are
    held against (:func:`default_lexicon` unless given). ``proofs``, where given,
    receives one :class:`~pipeline.validation.ValueProof` (rule :data:`BARE_RULE`) per
    description whose bare words only the page image vouched for."""
    if not read_by_ocr:
        return ()
    if confidences is None:
        return (
            unverified(
                "document",
                "read by OCR without the words' confidences: a reviewer compares the page",
            ),
        )
    reasons = []
    pages = text.split("\f")
    for path, evidence in _evidenced(extraction):
        if evidence.page not in confidences.pages:
            continue  # read from a text layer
        least = confidences.least(evidence)
        checked = path in _CHECKED or path.startswith("tax_lines[")
        floor = checked_min_confidence if checked else min_confidence
        row = _ITEM_ROW.fullmatch(path)
        if row is not None and evidence.match != "fuzzy" and least is not None:
            least, floor = _row_least(
                extraction,
                int(row.group(1)),
                pages,
                confidences,
                min_confidence=min_confidence,
                checked_min_confidence=checked_min_confidence,
            )
        if evidence.match == "fuzzy":
            reasons.append(
                unverified(path, "grounded by a fuzzy match: the answer's spelling is not printed")
            )
        elif least is None:
            reasons.append(unverified(path, "no OCR word under its evidence"))
        elif least < floor:
            reasons.append(
                unverified(path, f"OCR read a word of it with confidence {least:.1f} < {floor:.0f}")
            )
    items = [
        (i, item)
        for i, item in enumerate(extraction.line_items)
        if item.evidence.page in confidences.pages
    ]
    if items:
        lexicon = lexicon if lexicon is not None else default_lexicon()
        language = (
            lexicon.language_of(
                letters
                for w in confidences.words
                for letters in _LETTERS.findall(pages[w.page - 1][w.start : w.end])
                if w.page <= len(pages)
            )
            if lexicon is not None
            else None
        )
        for i, item in items:
            bare: list[str] = []
            doubtful = _uncertain_words(
                item.description, item.evidence, pages, confidences, lexicon, language, bare
            )
            if bare and proofs is not None:
                proofs.append(
                    ValueProof(
                        f"line_items[{i}].description",
                        BARE_RULE,
                        f"read bare, listed with an accented twin ({language}), no ink where"
                        f" the twin is marked: {', '.join(bare[:5])}",
                    )
                )
            if doubtful is None:
                reasons.append(unverified(f"line_items[{i}]", "description not found in its row"))
            elif doubtful:
                reasons.append(
                    unverified(
                        f"line_items[{i}].description",
                        f"OCR may have lost or added an accent ({language or 'no language'}):"
                        f" {'; '.join(doubtful[:3])}",
                    )
                )
    name = extraction.supplier.name
    if name is not None and name.evidence.page in confidences.pages:
        spelled = unicodedata.normalize("NFC", name.value)
        if all(unicodedata.normalize("NFC", r.name) != spelled for r in master_data.suppliers):
            reasons.append(
                unverified("supplier.name", "read by OCR and not spelled as any supplier on file")
            )
    return tuple(reasons)
