"""The evaluation dataset: one invoice per JSON line, with its true values.

The format is documented in ``docs/eval-dataset.md``. :class:`EvalRecord` models
one line (its truth and master data: :mod:`benchmarks.eval.truth`); :func:`load_dataset`
reads a file line by line and never raises for a bad line (it is reported with its
number and skipped). :mod:`benchmarks.eval.generated` writes generated invoices as the
same records, so generated and supplied invoices are scored by one code path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from benchmarks.eval.truth import DateStr, Family, MasterData, Text, Truth
from pipeline.documents import read_document, sniff_media_type
from pipeline.errors import FencelineError
from pipeline.invoice import SupplierRecord, TenantMasterData
from pipeline.settings import Settings
from pipeline.worker import OcrConfidences


class EvalRecord(BaseModel):
    """One dataset line. Unknown top-level keys are ignored (and listed by the loader)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Text
    #: The document's text; or, instead, ``document``: a file read as the worker reads it.
    ocr_text: Text | None = None
    #: A PDF, scan, photo or text file, its path relative to the dataset file: read by
    #: the document stage's reader (a PDF's text layer on a grid, OCR for what has none).
    document: Text | None = None
    truth: Truth
    master_data: MasterData | None = None
    expected_decision: Literal["SUCCEEDED", "REVIEW_REQUIRED"] | None = None
    #: The validation date for date plausibility; default: the truth's issue date.
    today: DateStr | None = None
    #: Layout family or a fuzzer's transformations joined by "+"; the report groups by it.
    family: Family | None = None
    #: Free text for the dataset's author (where the invoice came from, what it tests).
    notes: Text | None = None

    @model_validator(mode="after")
    def _text_or_document(self) -> EvalRecord:
        if self.ocr_text is None and self.document is None:
            raise ValueError("missing required key 'ocr_text' (or a 'document' file)")
        if self.ocr_text is not None and self.document is not None:
            raise ValueError("give 'ocr_text' or 'document', not both")
        return self

    @property
    def text(self) -> str:
        """The text the invoice is read from (``ocr_text``, or the file's once read)."""
        if self.ocr_text is None:
            raise ValueError(f"{self.id}: its document has not been read")
        return self.ocr_text

    def validation_date(self) -> date:
        return self.today if self.today is not None else self.truth.issue_date

    def tenant_master_data(self) -> TenantMasterData:
        """The master data validation runs against (built from the truth when absent).

        A supplier without a VAT id is on file with an empty one: validation still
        requires a VAT id on the invoice (``missing_field``) and refuses any other
        (``vat_id_mismatch``), so such an invoice goes to review, never through. (The
        tenant master data a deployment stores refuses a supplier without a VAT id.)
        A truth without a currency permits none: any currency read is not printed.
        """
        if self.master_data is None:
            t = self.truth
            ibans = frozenset({t.iban}) if t.iban else frozenset()
            return TenantMasterData(
                suppliers=(SupplierRecord(t.supplier.name, t.supplier.vat_id or "", ibans),),
                permitted_currencies=frozenset({t.currency}) if t.currency else frozenset(),
            )
        return TenantMasterData(
            suppliers=tuple(
                SupplierRecord(s.name, s.vat_id or "", frozenset(s.ibans))
                for s in self.master_data.suppliers
            ),
            permitted_currencies=frozenset(self.master_data.currencies),
        )

    def to_json(self) -> dict[str, Any]:
        """The line as written to a dataset file (absent options and unstated contract
        v3 values left out)."""
        data: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        data["truth"] = self.truth.as_json()  # keep due_date/iban nulls
        return data


EVAL_RECORD_KEYS = frozenset(EvalRecord.model_fields)


@dataclass(frozen=True)
class Case:
    """One invoice to evaluate: its record, where it came from, and extra row columns."""

    record: EvalRecord
    line: int | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    #: The confidence of each word OCR read (a document OCR read), None otherwise.
    ocr: OcrConfidences | None = None


@dataclass
class Dataset:
    """What :func:`load_dataset` read: the evaluable cases and what it refused or ignored."""

    cases: list[Case] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)


def _where(loc: Sequence[int | str]) -> str:
    return ".".join(str(p) for p in loc) or "<line>"


def describe_errors(exc: ValidationError) -> str:
    """One readable message for every problem pydantic found on a line."""
    parts: list[str] = []
    for err in exc.errors():
        where = _where(err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing required key {where!r}")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
            parts.append(f"{where}: {msg}" if err["loc"] else msg)  # the line as a whole
    shown = parts[:4]
    more = f" (and {len(parts) - 4} more)" if len(parts) > 4 else ""
    return "; ".join(shown) + more


def parse_line(text: str) -> tuple[EvalRecord, list[str]]:
    """Parse one dataset line; returns the record and its ignored top-level keys.

    Raises:
        ValueError: with a one-line message saying what is wrong.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"must be a JSON object, got {type(data).__name__}")
    try:
        record = EvalRecord.model_validate(data)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc)) from exc
    return record, sorted(k for k in data if k not in EVAL_RECORD_KEYS)


def load_dataset(path: Path) -> Dataset:
    """Read a dataset file; bad lines are skipped with their line number and reason."""
    dataset = Dataset()
    ignored: set[str] = set()
    seen: dict[str, int] = {}
    with path.open("rb") as fh:
        for number, data in enumerate(fh, start=1):
            try:
                raw = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                dataset.skipped.append({"line": number, "error": f"not UTF-8: {exc.reason}"})
                continue
            if not raw.strip():
                continue
            try:
                record, extra = parse_line(raw)
                if record.id in seen:
                    first = seen[record.id]
                    raise ValueError(f"duplicate id {record.id!r} (first on line {first})")
            except ValueError as exc:
                dataset.skipped.append({"line": number, "error": str(exc)})
                continue
            tags: dict[str, Any] = {}
            ocr: OcrConfidences | None = None
            if record.document is not None:
                try:
                    record, tags, ocr = read_record_document(record, path.parent)
                except (OSError, FencelineError) as exc:
                    dataset.skipped.append(
                        {"line": number, "error": f"document {record.document!r}: {exc}"}
                    )
                    continue
            seen[record.id] = number
            ignored.update(extra)
            dataset.cases.append(Case(record, line=number, tags=tags, ocr=ocr))
    dataset.ignored_keys = sorted(ignored)
    return dataset


def read_record_document(
    record: EvalRecord, folder: Path
) -> tuple[EvalRecord, dict[str, Any], OcrConfidences | None]:
    """``record`` with its ``document`` file read into ``ocr_text`` as the worker's
    document stage reads it (media type sniffed from the bytes, limits of the process's
    settings), the tags its row gets (the media type and the pages OCR read), and the
    confidence of each word OCR read.

    Raises:
        OSError: the file cannot be read.
        FencelineError: the document stage refuses it (type, size, pages, no text).
    """
    assert record.document is not None
    data = (folder / record.document).read_bytes()
    settings = Settings()
    media = sniff_media_type(data, max_bytes=settings.max_document_file_bytes)
    read = read_document(data, media, settings)
    tags = {"media_type": media.value, "ocr_pages": len(read.ocr_pages)}
    return record.model_copy(update={"ocr_text": read.text}), tags, OcrConfidences.of(read)
