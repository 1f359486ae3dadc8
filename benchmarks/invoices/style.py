"""How one synthetic invoice is dressed: labels, spacing, order of fields, decoys, footer.

Drawn per invoice by :func:`draw_style` from the plan's random stream, as many
small independent choices rather than a few fixed templates: which synonym
each label uses, the separator after a label, the column values align to,
whether the customer block comes before the invoice fields, which decoy fields
(order and customer numbers, phone, delivery date) appear and where, and the
legal footer (register number, share capital in the supplier's home currency).
A model trained on the result has to find the field, not memorise a template;
validation has to ignore the decoys (a share capital is not a second pricing
currency).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal

from benchmarks.invoices.catalog import BUYERS
from benchmarks.invoices.lexicon import LEXICON
from benchmarks.invoices.locales import Country, Numbers

#: Layout families: how header fields, line items and totals are set on the page.
#: ``table``/``stacked``/``ledger`` as before; ``keyvalue``: fields and totals as a
#: key/value block with right-aligned values; ``prose``: values inside running
#: sentences; ``columns``: supplier and customer side by side, totals box at the right.
LAYOUTS: tuple[str, ...] = ("table", "stacked", "ledger", "keyvalue", "prose", "columns")
_PHONE_PREFIX = {"DE": "+49 30", "AT": "+43 1", "FR": "+33 1", "GB": "+44 20", "IE": "+353 1",
                 "CH": "+41 44", "NL": "+31 20", "BE": "+32 2", "ES": "+34 91", "IT": "+39 02",
                 "PT": "+351 21", "PL": "+48 22", "SE": "+46 8", "DK": "+45"}  # fmt: skip


@dataclass(frozen=True)
class Style:
    """Presentation choices; every printed value's evidence is recorded whatever they are."""

    labels: dict[str, str]  # one alternative per lexicon key
    sep: str  # between a label and its value
    column: int  # where values (keyvalue) or the right column (columns) start
    width: int  # right edge values are aligned to
    buyer_first: bool  # customer block before the invoice fields
    meta_order: tuple[str, ...]  # "number", "issue", "due" and decoy keys, in print order
    decoys: dict[str, str]  # decoy key -> value as printed
    phone: str | None  # supplier phone in the letterhead
    percent: str  # "%" or " %" after a rate
    bullet: str  # before each prose line item
    footer: tuple[str, ...]  # legal footer lines
    buyer: tuple[str, str, str, str]  # customer name, street, city, VAT id


def draw_style(
    rng: random.Random,
    language: str,
    layout: str,
    country: Country,
    numbers: Numbers,
    delivery: str,
) -> Style:
    """Draw the presentation of one invoice (``delivery``: the decoy delivery date, printed)."""
    labels = {key: rng.choice(alternatives) for key, alternatives in LEXICON[language].items()}
    decoys = {}
    if rng.random() < 0.6:
        decoys["order"] = rng.choice(
            (f"{rng.randint(4500000000, 4599999999)}", f"PO-{rng.randint(10000, 99999)}")
        )
    if rng.random() < 0.5:
        decoys["customer_no"] = rng.choice(
            (f"{rng.randint(10000, 99999)}", f"K-{rng.randint(1000, 9999)}")
        )
    if rng.random() < 0.4:
        decoys["delivery"] = delivery
    meta = ["issue", "number", "due"] if rng.random() < 0.3 else ["number", "issue", "due"]
    for key in decoys:
        meta.insert(rng.randint(0, len(meta)), key)
    phone = None
    if rng.random() < 0.5:
        local = f"{rng.randint(100, 999)} {rng.randint(1000, 9999)}"
        phone = f"{_PHONE_PREFIX.get(country.code, '+44 20')} {local}"
    footer = []
    if rng.random() < 0.6:
        reg = str(rng.randint(10000, 999999999))
        footer.append(labels["register"].format(reg=reg))
    if rng.random() < 0.5:
        capital = Decimal(rng.choice((12500, 25000, 50000, 100000, 250000)))
        footer.append(
            labels["capital"].format(amount=numbers.fmt(capital, None), cur=country.currency)
        )
    rng.shuffle(footer)
    return Style(
        labels=labels,
        sep=rng.choice((": ", ": ", ":  ", " ")) if layout != "keyvalue" else "",
        column=rng.randint(26, 46),
        width=rng.randint(60, 78),
        buyer_first=rng.random() < 0.35,
        meta_order=tuple(meta),
        decoys=decoys,
        phone=phone,
        percent="%" if language == "en" or rng.random() < 0.3 else " %",
        bullet=rng.choice(("", "- ", "• ", "* ")),
        footer=tuple(footer),
        buyer=rng.choice(BUYERS[language]),
    )
