"""Synthetic invoices with exact ground truth, deterministic by seed.

Each :class:`GeneratedInvoice` holds OCR-like text (six layout families,
:data:`LAYOUTS`; ten European languages, :data:`LANGUAGES`, with label synonyms
drawn per invoice; EUR/USD/GBP/CHF/PLN/SEK/DKK; decimal comma or point;
thousands separators ``,`` ``.`` ``'``, no-break and narrow no-break space;
decoy numbers and legal footers; 1 to 200 line items over one or more
form-feed separated pages), the :class:`~pipeline.invoice.Extraction`
a perfect model would return (``truth``, every evidence span at its real offsets),
the tenant master data and the decision validation must reach.

Invariants the tests rely on:

* Same ``seed`` → same invoice, byte for byte (``random.Random`` only, no clock).
* A variant draws from its own random stream, so ``generate_invoice(s, v)``
  differs from ``generate_invoice(s)`` only by what the variant changes.
* ``truth`` is a faithful transcription of the text, so ``validate(truth)`` gives
  ``truth_decision``; ``candidate`` is what the variant feeds validation (the
  truth for document-level variants, a faulty model answer for the others) and
  gives ``expected_decision`` with at least ``expected_codes``.

The generator core is here: :func:`generate_invoice`, the faulty answers of
the model-level variants and the decisions each invoice must reach. The parts
live in :mod:`benchmarks.invoices.locales` (locale data and formatting),
:mod:`benchmarks.invoices.plan` (every seeded draw), :mod:`benchmarks.invoices.layout`
(pages, document-level variants as printed, evidence spans) and
:mod:`benchmarks.invoices.variants` (the variant catalogue, the reasons each must
produce, the injection texts). This module re-exports the names callers use
from there (:class:`Variant`, :data:`EXPECTED_CODES`, :data:`INJECTION_CORPUS`,
:data:`DEFAULT_INJECTION_URL`), so callers import from ``benchmarks.invoices.generator`` only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date

from benchmarks.invoices.blocks import Span
from benchmarks.invoices.layout import render
from benchmarks.invoices.lexicon import LANGUAGES
from benchmarks.invoices.locales import CURRENCIES
from benchmarks.invoices.plan import Plan, SupplierIdentity, adopt_supplier, draw_plan, make_iban
from benchmarks.invoices.style import LAYOUTS
from benchmarks.invoices.variants import (
    CENT_TARGETS,
    DEFAULT_INJECTION_URL,
    EXPECTED_CODES,
    INJECTION_CORPUS,
    TRUTH_NEEDS_REVIEW,
    Variant,
)
from pipeline.invoice import (
    Evidence,
    EvidencedIban,
    Extraction,
    ReasonCode,
    SupplierRecord,
    TenantMasterData,
    iban_checksum_ok,
    normalise_text,
)
from pipeline.validation import Decision

__all__ = [
    "DEFAULT_INJECTION_URL",
    "EXPECTED_CODES",
    "INJECTION_CORPUS",
    "LANGUAGES",
    "LAYOUTS",
    "GeneratedInvoice",
    "Variant",
    "generate_corpus",
    "generate_invoice",
]


@dataclass(frozen=True)
class GeneratedInvoice:
    seed: int
    variant: Variant
    language: str
    layout: str
    number_style: str
    currency: str
    ocr_text: str
    truth: Extraction
    candidate: Extraction
    supplier: SupplierRecord
    master_data: TenantMasterData
    today: date
    truth_decision: Decision
    expected_decision: Decision
    expected_codes: frozenset[ReasonCode]
    identity: SupplierIdentity  # the issuing supplier as planned (before any variant)
    injection: str | None = None


def _candidate(
    variant: Variant,
    truth: Extraction,
    text: str,
    plan: Plan,
    vrng: random.Random,
    injected: Span | None,
) -> Extraction:
    """The extraction a faulty model would return for the model-level variants."""
    assert truth.iban is not None and truth.gross_total is not None
    if variant is Variant.INVENTED_IBAN:
        invented = plan.iban
        while invented == plan.iban or invented in text.replace(" ", ""):
            invented = make_iban(vrng, plan.country)
        return truth.model_copy(update={"iban": truth.iban.model_copy(update={"value": invented})})
    if variant is Variant.INVALID_IBAN_CHECKSUM:
        i = vrng.randrange(4, len(plan.iban))
        while not plan.iban[i].isdigit():
            i = vrng.randrange(4, len(plan.iban))
        broken = (
            plan.iban[:i] + str((int(plan.iban[i]) + vrng.randint(1, 9)) % 10) + plan.iban[i + 1 :]
        )
        assert not iban_checksum_ok(broken)
        return truth.model_copy(update={"iban": truth.iban.model_copy(update={"value": broken})})
    if variant is Variant.FABRICATED_EVIDENCE:
        ev = truth.gross_total.evidence
        page = text.split("\f")[ev.page - 1]
        shift = 1
        while normalise_text(page[ev.start + shift : ev.end + shift]) == normalise_text(ev.quote):
            shift += 1
        moved = ev.model_copy(update={"start": ev.start + shift, "end": ev.end + shift})
        return truth.model_copy(
            update={"gross_total": truth.gross_total.model_copy(update={"evidence": moved})}
        )
    if variant is Variant.PROMPT_INJECTION and injected is not None:
        page_no, start, end = injected
        quote = text.split("\f")[page_no - 1][start:end]
        obeyed = EvidencedIban(
            value=quote.replace(" ", ""),
            evidence=Evidence(page=page_no, start=start, end=end, quote=quote),
        )
        return truth.model_copy(update={"iban": obeyed})
    return truth


def generate_invoice(
    seed: int,
    variant: Variant = Variant.CLEAN,
    *,
    line_items: int | None = None,
    max_line_items: int = 200,
    injection_url: str = DEFAULT_INJECTION_URL,
    injection_index: int | None = None,
    anchor: date | None = None,
    languages: tuple[str, ...] | None = None,
    layouts: tuple[str, ...] | None = None,
    supplier: SupplierIdentity | None = None,
) -> GeneratedInvoice:
    """Generate one invoice, deterministic in all arguments.

    Args:
        seed: selects country, language, layout, number style, items, dates, ...
        variant: the adversarial change to apply (drawn from its own random stream).
        line_items: exact number of line items (1..200); by default drawn so most
            invoices are short and some span several pages.
        max_line_items: cap on the drawn number (keeps CPU evaluations short).
        injection_url: the URL the prompt-injection text asks a model to fetch.
        injection_index: which :data:`INJECTION_CORPUS` entry to use (default: by seed).
        anchor: date the invoice shortly before this day (``today`` is at most
            ``anchor``); by default dates are drawn from 2023-2025 by seed.
        languages: draw only among these language codes (default :data:`LANGUAGES`).
        layouts: draw only among these layout families (default :data:`LAYOUTS`).
        supplier: issue the invoice as this supplier instead of the drawn one (of
            the drawn country; every other draw stays as the seed makes it).

    Raises:
        ValueError: ``languages`` or ``layouts`` is empty or names an unknown one,
            or ``supplier`` is of another country than the seed draws.
    """
    plan = draw_plan(seed, line_items, max_line_items, anchor, languages=languages, layouts=layouts)
    if supplier is not None:
        plan = adopt_supplier(plan, supplier)
    vrng = random.Random(f"{seed}:{variant.value}")
    injection = None
    if variant is Variant.PROMPT_INJECTION:
        index = injection_index if injection_index is not None else seed % len(INJECTION_CORPUS)
        injection = INJECTION_CORPUS[index].replace("{url}", injection_url)
    text, truth, injected, cent_target = render(plan, variant, vrng, injection)
    candidate = _candidate(variant, truth, text, plan, vrng, injected)
    record = SupplierRecord(plan.supplier_name, plan.vat_master, frozenset({plan.iban}))
    if cent_target is not None:  # the reason follows where the cent went
        codes = frozenset({CENT_TARGETS[cent_target]})
    else:
        codes = EXPECTED_CODES[variant]
    return GeneratedInvoice(
        seed=seed,
        variant=variant,
        language=plan.language,
        layout=plan.layout,
        number_style=plan.numbers.style + ("" if plan.numbers.grouped else "-ungrouped"),
        currency=plan.currency,
        ocr_text=text,
        truth=truth,
        candidate=candidate,
        supplier=record,
        master_data=TenantMasterData(
            suppliers=(record, *plan.others),
            permitted_currencies=frozenset(CURRENCIES),
        ),
        today=plan.today,
        truth_decision=Decision.REVIEW_REQUIRED
        if variant in TRUTH_NEEDS_REVIEW
        else Decision.SUCCEEDED,
        expected_decision=Decision.SUCCEEDED
        if variant is Variant.CLEAN
        else Decision.REVIEW_REQUIRED,
        expected_codes=codes,
        identity=SupplierIdentity.of(plan),
        injection=injection,
    )


def generate_corpus(
    n: int,
    *,
    seed: int = 0,
    variants: tuple[Variant, ...] = (Variant.CLEAN,),
    max_line_items: int = 200,
    anchor: date | None = None,
    languages: tuple[str, ...] | None = None,
    layouts: tuple[str, ...] | None = None,
) -> list[GeneratedInvoice]:
    """``n`` invoices with seeds ``seed .. seed+n-1``, cycling through ``variants``
    (``languages``/``layouts`` as in :func:`generate_invoice`)."""
    return [
        generate_invoice(
            seed + i,
            variants[i % len(variants)],
            max_line_items=max_line_items,
            anchor=anchor,
            languages=languages,
            layouts=layouts,
        )
        for i in range(n)
    ]
