"""Grounding: a v2 answer's printed values located in the OCR text, read and evidenced by code.

For every value the model copied, grounding finds where it is printed and
derives the evidence the validator then checks as an invariant
(``{page, line, start, end, quote, match}``):

* **resolve** a value the grammar offered to its candidate's span or refusal
  (:mod:`pipeline.extraction.candidate_set`: located and proven once per layout);
* else **locate** exact first, then after normalisation (NFKC, case, whitespace);
  a bounded fuzzy match only for free text (supplier name, descriptions),
  recorded as ``fuzzy``; money, dates, IBANs, VAT ids and invoice numbers are
  exact or normalised, never fuzzy;
* **choose** among repeated occurrences by the field's label on the same line
  (the totals box over a header mention), the supplier's VAT id nearest the
  supplier's name, and for line items and tax lines the cited line;
* **read** amounts with the document's decimal mark, dates with the CLDR-based
  readers of :mod:`pipeline.invoice.dates`, a row's numbers by the arithmetic that
  ties them (:mod:`pipeline.extraction.row_arithmetic`);
* **refuse to guess**: a value that cannot be grounded becomes null with an
  ``ungrounded_value`` reason, so the job goes to review, never to the ERP.

The value stored is what the document prints at the evidence (a homoglyph in
the text stays in the value, where the supplier rule sees it), not the model's
rendering of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from babel.numbers import get_territory_currencies

from pipeline.extraction.amount_due import amount_due_reasons
from pipeline.extraction.answer import Answer, known_tax_lines, table_items
from pipeline.extraction.candidate import CandidateSet, Refusal
from pipeline.extraction.candidate_set import candidate_set
from pipeline.extraction.dates import DateReader
from pipeline.extraction.invoice_number import invoice_number_at
from pipeline.extraction.items import ItemReader
from pipeline.extraction.labels import LABELS
from pipeline.extraction.layout import Layout, Line, amounts, layout_of
from pipeline.extraction.locate import (
    Boundary,
    Found,
    labelled_in,
    occurrences,
    trimmed,
)
from pipeline.extraction.row_arithmetic import TaxNumbers, parse_tax_row, tax_gap
from pipeline.extraction.rows import (
    Row,
    read_row,
)
from pipeline.extraction.table import table_rows
from pipeline.extraction.tax_columns import tax_row_numbers
from pipeline.extraction.totals import (
    GROSS,
    NET,
    TAX,
    Rows,
    repair,
)
from pipeline.invoice import (
    CENT,
    CURRENCY_SYMBOLS,
    Evidence,
    EvidencedAmount,
    EvidencedCurrency,
    EvidencedDate,
    EvidencedIban,
    EvidencedText,
    Extraction,
    LineItem,
    Printed,
    Reason,
    ReasonCode,
    Supplier,
    TaxLine,
    compact_text,
    read_number,
)


@dataclass(frozen=True)
class Change:
    """A value grounding changed from the model's answer, and the rule that proved it
    (an id of :data:`pipeline.invoice.rules.RULES`)."""

    rule: str
    field: str
    detail: str


@dataclass
class Grounding:
    """What grounding made of one answer: the extraction, the values it refused and the
    values it changed."""

    extraction: Extraction
    reasons: list[Reason] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)


class _Grounder:
    def __init__(self, answer: Answer, doc: Layout, candidates: CandidateSet | None = None) -> None:
        self.answer = answer
        self.doc = doc
        #: The document's candidates (:func:`candidate_set`): an answered text that is one
        #: of its field's resolves to the candidate's span, never searched for again.
        self.candidates = candidates
        self.mark = doc.mark
        self.space = doc.space
        self.reasons: list[Reason] = []
        self.changes: list[Change] = []
        self.dates = DateReader(
            self.doc, (answer.iban, answer.vat_id), self.refuse, self.evidence, candidates
        )

    def refuse(
        self, path: str, detail: str, code: ReasonCode = ReasonCode.UNGROUNDED_VALUE, *, rule: str
    ) -> None:
        """Refuse the value at ``path``: a review reason naming ``rule`` (a registered id)."""
        self.reasons.append(Reason(code, path, detail, rule=rule))

    def evidence(self, f: Found, end: int | None = None) -> Evidence:
        stop = f.end if end is None else end
        page = self.doc.pages[f.page - 1]
        return Evidence(
            page=f.page,
            start=f.start,
            end=stop,
            quote=page[f.start : stop],
            line=f.line.number,
            match=f.match,
        )

    def text_at(self, f: Found) -> str:
        return self.doc.pages[f.page - 1][f.start : f.end]

    def find(
        self,
        path: str,
        value: str | None,
        labels: str,
        *,
        fuzzy: bool = False,
        last: bool = False,
        boundary: Boundary = "word",
        offered: str | None = None,
    ) -> Found | None:
        """Where ``value`` is printed for ``path``: the resolution of the candidate of the
        answer's field ``offered`` whose text it is, else located (:func:`occurrences`)
        and chosen by the label ``labels`` names."""
        if value is None:
            return None
        resolved = self.resolved(offered, value)
        if resolved is not None:
            if isinstance(resolved, Refusal):
                self.refuse(path, resolved.detail, resolved.code, rule=resolved.rule)
                return None
            return resolved
        found = occurrences(self.doc, value, fuzzy=fuzzy, boundary=boundary)
        if not found:
            self.refuse(
                path, f"{value[:60]!r} is not printed in the document", rule="grounding.not_printed"
            )
            return None
        return labelled_in(self.doc, found, LABELS.get(labels, ()), last=last)

    def resolved(self, field: str | None, value: str) -> Found | Refusal | None:
        """The resolution of ``field``'s candidate whose printed text is ``value``; None
        where ``value`` is none of them, or free text, or the candidate left unresolved."""
        if field is None or self.candidates is None:
            return None
        offered = self.candidates.offered(field, value)
        return offered.resolved if offered is not None else None

    def text(self, path: str, value: str | None, *, fuzzy: bool = False) -> EvidencedText | None:
        f = self.find(path, value, path, fuzzy=fuzzy)
        if f is None:
            return None
        return EvidencedText(value=self.text_at(f).strip(), evidence=self.evidence(f))

    def reference(self, path: str, value: str | None) -> EvidencedText | None:
        """The invoice's own number where its role is proven (:func:`invoice_number_at`)."""
        # An offered number is one its proofs kept: its span, else proven here.
        f = self.resolved("number", value) if value is not None else None
        if not isinstance(f, Found):
            f = invoice_number_at(self.doc, path, value, self.refuse)
        if f is None:
            return None
        return EvidencedText(value=self.text_at(f).strip(), evidence=self.evidence(f))

    def amount(
        self, path: str, value: str | None, offered: str | None = None
    ) -> EvidencedAmount | None:
        f = self.find(path, value, path, last=True, boundary="number", offered=offered)
        if f is None:
            return None
        number = read_number(self.text_at(f), self.mark)
        if number is None:
            self.refuse(
                path, f"{value!r} does not read as an amount", rule="grounding.amount_unreadable"
            )
            return None
        return EvidencedAmount(value=number, evidence=self.evidence(f))

    def when(
        self, path: str, value: str | None, *, prove_role: bool = True
    ) -> EvidencedDate | None:
        """A date at its role's label (:class:`~pipeline.extraction.dates.DateReader`);
        ``prove_role=False`` for a reviewer's correction, whose role the reviewer states."""
        return self.dates.when(path, value, prove_role=prove_role)

    def currency(self, value: str | None, offered: str | None = None) -> EvidencedCurrency | None:
        # A sign or code may be glued to its amount ("€1,234.56", "kr33 955,78").
        f = self.find("currency", value, "currency", last=True, boundary="letters", offered=offered)
        if f is None or value is None:
            return None
        printed = self.text_at(f)
        if printed not in CURRENCY_SYMBOLS:
            return EvidencedCurrency(value=printed.strip().upper(), evidence=self.evidence(f))
        code = self._sign_code(printed, CURRENCY_SYMBOLS[printed])
        bare = printed[:-1]
        if code is None and printed.endswith(".") and bare in CURRENCY_SYMBOLS:
            # The dot may end the sentence ("Att betala: 4 300,96 kr."): a sign that
            # reads as no currency of this supplier with its dot is read without it.
            code = self._sign_code(bare, CURRENCY_SYMBOLS[bare])
            if code is not None:
                f = Found(f.page, f.start, f.end - 1, f.line, f.match)
        if code is None:
            codes = ", ".join(sorted(CURRENCY_SYMBOLS[printed]))
            self.refuse(
                "currency",
                f"{printed!r} may mean {codes}",
                rule="grounding.currency_sign_ambiguous",
            )
            return None
        found = Found(f.page, f.start, f.end, f.line, "symbol")
        return EvidencedCurrency(value=code, evidence=self.evidence(found))

    def _sign_code(self, sign: str, codes: frozenset[str]) -> str | None:
        """The code a sign stands for: the only one it can mean, else the one the document
        names, else the currency of the country of the IBAN the supplier is paid to."""
        if len(codes) == 1:
            return next(iter(codes))
        named = [c for c in sorted(codes) if re.search(rf"(?<![A-Z]){c}(?![A-Z])", self.doc.text)]
        if len(named) == 1:
            return named[0]
        iban = (self.answer.iban or "").strip()
        if len(iban) >= 2 and iban[:2].isalpha():
            home = set(get_territory_currencies(iban[:2].upper())) & codes
            if len(home) == 1:
                return home.pop()
        return "USD" if sign == "$" and "USD" in codes else None

    def iban(self, value: str | None, offered: str | None = None) -> EvidencedIban | None:
        f = self.find("iban", value, "iban", offered=offered)
        if f is None:
            return None
        return EvidencedIban(value=compact_text(self.text_at(f)).upper(), evidence=self.evidence(f))

    def vat_id(
        self, value: str | None, near: Found | None, offered: str | None = None
    ) -> EvidencedText | None:
        if value is None:
            return None
        candidate = self.candidates.offered(offered, value) if offered and self.candidates else None
        if candidate is not None and isinstance(candidate.resolved, Refusal):
            self.refuse("supplier.vat_id", candidate.resolved.detail, rule=candidate.resolved.rule)
            return None
        if candidate is not None and candidate.spans:
            found = list(candidate.spans)
        else:
            found = occurrences(self.doc, value, fuzzy=False)
        if not found:
            self.refuse(
                "supplier.vat_id",
                f"{value[:60]!r} is not printed in the document",
                rule="grounding.not_printed",
            )
            return None
        if near is not None:
            found.sort(key=lambda f: abs(f.line.number - near.line.number))
        f = found[0]
        return EvidencedText(value=self.text_at(f).strip(), evidence=self.evidence(f))

    def row(self, number: int) -> Row | None:
        """The item row starting at line ``number`` (:func:`~pipeline.extraction.rows.read_row`)."""
        return read_row(self.doc, number)

    def tax_lines(self) -> tuple[TaxLine, ...]:
        """Tax lines at the cited lines; a line cited twice is one row. A cited line that
        is no tax row is replaced by the nearest unused line (within three) whose rate,
        base and amount add up exactly, else refused."""
        out: list[TaxLine] = []
        used: set[int] = set()
        cited = self.answer.taxes
        if cited is None:  # the grammar did not ask: the arithmetic found them
            cited = tuple(known_tax_lines(self.doc) or ())
        for j, number in enumerate(dict.fromkeys(cited)):
            path = f"tax_lines[{j}]"
            spot = self._tax_row(number, used)
            if spot is None:
                self.refuse(
                    path,
                    f"line {number} prints no rate, base and tax amount",
                    rule="tax_lines.no_tax_row",
                )
                continue
            line, read = spot
            used.add(line.number)
            f = Found(line.page, line.start, line.end, line, "exact")
            out.append(
                TaxLine(
                    rate=read.rate.value,
                    base=read.base.value,
                    amount=read.amount.value,
                    evidence=self.evidence(trimmed(f)),
                )
            )
        return tuple(out)

    def _tax_row(self, number: int, used: set[int]) -> tuple[Line, TaxNumbers] | None:
        cited = self.doc.line(number)
        if cited is None:
            return None
        for offset, slack in ((0, CENT * 2), (-1, 0), (1, 0), (-2, 0), (2, 0), (-3, 0), (3, 0)):
            line = self.doc.line(number + offset)
            if line is None or line.number in used or line.page != cited.page:
                continue
            read = parse_tax_row(self.numbers(line))
            if read is not None and tax_gap(read) <= slack:
                return line, read
        return None

    def numbers(self, line: Line) -> list[Printed]:
        return tax_row_numbers(self.doc, line)

    def run(self) -> Extraction:
        a = self.answer
        name = self.find(
            "supplier.name", a.supplier, "supplier.name", fuzzy=True, offered="supplier"
        )
        supplier_name = (
            EvidencedText(value=self.text_at(name).strip(), evidence=self.evidence(name))
            if name is not None
            else None
        )
        taxes = self.tax_lines()
        net = self.amount(NET, a.net, "net")
        refs = table_items(a.items, table_rows(self.doc))
        if refs is None:
            self.refuse("line_items", "the answer lists no line items", rule="items.none_listed")
        items = ItemReader(self.doc, self.refuse, self.evidence).read(
            refs or (), taxes, net.value if net is not None else None
        )
        totals = {
            NET: net,
            TAX: self.amount(TAX, a.tax, "tax"),
            GROSS: self.amount(GROSS, a.gross, "gross"),
        }
        self.put_totals_right(totals, items, taxes)
        issue = self.dates.when("issue_date", a.issue_date)
        return Extraction(
            supplier=Supplier(name=supplier_name, vat_id=self.vat_id(a.vat_id, name, "vat_id")),
            invoice_number=self.reference("invoice_number", a.number),
            issue_date=issue,
            due_date=self.dates.due(a.due_date, issue),
            currency=self.currency(a.currency, "currency"),
            line_items=items,
            tax_lines=taxes,
            net_total=totals[NET],
            tax_total=totals[TAX],
            gross_total=totals[GROSS],
            iban=self.iban(a.iban, "iban"),
            uncertain_fields=(),
        )

    def put_totals_right(
        self,
        totals: dict[str, EvidencedAmount | None],
        items: tuple[LineItem, ...],
        taxes: tuple[TaxLine, ...],
    ) -> None:
        """Replace totals the model copied from another total or a part of their own sum,
        or exchanged, where the constraint step finds one repair certain
        (:func:`~pipeline.extraction.totals.repair`) and every new value is printed."""
        net_v, tax_v, gross_v = (t.value if t is not None else None for t in totals.values())
        rows = Rows(
            items_sum=sum((i.line_amount for i in items), Decimal(0)) if items else None,
            tax_lines_sum=sum((t.amount for t in taxes), Decimal(0)) if taxes else None,
            line_amounts=tuple(i.line_amount for i in items),
            tax_amounts=tuple(t.amount for t in taxes),
            tax_bases=tuple(t.base for t in taxes),
            rates=tuple(t.rate for t in taxes if t.rate is not None),  # a model's: all
        )
        fix = repair(net_v, tax_v, gross_v, rows)
        if fix is None:
            return
        placed = {path: self.printed_amount(path, value) for path, value in fix.values.items()}
        if any(p is None for p in placed.values()):
            return
        for path, now in placed.items():
            before = totals[path]
            was = before.value if before is not None else None
            self.changes.append(Change(fix.rule, path, f"{was} -> {now.value if now else None}"))
        totals.update(placed)

    def printed_amount(self, path: str, value: Decimal) -> EvidencedAmount | None:
        """Where ``value`` is printed as an amount (under ``path``'s label first), its
        evidence marked ``arithmetic`` (:mod:`pipeline.extraction.totals`)."""
        found = [
            f
            for printed in amounts(self.doc)
            if read_number(printed, self.mark) == value
            for f in occurrences(self.doc, printed, fuzzy=False, boundary="number")
        ]
        if not found:
            return None
        f = labelled_in(self.doc, found, LABELS.get(path, ()), last=True)
        f = Found(f.page, f.start, f.end, f.line, "arithmetic")
        return EvidencedAmount(value=value, evidence=self.evidence(f))


def ground(answer: Answer, ocr_text: str) -> Grounding:
    """:func:`ground_in` the layout of ``ocr_text``."""
    return ground_in(answer, layout_of(ocr_text))


def ground_in(answer: Answer, doc: Layout) -> Grounding:
    """Locate, read and evidence every value of ``answer`` in the document ``doc``.

    Never raises for a wrong answer: what cannot be grounded is null and named
    in ``reasons`` (``ungrounded_value``), so validation sends the job to review.
    """
    g = _Grounder(answer, doc, candidate_set(doc))
    extraction = g.run()
    gross = extraction.gross_total.value if extraction.gross_total is not None else None
    return Grounding(extraction, g.reasons + amount_due_reasons(doc, gross), g.changes)


#: The grounder itself, for grounding one value at a time (a reviewer's correction,
#: :mod:`pipeline.extraction.reground`).
Grounder = _Grounder
