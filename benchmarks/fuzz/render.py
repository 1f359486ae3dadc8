"""The fuzzer's renderer: one invoice's :class:`~benchmarks.fuzz.facts.Facts` printed
under one :class:`~benchmarks.fuzz.layout.Layout`.

Printed from the values, not edited from the generator's text, so each choice
(where a label sits, how a date reads, what order the columns take) is made once and
every value's span is recorded as it is written (:class:`~benchmarks.fuzz.sheet.Row`).
Wording comes from :mod:`benchmarks.fuzz.vocabulary`; a random stream per invoice and
family picks synonyms, so the same seed and family print the same text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from benchmarks.fuzz import formats
from benchmarks.fuzz.facts import Facts
from benchmarks.fuzz.items import write_table, write_text_items
from benchmarks.fuzz.layout import Layout
from benchmarks.fuzz.sheet import Part, Row, Sheet, Span, beside, right_aligned
from benchmarks.fuzz.vocabulary import CUSTOMERS, choices, word

WIDTH = 78


@dataclass(frozen=True)
class Printed:
    """A rendered invoice: its text and, per truth key, the spans where it is printed."""

    text: str
    spans: dict[str, list[Span]]


def _date(day: date, facts: Facts, layout: Layout) -> str:
    return (
        formats.in_words(day, facts.language)
        if layout.words
        else formats.in_figures(day, facts.language)
    )


def _sentence(template: str, key: str, shown: str) -> Row:
    """A sentence with one slot ``{date}``/``{n}``, the slot's text recorded under ``key``."""
    slot = "{date}" if "{date}" in template else "{n}"
    head, _, tail = template.partition(slot)
    return Row.of(head, (key, shown), tail)


def _labelled(pairs: Sequence[tuple[str, Part | list[Part]]], style: str) -> list[Row]:
    """Label/value pairs in one of the label styles (``row``: labels over values)."""

    def parts(value: Part | list[Part]) -> list[Part]:
        return value if isinstance(value, list) else [value]

    def shown(value: Part | list[Part]) -> str:
        return "".join(p[1] if isinstance(p, tuple) else p for p in parts(value))

    if style == "row":
        labels: list[str] = []
        values: list[Part] = []
        for label, value in pairs:
            width = max(len(label), len(shown(value))) + 3
            labels.append(label.ljust(width))
            values += [*parts(value), " " * (width - len(shown(value)))]
        return [Row("".join(labels).rstrip()), Row.of(*values[:-1])]
    width = max(len(label) for label, _ in pairs) + 2
    out: list[Row] = []
    for label, value in pairs:
        if style == "before":
            out.append(Row.of(label.ljust(width), *parts(value)))
        elif style == "after":
            out.append(Row.of(*parts(value), "   ", label))
        else:  # below: the value, its label under it
            out.extend([Row.of(*parts(value)), Row(label)])
    return out


def _letterhead(facts: Facts, layout: Layout, rng: random.Random) -> list[Row]:
    rows = [Row.of(("supplier", facts.supplier_printed)), *(Row(a) for a in facts.address)]
    rows.append(
        Row.of(rng.choice(choices(facts.language, "vat")), " ", ("vat_id", facts.vat_printed))
    )
    if layout.noise:
        phone = f"+{rng.randint(30, 49)} {rng.randint(10, 99)} {rng.randint(100000, 9999999)}"
        rows.append(Row(f"{word(facts.language, 'phone')} {phone}"))
        rows.append(Row(word(facts.language, "founded").format(y=facts.issue.year)))
    return rows


def _customer(facts: Facts, rng: random.Random) -> list[Row]:
    name, street, town = CUSTOMERS[facts.seed % len(CUSTOMERS)]
    prefix = facts.vat_id[:2] if facts.vat_id[:2].isalpha() else "EU"
    vat = prefix + "".join(str(rng.randint(0, 9)) for _ in range(9))
    label = choices(facts.language, "vat")[0]
    return [Row(word(facts.language, "customer")), Row(name), Row(street), Row(town),
            Row(f"{label} {vat}")]  # fmt: skip


def _header_fields(facts: Facts, layout: Layout, rng: random.Random) -> list[tuple[str, Part]]:
    lang = facts.language
    pairs: list[tuple[str, Part]] = []
    if layout.issue != "letter":
        pairs.append((rng.choice(choices(lang, "number")), ("number", facts.number)))
    if layout.issue == "label":
        pairs.append(
            (rng.choice(choices(lang, "issue")), ("issue_date", _date(facts.issue, facts, layout)))
        )
    if layout.due == "label" and facts.due is not None:
        pairs.append(
            (rng.choice(choices(lang, "due")), ("due_date", _date(facts.due, facts, layout)))
        )
    if layout.noise:
        pairs.append((word(lang, "order"), f"PO-{rng.randint(100000, 999999)}"))
        pairs.append((word(lang, "customer_no"), str(rng.randint(10000, 99999))))
        delivered = facts.issue - timedelta(days=rng.randint(1, 6))
        pairs.append((word(lang, "delivery"), formats.in_figures(delivered, lang)))
    return pairs


def _totals(facts: Facts, layout: Layout) -> list[Row]:
    lang = facts.language
    net = ("net", formats.amount(facts.net, facts))
    tax = ("tax", formats.amount(facts.tax, facts))
    gross_text = formats.amount(facts.gross, facts)
    taxes = []
    for j, t in enumerate(facts.taxes):
        head = word(lang, "tax_line").format(
            rate=formats.rate(t.rate, facts), base=formats.amount(t.base, facts)
        )
        taxes.append(Row(f"{head} {formats.amount(t.amount, facts)}").whole(f"taxline:{j}"))
    currency: Part = ("currency", facts.currency)
    gross: Part = ("gross", gross_text)
    label_gross = word(lang, "gross")
    if layout.labels != "before":
        money = [
            *_labelled([(word(lang, "net"), net)], layout.labels),
            *taxes,
            *_labelled([(word(lang, "tax_total"), tax)], layout.labels),
            *_labelled([(label_gross, [currency, " ", gross])], layout.labels),
        ]
        if layout.labels == "row":  # the three totals in one labelled row
            pairs: list[tuple[str, Part | list[Part]]] = [
                (word(lang, "net"), net),
                (word(lang, "tax_total"), tax),
                (label_gross, [currency, " ", gross]),
            ]
            money = [*taxes, Row(""), *_labelled(pairs, "row")]
        return money
    return right_aligned(
        [
            Row.of(word(lang, "net").ljust(26), net),
            *taxes,
            Row.of(word(lang, "tax_total").ljust(26), tax),
            Row.of(label_gross.ljust(26), currency, " ", gross),
        ],
        WIDTH,
    )


def _payment(facts: Facts, layout: Layout, rng: random.Random) -> list[Row]:
    lang = facts.language
    rows: list[Row] = []
    if layout.due == "sentence" and facts.due is not None:
        template = rng.choice(choices(lang, "due_by"))
        rows.append(_sentence(template, "due_date", _date(facts.due, facts, layout)))
    elif layout.due == "term" and facts.term_days is not None:
        head, _, tail = word(lang, "term").partition("{n}")
        unit = m.group(0) if (m := re.match(r"\s*\w+", tail)) else ""
        rows.append(Row.of(head, ("due_date", f"{facts.term_days}{unit}"), tail[len(unit) :]))
    if facts.iban_printed is not None:
        rows.append(Row.of("IBAN: ", ("iban", facts.iban_printed)))
    return rows


def render(facts: Facts, layout: Layout, rng: random.Random) -> Printed:
    """Print ``facts`` under ``layout``; every truth key's spans come with the text."""
    lang = facts.language
    sheet = Sheet()
    head = _letterhead(facts, layout, rng)
    fields = _header_fields(facts, layout, rng)
    title = Row(word(lang, "title"))
    if layout.issue == "letter":
        subject = word(lang, "subject")
        before, _, after = subject.partition("{number}")
        title = Row.of(before, ("number", facts.number), after)
    if layout.side_by_side and fields:
        block = [title, Row(""), *_labelled(fields, layout.labels)]
        sheet.add(*beside(head, block))
        fields = []
    else:
        sheet.add(*head)
    sheet.blank()
    if layout.issue == "letter":
        place = Row.of(
            word(lang, "place"), ", ", ("issue_date", formats.in_words(facts.issue, lang))
        )
        sheet.add(*right_aligned([place], WIDTH))
        sheet.blank()
    sheet.add(*_customer(facts, rng))
    sheet.blank()
    if not layout.side_by_side or layout.issue == "letter":
        sheet.add(title)
    if fields:
        sheet.add(*_labelled(fields, layout.labels))
    if layout.issue == "sentence":
        template = word(lang, "issued")
        sheet.add(_sentence(template, "issue_date", _date(facts.issue, facts, layout)))
    sheet.blank()
    if layout.issue == "letter":
        sheet.lines(word(lang, "salute"), word(lang, "body"), "")
    if layout.items == "table":
        write_table(sheet, facts, layout, title)
    else:
        write_text_items(sheet, facts, layout, rng)
    sheet.blank()
    sheet.add(*_totals(facts, layout))
    sheet.blank()
    sheet.add(*_payment(facts, layout, rng))
    if layout.issue == "letter":
        sheet.lines("", word(lang, "close"), facts.supplier_printed)
    if layout.noise:
        sheet.lines("", word(lang, "register").format(n=rng.randint(10000, 99999)))
    return Printed(sheet.text(), sheet.spans())
