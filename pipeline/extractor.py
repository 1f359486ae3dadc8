"""One extraction, end to end and engine-free: the call to make, and what its answer means.

Every caller that extracts an invoice (the worker, ``fenceline eval``, the
baselines, the demo, adapter training) goes through these two functions, so
they cannot drift apart:

* :func:`prepare_call` turns the OCR text into an :class:`ExtractionCall`: the
  chat messages, the per-document JSON schema the engine constrains decoding
  with, and ``max_tokens`` derived from the document;
* :func:`interpret` turns the engine's raw answer into an :class:`Interpretation`:
  the grounded :class:`~pipeline.extraction.Extraction` (evidence derived by the
  system, never by the model), the validation report and the result the job
  stores.

:func:`interpret` raises :class:`~pipeline.errors.MalformedOutput` for an answer
that is not the contract (retryable: another attempt may conform).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from pipeline.extraction import (
    EXTRACTION_SCHEMA_VERSION,
    Extraction,
    extraction_json_schema,
    parse_extraction,
)
from pipeline.prompts import PROMPT_VERSION, build_messages, estimate_output_tokens
from pipeline.validation import (
    DEFAULT_POLICY,
    TenantMasterData,
    ValidationPolicy,
    ValidationReport,
    validate,
)


@dataclass(frozen=True)
class ExtractionCall:
    """What to send to an engine for one document."""

    messages: list[dict[str, str]]
    json_schema: dict[str, Any]
    max_tokens: int
    contract: str
    prompt_version: str


@dataclass(frozen=True)
class Interpretation:
    """A parsed, grounded and validated answer."""

    extraction: Extraction
    report: ValidationReport
    contract: str

    def result(self) -> dict[str, Any]:
        """The JSON the job stores as its result."""
        return self.extraction.model_dump(mode="json")


def prepare_call(ocr_text: str, *, include_schema: bool = False) -> ExtractionCall:
    """The messages, schema and output bound for extracting ``ocr_text``."""
    return ExtractionCall(
        messages=build_messages(ocr_text, include_schema=include_schema),
        json_schema=extraction_json_schema(),
        max_tokens=estimate_output_tokens(ocr_text),
        contract=EXTRACTION_SCHEMA_VERSION,
        prompt_version=PROMPT_VERSION,
    )


def interpret(
    answer: str,
    ocr_text: str,
    master_data: TenantMasterData,
    *,
    today: date,
    policy: ValidationPolicy = DEFAULT_POLICY,
) -> Interpretation:
    """Parse, ground and validate one raw answer.

    Raises:
        MalformedOutput: the answer is not the contract.
    """
    extraction = parse_extraction(answer)
    report = validate(extraction, ocr_text, master_data, today=today, policy=policy)
    return Interpretation(extraction, report, EXTRACTION_SCHEMA_VERSION)


def answer_for(truth: Extraction, ocr_text: str) -> str:
    """The answer a perfect model gives for ``ocr_text`` whose faithful transcription is
    ``truth`` (the training target of the adapter and the ``perfect`` eval engine)."""
    del ocr_text  # contract v1 carries its evidence in the transcription itself
    return truth.model_dump_json()
