"""Values OCR read are accepted only where every word under them was read with certainty."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.oracle import oracle_answer
from benchmarks.eval.scoring import extraction_values, truth_values
from benchmarks.generate import write_files
from benchmarks.invoices import generate_corpus
from benchmarks.invoices.generator import generate_invoice
from pipeline.documents import OcrLexicon, strip_accents
from pipeline.extraction import answer_for, prepare_call
from pipeline.invoice import SCHEMA_V1, ReasonCode, SupplierRecord
from pipeline.validation import Decision
from pipeline.worker import Interpretation, OcrConfidences, interpret, ocr_proof
from pipeline.worker.ocr_proof import (
    DEFAULT_CHECKED_MIN_CONFIDENCE,
    DEFAULT_MIN_CONFIDENCE,
    WordConfidence,
)

#: The word lists tesseract reads with (the end-to-end test uses the real ones).
ocr_proof_default_lexicon = ocr_proof.default_lexicon

INV = generate_invoice(9, languages=("en",), max_line_items=3)
ANSWER = answer_for(INV.candidate, INV.ocr_text)


#: An English word list that knows the invoice's words; "bracket" also with an accent.
LEXICON = OcrLexicon(
    {
        "eng": [*re.findall(r"[^\W\d_]+", INV.ocr_text), "brackét"],
        "fra": ["équerre"],
    }
)


@pytest.fixture(autouse=True)
def _lexicon(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(ocr_proof, "default_lexicon", lambda: OcrLexicon({"eng": LEXICON_WORDS}))
    yield


LEXICON_WORDS = re.findall(r"[^\W\d_]+", INV.ocr_text)


def confidences(text: str, score: float = 96.0, low: str | None = None) -> OcrConfidences:
    """Every word of every page read with ``score``; the word ``low`` with 40."""
    words = []
    for number, page in enumerate(text.split("\f"), 1):
        for m in re.finditer(r"\S+", page):
            words.append(
                WordConfidence(number, m.start(), m.end(), 40.0 if m.group() == low else score)
            )
    return OcrConfidences(frozenset(range(1, text.count("\f") + 2)), tuple(words))


def scanned(ocr: OcrConfidences | None, master=INV.master_data) -> Interpretation:  # type: ignore[no-untyped-def]
    return interpret(ANSWER, INV.ocr_text, master, today=INV.today, read_by_ocr=True, ocr=ocr)


def ocr_fields(result: Interpretation) -> list[str]:
    return [r.field for r in result.report.reasons if r.code is ReasonCode.OCR_UNVERIFIED]


def test_values_read_with_certainty_everywhere_are_accepted() -> None:
    result = scanned(confidences(INV.ocr_text))
    assert result.report.decision is Decision.SUCCEEDED, result.report.reasons
    assert ocr_fields(result) == []


def test_a_low_confidence_word_sends_its_value_to_review_by_name() -> None:
    assert "INV-2024-52714" in INV.ocr_text
    result = scanned(confidences(INV.ocr_text, low="INV-2024-52714"))
    assert result.report.decision is Decision.REVIEW_REQUIRED
    assert ocr_fields(result) == ["invoice_number"]
    (reason,) = result.report.reasons
    assert reason.rule == "documents.ocr_unverified" and "40" in reason.detail


def test_a_low_confidence_word_in_a_row_sends_the_line_item_to_review() -> None:
    result = scanned(confidences(INV.ocr_text, low="bracket"))
    assert ocr_fields(result) == ["line_items[0]"]


def test_the_threshold_is_inclusive_and_just_below_it_is_not_enough() -> None:
    assert ocr_fields(scanned(confidences(INV.ocr_text, score=DEFAULT_MIN_CONFIDENCE))) == []
    below = ocr_fields(scanned(confidences(INV.ocr_text, score=DEFAULT_MIN_CONFIDENCE - 0.5)))
    assert "invoice_number" in below and "line_items[0]" in below and "issue_date" in below
    assert "gross_total" not in below and "supplier.name" not in below  # checked otherwise


def test_values_another_check_catches_have_a_lower_floor_but_one() -> None:
    floor = DEFAULT_CHECKED_MIN_CONFIDENCE
    assert floor < DEFAULT_MIN_CONFIDENCE
    below = ocr_fields(scanned(confidences(INV.ocr_text, score=floor - 0.5)))
    for path in ("supplier.name", "supplier.vat_id", "iban", "net_total", "tax_total"):
        assert path in below
    assert "gross_total" in below and "tax_lines[0]" in below


def test_without_confidences_the_whole_document_goes_to_review() -> None:
    assert ocr_fields(scanned(None)) == ["document"]


def test_a_text_layer_page_needs_no_proof() -> None:
    none_ocr = OcrConfidences(frozenset({2}), ())
    assert scanned(none_ocr).report.decision is Decision.SUCCEEDED


def test_an_accent_the_ocr_dropped_is_never_accepted_in_the_ocr_spelling() -> None:
    """The page printed "Brabant Cönstruct BV" (on file), OCR read "Construct" with full
    confidence: the OCR spelling must not be delivered."""
    on_file = dataclasses.replace(INV.master_data.suppliers[0], name="Brabant Cönstruct BV")
    master = dataclasses.replace(
        INV.master_data, suppliers=(on_file, *INV.master_data.suppliers[1:])
    )
    result = scanned(confidences(INV.ocr_text), master)
    assert result.report.decision is Decision.REVIEW_REQUIRED
    assert "supplier.name" in [r.field for r in result.report.reasons]


def test_a_name_on_file_only_when_case_is_folded_is_not_proven_by_ocr() -> None:
    """Validation's match folds case; a name OCR read must be spelled as on file."""
    on_file = SupplierRecord(
        "BRABANT Construct BV", "BE0622301289", frozenset({"BE60418006867539"})
    )
    master = dataclasses.replace(
        INV.master_data, suppliers=(on_file, *INV.master_data.suppliers[1:])
    )
    assert interpret(ANSWER, INV.ocr_text, master, today=INV.today).report.decision is (
        Decision.SUCCEEDED
    )
    assert ocr_fields(scanned(confidences(INV.ocr_text), master)) == ["supplier.name"]


def test_a_description_word_the_list_spells_with_an_accent_is_not_proven(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ "Equerre" for a printed "Équerre": tesseract is sure of itself, the list is not."""
    monkeypatch.setattr(ocr_proof, "default_lexicon", lambda: LEXICON)
    result = scanned(confidences(INV.ocr_text))
    assert ocr_fields(result) == ["line_items[0].description"]
    assert "bracket" in result.report.reasons[0].detail


def _marked(text: str, word: str, marks: str) -> OcrConfidences:
    """Every word read at 96; ``word`` with the page's ``marks`` (the others none)."""
    plain = confidences(text)
    page = text.split("\f")
    return dataclasses.replace(
        plain,
        words=tuple(
            dataclasses.replace(w, marks=marks) if page[w.page - 1][w.start : w.end] == word else w
            for w in plain.words
        ),
    )


def test_a_twinned_word_the_page_shows_bare_is_proven_and_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ "bracket" has the listed twin "brackét": no ink above its e (the twin's mark)
    proves the bare reading; the proof is kept in the report for ``explain``."""
    monkeypatch.setattr(ocr_proof, "default_lexicon", lambda: LEXICON)
    result = scanned(_marked(INV.ocr_text, "bracket", "4444444"))  # every band clear
    assert ocr_fields(result) == []
    assert result.report.decision is Decision.SUCCEEDED
    (proof,) = result.report.proofs
    assert (proof.field, proof.rule) == ("line_items[0].description", "documents.ocr_bare_proven")
    assert "bracket" in proof.detail
    assert result.report.as_dict()["proofs"][0]["rule"] == "documents.ocr_bare_proven"
    # ink above the e (code 7: above ink, below clear) where the twin has its accent
    inked = scanned(_marked(INV.ocr_text, "bracket", "4444474"))
    assert ocr_fields(inked) == ["line_items[0].description"]
    assert inked.report.proofs == ()
    # ink above the k, where no twin is accented, proves nothing against it
    assert ocr_fields(scanned(_marked(INV.ocr_text, "bracket", "4444744"))) == []


def test_a_description_word_no_list_holds_is_not_proven(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [w for w in LEXICON_WORDS if w != "hosting"]
    monkeypatch.setattr(ocr_proof, "default_lexicon", lambda: OcrLexicon({"eng": words}))
    assert ocr_fields(scanned(confidences(INV.ocr_text))) == ["line_items[2].description"]


def test_without_word_lists_no_description_is_proven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr_proof, "default_lexicon", lambda: None)
    assert ocr_fields(scanned(confidences(INV.ocr_text))) == [
        "line_items[0].description",
        "line_items[1].description",
        "line_items[2].description",
    ]


def test_accents_are_stripped_for_the_twin_lookup() -> None:
    assert [strip_accents(w) for w in ("Équerre", "jährlich", "Łódź", "œuvre")] == [
        "equerre",
        "jahrlich",
        "lodz",
        "oeuvre",
    ]
    lexicon = OcrLexicon({"fra": ["cafe", "café", "noir"], "deu": ["jährlich"]})
    assert lexicon.language_of(["Café", "noir"]) == "fra"
    assert not lexicon.certain("Cafe", "fra") and lexicon.certain("noir", "fra")
    assert not lexicon.certain("jahrlich", "deu") and not lexicon.certain("noir", "deu")


def test_a_value_grounded_only_by_a_fuzzy_match_is_not_proven() -> None:
    """A homoglyph supplier drawn as a scan: the page shows the name on file, which OCR
    reads; the answer's spelling (Cyrillic В) is not printed and grounds only fuzzily."""
    answer = ANSWER.replace("Brabant Construct BV", "\u0412rabant Construct BV", 1)
    assert answer != ANSWER
    result = interpret(
        answer,
        INV.ocr_text,
        INV.master_data,
        today=INV.today,
        read_by_ocr=True,
        ocr=confidences(INV.ocr_text),
    )
    assert result.extraction.supplier.name is not None
    assert result.extraction.supplier.name.evidence.match == "fuzzy"
    assert result.report.decision is Decision.REVIEW_REQUIRED
    assert ocr_fields(result) == ["supplier.name"]


def test_confidences_are_read_from_the_kept_words() -> None:
    """The one store of OCR confidences is the words kept beside the text (migration
    025): an OCR'd page's words carry one, a text layer's page none (no proof needed)."""
    words = {
        "version": 1,
        "pages": [
            {"number": 1, "words": [[0, 5, 0.1, 0.1, 0.2, 0.12, None]]},
            {
                "number": 2,
                "words": [[0, 7, 0.1, 0.1, 0.3, 0.12, 91.5], [8, 9, 0.4, 0.1, 0.5, 0.12, 40]],
            },
        ],
    }
    assert OcrConfidences.from_words(words) == OcrConfidences(
        frozenset({2}), (WordConfidence(2, 0, 7, 91.5), WordConfidence(2, 8, 9, 40.0))
    )
    assert OcrConfidences.from_words(None) is None  # kept before migration 025
    assert OcrConfidences.from_words({**words, "version": 4}) is None  # a later format
    # version 2 keeps each OCR word's marks (pipeline.documents.ocr_marks) after it
    marked = {
        "version": 2,
        "pages": [{"number": 1, "words": [[0, 2, 0.1, 0.1, 0.2, 0.12, 96.0, "14"]]}],
    }
    assert OcrConfidences.from_words(marked) == OcrConfidences(
        frozenset({1}), (WordConfidence(1, 0, 2, 96.0, "14"),)
    )


@pytest.mark.ocr
def test_a_generated_scan_read_with_certainty_is_accepted_with_every_value_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end as ``fenceline eval --engine oracle`` runs it: seed 5016 (Danish,
    240 dpi) is read by tesseract sure of every value; with perfect answers it is
    accepted and every value is the truth. Without the proof it went to review."""
    monkeypatch.setattr(ocr_proof, "default_lexicon", ocr_proof_default_lexicon)
    (invoice,) = generate_corpus(1, seed=5016)
    dataset = load_dataset(write_files([invoice], tmp_path, "scan"))
    (case,) = dataset.cases
    assert case.ocr is not None and case.tags["ocr_pages"] == 1
    record = case.record
    call = prepare_call(record.text)
    answer = oracle_answer(record.truth, record.text, call.json_schema)
    result = interpret(
        answer,
        record.text,
        record.tenant_master_data(),
        today=record.validation_date(),
        read_by_ocr=True,
        ocr=case.ocr,
    )
    assert result.report.decision is Decision.SUCCEEDED, result.report.reasons
    assert extraction_values(result.extraction) == truth_values(
        record.truth, schema_version=SCHEMA_V1
    )
    blanket = interpret(
        answer,
        record.text,
        record.tenant_master_data(),
        today=record.validation_date(),
        read_by_ocr=True,
    )
    assert blanket.report.decision is Decision.REVIEW_REQUIRED


def test_the_word_lists_are_loaded_only_for_a_description_ocr_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading them takes ~30 s a process: a text no OCR read, or a value on a text
    layer's page, never asks for them."""
    calls: list[int] = []

    def counted() -> OcrLexicon:
        calls.append(1)
        return OcrLexicon({"eng": LEXICON_WORDS})

    monkeypatch.setattr(ocr_proof, "default_lexicon", counted)
    interpret(ANSWER, INV.ocr_text, INV.master_data, today=INV.today)
    scanned(OcrConfidences(frozenset({2}), ()))  # page 1 is a text layer's
    assert calls == []
    scanned(confidences(INV.ocr_text))
    assert calls == [1]


ROW = "Steel bracket 40 mm | 1.248 pcs | 2,92 EUR | 3.644,16 EUR | 21%"
DESCRIPTION = "Steel bracket 40 mm"


def row_confidences(described: float, numbers: float) -> OcrConfidences:
    """Every word read with 96 but those of the first item's row: its description's
    with ``described``, its other words (quantity, unit, price, amount, rate) with
    ``numbers``."""
    row_at = INV.ocr_text.index(ROW)
    words = []
    for m in re.finditer(r"\S+", INV.ocr_text):
        score = 96.0
        if row_at <= m.start() < row_at + len(ROW):
            score = described if m.start() < row_at + len(DESCRIPTION) else numbers
        words.append(WordConfidence(1, m.start(), m.end(), score))
    return OcrConfidences(frozenset({1}), tuple(words))


def test_a_row_whose_numbers_the_invoice_proves_exactly_holds_them_to_the_lower_floor() -> None:
    """1.248 x 2,92 = 3.644,16 without rounding, the amounts sum to the net total and the
    21 % tax line's base: a misread quantity, price, amount or rate breaks an equality,
    so those words need only the totals' floor; the description still needs 90."""
    between = (DEFAULT_CHECKED_MIN_CONFIDENCE + DEFAULT_MIN_CONFIDENCE) / 2
    result = scanned(row_confidences(described=96.0, numbers=between))
    assert result.report.decision is Decision.SUCCEEDED, result.report.reasons
    below = scanned(row_confidences(described=96.0, numbers=DEFAULT_CHECKED_MIN_CONFIDENCE - 1))
    assert ocr_fields(below) == ["line_items[0]"]
    described = scanned(row_confidences(described=between, numbers=96.0))
    assert ocr_fields(described) == ["line_items[0]"]


def test_a_row_whose_numbers_are_not_proven_exactly_keeps_the_higher_floor() -> None:
    """Where the product needs rounding, or the net total or the rate's base is not the
    exact sum, a misread number could pass: every word of the row needs 90."""
    between = (DEFAULT_CHECKED_MIN_CONFIDENCE + DEFAULT_MIN_CONFIDENCE) / 2
    ocr = row_confidences(described=96.0, numbers=between)
    extraction = scanned(ocr).extraction
    item = extraction.line_items[0]
    rounded = item.model_copy(update={"unit_price": Decimal("2.9200001")})
    net = extraction.net_total
    assert net is not None
    for changed in (
        extraction.model_copy(update={"line_items": (rounded, *extraction.line_items[1:])}),
        extraction.model_copy(
            update={"net_total": net.model_copy(update={"value": net.value + Decimal("0.01")})}
        ),
        extraction.model_copy(update={"tax_lines": ()}),
    ):
        reasons = ocr_proof.ocr_reasons(
            changed,
            INV.ocr_text,
            ocr,
            INV.master_data,
            read_by_ocr=True,
            lexicon=OcrLexicon({"eng": LEXICON_WORDS}),
        )
        assert [r.field for r in reasons] == ["line_items[0]"], reasons
    assert (
        ocr_proof.ocr_reasons(
            extraction,
            INV.ocr_text,
            ocr,
            INV.master_data,
            read_by_ocr=True,
            lexicon=OcrLexicon({"eng": LEXICON_WORDS}),
        )
        == ()
    )
