"""Planning a synthetic invoice: every random draw of the base invoice happens here.

:func:`draw_plan` turns a seed into a :class:`Plan` (country, language, layout,
number style, supplier, items, dates, IBAN, other suppliers on file, and the
:class:`~benchmarks.invoices.style.Style`: labels, spacing, order, decoys, footer)
using one ``random.Random(seed)`` stream and nothing else, so the same seed
always plans the same invoice. ``languages``/``layouts`` restrict the draw (a
training run can leave a language or layout family out, an evaluation test only
those). Rendering and variants read the plan; they never draw from
this stream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal

from benchmarks.invoices.catalog import CATALOG, UNITS
from benchmarks.invoices.lexicon import LANGUAGES, PREFIXES
from benchmarks.invoices.locales import COUNTRIES, CURRENCIES, SYMBOLS, Country, Numbers, fmt_date
from benchmarks.invoices.style import LAYOUTS, Style, draw_style
from pipeline.invoice import SupplierRecord

CENT = Decimal("0.01")


def make_iban(rng: random.Random, country: Country, bank: str | None = None) -> str:
    """A valid IBAN of ``country``: BBAN drawn per its layout (``bank`` as bank code), mod-97."""
    bban = ""
    spec = country.bban
    while spec:
        digits = ""
        while spec[0].isdigit():
            digits, spec = digits + spec[0], spec[1:]
        kind, spec = spec[0], spec[1:]
        if kind == "a":
            bban += (bank or rng.choice(country.banks))[: int(digits)]
        elif kind == "c":
            bban += "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(int(digits)))
        else:
            bban += "".join(rng.choice("0123456789") for _ in range(int(digits)))
    return with_check_digits(country.code, bban)


def with_check_digits(country: str, bban: str) -> str:
    """``country``, the ISO 13616 check digits, then ``bban``."""
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{country}{98 - int(numeric) % 97:02d}{bban}"


def _make_vat(rng: random.Random, country: Country) -> tuple[str, str]:
    """Return (printed form, master-data form) of a VAT id."""
    digits = "".join(rng.choice("0123456789") for _ in range(12))
    match country.code:
        case "DE":
            return rng.choice(
                [f"DE{digits[:9]}", f"DE {digits[:3]} {digits[3:6]} {digits[6:9]}"]
            ), (f"DE{digits[:9]}")
        case "AT":
            return f"ATU{digits[:8]}", f"ATU{digits[:8]}"
        case "FR":
            return f"FR {digits[:2]} {digits[2:11]}", f"FR{digits[:11]}"
        case "GB":
            return f"GB {digits[:3]} {digits[3:7]} {digits[7:9]}", f"GB{digits[:9]}"
        case "IE":
            vat = f"IE{digits[:7]}{rng.choice('ABCDEFW')}"
            return vat, vat
        case "CH":
            uid = f"CHE-{digits[:3]}.{digits[3:6]}.{digits[6:9]}"
            return uid, uid
        case "BE":
            d = "0" + digits[:9]
            return rng.choice([f"BE{d}", f"BE {d[:4]}.{d[4:7]}.{d[7:]}"]), f"BE{d}"
        case "ES":
            vat = f"ES{rng.choice('ABX')}{digits[:8]}"
            return vat, vat
        case "IT":
            return rng.choice([f"IT{digits[:11]}", f"IT {digits[:11]}"]), f"IT{digits[:11]}"
        case "PT":
            d = digits[:9]
            return rng.choice([f"PT{d}", f"PT {d[:3]} {d[3:6]} {d[6:]}"]), f"PT{d}"
        case "PL":
            d = digits[:10]
            printed = rng.choice([f"PL{d}", f"PL {d[:3]}-{d[3:6]}-{d[6:8]}-{d[8:]}"])
            return printed, f"PL{d}"
        case "SE":
            d = digits[:10]
            return rng.choice([f"SE{d}01", f"SE {d[:6]}-{d[6:]} 01"]), f"SE{d}01"
        case "DK":
            d = digits[:8]
            return rng.choice([f"DK{d}", f"DK {d[:2]} {d[2:4]} {d[4:6]} {d[6:]}"]), f"DK{d}"
        case _:
            return f"NL{digits[:9]}B01", f"NL{digits[:9]}B01"


@dataclass(frozen=True)
class Item:
    description: str
    unit: str
    quantity: Decimal
    unit_price: Decimal
    price_places: int
    rate: Decimal

    @property
    def amount(self) -> Decimal:
        return (self.quantity * self.unit_price).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Plan:
    """Every choice of the base invoice, drawn before anything is printed."""

    country: Country
    language: str
    layout: str
    numbers: Numbers
    currency: str
    currency_symbol: bool
    currency_line: bool
    date_style: int
    supplier_name: str
    nfd_name: bool
    street: str
    city: str
    vat_printed: str
    vat_master: str
    invoice_number: str
    issue: date
    due: date
    today: date
    terms_days: int
    items: tuple[Item, ...]
    iban: str
    iban_grouped: bool
    bic: str
    others: tuple[SupplierRecord, ...]
    style: Style


@dataclass(frozen=True)
class SupplierIdentity:
    """Who a supplier is wherever it appears: name, address, VAT id, IBAN and BIC.

    A tenant's invoices from one supplier share it, as a real supplier's do; the
    plan of a later invoice adopts it (:func:`adopt_supplier`) instead of drawing
    a second VAT id under a name already on file.
    """

    country: str
    name: str
    street: str
    city: str
    vat_printed: str
    vat_master: str
    iban: str
    bic: str

    @classmethod
    def of(cls, plan: Plan) -> SupplierIdentity:
        """The supplier ``plan`` drew."""
        return cls(
            country=plan.country.code,
            name=plan.supplier_name,
            street=plan.street,
            city=plan.city,
            vat_printed=plan.vat_printed,
            vat_master=plan.vat_master,
            iban=plan.iban,
            bic=plan.bic,
        )


def adopt_supplier(plan: Plan, supplier: SupplierIdentity) -> Plan:
    """``plan`` issued by ``supplier`` (everything else as drawn).

    Raises:
        ValueError: ``supplier`` is of another country than the plan (its VAT id,
            IBAN and address would not match the plan's currency and wording).
    """
    if supplier.country != plan.country.code:
        raise ValueError(f"supplier of {supplier.country} on a plan of {plan.country.code}")
    return replace(
        plan,
        supplier_name=supplier.name,
        street=supplier.street,
        city=supplier.city,
        vat_printed=supplier.vat_printed,
        vat_master=supplier.vat_master,
        iban=supplier.iban,
        bic=supplier.bic,
    )


def _supplier_name(rng: random.Random, country: Country) -> str:
    first, middle, legal = country.names
    return f"{rng.choice(first)} {rng.choice(middle)} {rng.choice(legal)}"


def _quantity(rng: random.Random, kind: str) -> Decimal:
    match kind:
        case "hours":
            return Decimal(rng.randint(1, 160)) / 4
        case "few":
            return Decimal(rng.randint(1, 5))
        case "many":
            return Decimal(rng.randint(10, 2000))
        case "one":
            return Decimal(1)
        case "weight":
            return Decimal(rng.randint(500, 60000)) / 1000
        case "words":
            return Decimal(rng.randint(300, 9000))
        case "volume":
            return Decimal(rng.randint(1000, 90000)) / 100
        case _:
            return Decimal(rng.randint(1, 50))


def _choose(
    rng: random.Random, languages: tuple[str, ...] | None, layouts: tuple[str, ...] | None
) -> tuple[Country, str, str]:
    """Country, language and layout, restricted to ``languages`` and ``layouts``."""
    allowed = LANGUAGES if languages is None else languages
    unknown = set(allowed) - set(LANGUAGES)
    if unknown or not allowed:
        raise ValueError(f"languages must be a non-empty subset of {LANGUAGES}: {allowed}")
    shapes = LAYOUTS if layouts is None else layouts
    if set(shapes) - set(LAYOUTS) or not shapes:
        raise ValueError(f"layouts must be a non-empty subset of {LAYOUTS}: {shapes}")
    countries = [c for c in COUNTRIES if set(c.languages) & set(allowed)]
    country = rng.choice(countries)
    language = rng.choice([lang for lang in country.languages if lang in allowed])
    return country, language, rng.choice(sorted(shapes, key=LAYOUTS.index))


def draw_plan(
    seed: int,
    line_items: int | None,
    max_line_items: int,
    anchor: date | None = None,
    *,
    languages: tuple[str, ...] | None = None,
    layouts: tuple[str, ...] | None = None,
) -> Plan:
    """Draw the base invoice from ``random.Random(seed)`` (arguments as in
    :func:`benchmarks.invoices.generator.generate_invoice`)."""
    rng = random.Random(seed)
    country, language, layout = _choose(rng, languages, layouts)
    currency = country.currency if rng.random() < 0.7 else rng.choice(CURRENCIES[:4])
    if line_items is None:
        roll = rng.random()
        line_items = (
            rng.randint(1, 8)
            if roll < 0.55
            else rng.randint(9, 40)
            if roll < 0.85
            else rng.randint(41, 200)
        )
    line_items = max(1, min(line_items, max_line_items))
    rates = [Decimal(r) for r in country.rates]
    items = []
    for _ in range(line_items):
        product = rng.choice(CATALOG)
        scale = 10**product.places
        price = Decimal(rng.randint(int(product.low * scale), int(product.high * scale))) / scale
        rate = rates[0] if rng.random() < 0.75 else rng.choice(rates)
        items.append(
            Item(
                description=product.names[language],
                unit=UNITS[language][product.unit],
                quantity=_quantity(rng, product.kind),
                unit_price=price,
                price_places=product.places,
                rate=rate,
            )
        )
    offset = rng.randint(0, 900)
    if anchor is None:
        issue = date(2023, 1, 1) + timedelta(days=offset)
    else:  # dated just before ``anchor`` so a validation run on that day finds it plausible
        issue = anchor - timedelta(days=20 + offset % 40)
    terms = rng.choice((14, 30, 45, 60))
    vat_printed, vat_master = _make_vat(rng, country)
    name = _supplier_name(rng, country)
    others = []
    for _ in range(2):
        other_country = rng.choice(COUNTRIES)
        other_name = _supplier_name(rng, other_country)
        if other_name != name:
            other_vat = _make_vat(rng, other_country)[1]
            others.append(
                SupplierRecord(other_name, other_vat, frozenset({make_iban(rng, other_country)}))
            )
    prefix = rng.choice(PREFIXES[language])
    number = rng.choice(
        (
            f"{prefix}-{issue.year}-{rng.randint(1, 99999):05d}",
            f"{prefix}{rng.randint(100000, 999999)}",
            f"{issue.year}/{rng.randint(1, 9999):04d}",
            f"{prefix}/{issue.year}/{rng.randint(1, 999):03d}",
        )
    )
    bank = rng.choice(country.banks)
    numbers = Numbers(country.number_style, grouped=rng.random() < 0.85)
    date_style = rng.randint(0, 5)
    delivery = fmt_date(issue - timedelta(days=rng.randint(0, 12)), language, date_style)
    return Plan(
        country=country,
        language=language,
        layout=layout,
        numbers=numbers,
        currency=currency,
        currency_symbol=currency in SYMBOLS and rng.random() < 0.5,
        currency_line=rng.random() < 0.5,
        date_style=date_style,
        supplier_name=name,
        nfd_name=rng.random() < 0.3,
        street=rng.choice(country.streets),
        city=rng.choice(country.cities),
        vat_printed=vat_printed,
        vat_master=vat_master,
        invoice_number=number,
        issue=issue,
        due=issue + timedelta(days=terms),
        today=issue + timedelta(days=rng.randint(0, 20)),
        terms_days=terms,
        items=tuple(items),
        iban=make_iban(rng, country, bank),
        iban_grouped=rng.random() < 0.8,
        bic=f"{bank}{country.code}{rng.choice(('FF', 'MM', '2X', '22'))}{rng.choice(('', 'XXX'))}",
        others=tuple(others),
        style=draw_style(rng, language, layout, country, numbers, delivery),
    )
