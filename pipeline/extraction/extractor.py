"""One extraction, end to end and engine-free: the call to make, and what its answer means.

Every caller that extracts an invoice (the worker, ``fenceline eval``, the
baselines, the demo, adapter training) goes through these functions, so they
cannot drift apart:

* :func:`prepare_call` turns the OCR text into an :class:`ExtractionCall`: the
  chat messages, the per-document JSON schema the engine constrains decoding
  with, and ``max_tokens`` derived from the document;
* :func:`read_answer` turns the engine's raw answer into a
  :class:`~pipeline.extraction.grounding.Grounding`: the grounded
  :class:`~pipeline.invoice.Extraction` (evidence derived by the system, never by
  the model), the values grounding refused (reasons) and the values it changed
  (validating it is the worker's step, :func:`pipeline.worker.interpret`, which
  composes extraction and validation);
* :func:`answer_for` is the answer a perfect model gives (adapter training
  target, and the ``perfect`` engine that measures validation alone).

Two contracts (:data:`CONTRACTS`): ``fenceline.extraction/2`` (the default:
printed values and cited lines, grounded by :mod:`pipeline.extraction.grounding`)
and ``fenceline.extraction/1`` (the model gives values, offsets and quotes;
kept so stored v1 results stay readable and v1 can be measured side by side).
Both store the same :class:`~pipeline.invoice.Extraction` shape, so every
reader of a result (review, delivery, explain) works for either; the report's
``schema_version`` records which contract produced it.

:func:`read_answer` raises :class:`~pipeline.errors.MalformedOutput` for an answer
that is not the contract (retryable: another attempt may conform).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.cpu_budget import cpu_budget
from pipeline.extraction import answer as v2
from pipeline.extraction import prompts as v1
from pipeline.extraction.bounds import DEFAULT_LIMITS, DocumentLimits, check_document
from pipeline.extraction.grounding import Grounding, ground_in
from pipeline.extraction.layout import layout_of
from pipeline.extraction.table import table_rows
from pipeline.invoice import EXTRACTION_SCHEMA_VERSION, Extraction, extraction_json_schema
from pipeline.invoice import parse_extraction as parse_v1

CONTRACT_V1 = EXTRACTION_SCHEMA_VERSION
CONTRACT_V2 = v2.CONTRACT_VERSION
CONTRACTS = (CONTRACT_V2, CONTRACT_V1)
DEFAULT_CONTRACT = CONTRACT_V2


@dataclass(frozen=True)
class ExtractionCall:
    """What to send to an engine for one document."""

    messages: list[dict[str, str]]
    json_schema: dict[str, Any]
    max_tokens: int
    contract: str
    prompt_version: str

    def budget(self, cap: int | None = None) -> v1.PromptBudget:
        """What admission reserves: the prompt estimate and ``max_tokens`` (capped)."""
        output = self.max_tokens if cap is None else min(cap, self.max_tokens)
        return v1.PromptBudget(v1.count_prompt_tokens(self.messages), output)


def _check(contract: str) -> str:
    if contract not in CONTRACTS:
        raise ValueError(f"unknown extraction contract {contract!r}; one of {', '.join(CONTRACTS)}")
    return contract


def prompt_version(contract: str = DEFAULT_CONTRACT) -> str:
    """The version of the prompt :func:`prepare_call` builds for ``contract``: what a
    model (or adapter) trained on these prompts saw."""
    return v1.PROMPT_VERSION if _check(contract) == CONTRACT_V1 else v2.PROMPT_VERSION


def prepare_call(
    ocr_text: str,
    *,
    contract: str = DEFAULT_CONTRACT,
    include_schema: bool = False,
    limits: DocumentLimits | None = DEFAULT_LIMITS,
) -> ExtractionCall:
    """The messages, schema and output bound for extracting ``ocr_text``.

    Args:
        ocr_text: the document, pages separated by form feed.
        contract: one of :data:`CONTRACTS`.
        include_schema: v1 only: also print the schema in the prompt (engines
            without guided decoding).
        limits: what the document may be and the CPU this may spend
            (:mod:`pipeline.extraction.bounds`); None: unbounded (measurements only).

    Raises:
        DocumentOverLimit: the document is over one of ``limits``.
        ExtractionBudgetExceeded: building the call spent ``limits.cpu_seconds``.
    """
    check_document(ocr_text, limits)
    with cpu_budget(limits.cpu_seconds if limits else None, "preparing the call"):
        return _prepare(ocr_text, contract, include_schema)


def _prepare(ocr_text: str, contract: str, include_schema: bool) -> ExtractionCall:
    if _check(contract) == CONTRACT_V1:
        return ExtractionCall(
            messages=v1.build_messages(ocr_text, include_schema=include_schema),
            json_schema=extraction_json_schema(),
            max_tokens=v1.estimate_output_tokens(ocr_text),
            contract=CONTRACT_V1,
            prompt_version=v1.PROMPT_VERSION,
        )
    doc = layout_of(ocr_text)  # the one layout the prompt, grammar and bound share
    return ExtractionCall(
        messages=v2.messages_for(doc),
        json_schema=v2.schema_for(doc),
        max_tokens=v2.max_tokens_for(doc),
        contract=CONTRACT_V2,
        prompt_version=v2.PROMPT_VERSION,
    )


def read_answer(
    answer: str,
    ocr_text: str,
    *,
    contract: str = DEFAULT_CONTRACT,
    limits: DocumentLimits | None = DEFAULT_LIMITS,
) -> Grounding:
    """Parse and ground one raw answer: what the document shows for it, evidenced by code.

    Under contract v1 the model's own evidence is kept (validation checks it) and
    there are no refusals or changes. ``limits`` as for :func:`prepare_call`.

    Raises:
        MalformedOutput: the answer is not the contract.
        DocumentOverLimit: the document is over one of ``limits``.
        ExtractionBudgetExceeded: reading the answer spent ``limits.cpu_seconds``.
    """
    check_document(ocr_text, limits)
    with cpu_budget(limits.cpu_seconds if limits else None, "reading the answer"):
        if _check(contract) == CONTRACT_V1:
            return Grounding(parse_v1(answer))
        return ground_in(v2.parse_answer(answer), layout_of(ocr_text))


def _iban(truth: Extraction) -> str | None:
    """The IBAN as printed, or the value itself where it is not what its evidence shows
    (a faulty answer under test: an invented IBAN is not printed anywhere)."""
    if truth.iban is None:
        return None
    quote = truth.iban.evidence.quote
    return quote if "".join(quote.split()).upper() == truth.iban.value else truth.iban.value


def answer_for(truth: Extraction, ocr_text: str, *, contract: str = DEFAULT_CONTRACT) -> str:
    """The answer a perfect model gives for ``ocr_text`` whose faithful transcription
    is ``truth`` (evidence at the real offsets): the adapter's training target."""
    if _check(contract) == CONTRACT_V1:
        return truth.model_dump_json()
    doc = layout_of(ocr_text)

    def printed(ev: Any) -> str | None:
        """What the evidence span shows (a fabricated span under test shows other text)."""
        if ev is None:
            return None
        page = doc.pages[ev.evidence.page - 1] if ev.evidence.page <= len(doc.pages) else ""
        shown = page[ev.evidence.start : ev.evidence.end].strip()
        return shown or str(ev.evidence.quote)

    def line_of(ev: Any) -> int:
        return doc.line_at(ev.page, ev.start).number

    answer = v2.Answer(
        supplier=printed(truth.supplier.name),
        vat_id=printed(truth.supplier.vat_id),
        number=printed(truth.invoice_number),
        issue_date=printed(truth.issue_date),
        due_date=printed(truth.due_date),
        currency=printed(truth.currency),
        iban=_iban(truth),
        net=printed(truth.net_total),
        tax=printed(truth.tax_total),
        gross=printed(truth.gross_total),
        items=v2.asked_items(
            tuple(
                v2.ItemRef(line=line_of(item.evidence), description=item.description)
                for item in truth.line_items
            ),
            table_rows(doc),
        ),
        taxes=None
        if v2.known_tax_lines(doc) is not None
        else tuple(line_of(tax.evidence) for tax in truth.tax_lines),
    )
    return v2.dump_answer(answer)
