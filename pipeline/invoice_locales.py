"""Locale data for synthetic invoices: countries, catalogue, labels, number and date formats.

Everything an invoice prints that depends on where it comes from: per country
the currency, VAT rates, IBAN layout, banks, addresses and supplier-name parts;
per language the labels, units, product names and date formats; per number
style the group separator and decimal mark. Pure data plus the two formatters
(:class:`Numbers`, :func:`fmt_date`); every random choice among it is made in
:mod:`pipeline.invoice_plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal


@dataclass(frozen=True)
class Country:
    """One country's reference data (a block of ``_COUNTRY_TABLE``)."""

    code: str
    currency: str
    languages: tuple[str, ...]
    number_style: str
    rates: tuple[str, ...]  # first is the standard rate
    bban: str  # n digits, a letters (IBAN BBAN layout)
    banks: tuple[str, ...]
    streets: tuple[str, ...]
    cities: tuple[str, ...]
    names: tuple[tuple[str, ...], ...]


#: One block per country: code currency languages number-style rates IBAN-BBAN banks,
#: then streets, cities, and the three parts supplier names are drawn from.
_COUNTRY_TABLE = """
DE EUR de,de,en de 19,7 18n COBA,DEUT,HASP
Hauptstraße 12; Am Weißen Stein 3; Industriestraße 88
10115 Berlin; 20095 Hamburg; 80331 München
Nordwind; Müller & Söhne; Bergmann; Schäfer; Hansa; Rheinwerk
Technik; Logistik; Bürobedarf; Metallbau; Elektro
GmbH; AG; GmbH & Co. KG

AT EUR de,en de 20,10,13 16n BKAU,RZBA
Mariahilfer Straße 45; Getreidegasse 9
1060 Wien; 5020 Salzburg
Alpenblick; Donau; Großglockner
Handel; Bau; Systeme
GmbH; AG

FR EUR fr,fr,en fr 20,10,5.5 23n BNPA,SOGE
12 rue de la Paix; 8 avenue Jean Jaurès; 45 quai des Chartrons
75002 Paris; 69007 Lyon; 33000 Bordeaux
Société; Atelier; Comptoir; Maison
Lefèvre; Dubois; Garnier; Bréguet
SARL; SAS; SA

GB GBP en en 20,5,0 4a14n NWBK,BARC,LOYD
14 Harbour Road; 2 Kingsway Court; 77 Pennine Way
Bristol BS1 4DJ; Leeds LS1 2HT; Manchester M1 3FF
Harbour; Oakridge; Kingsway; Brightwater; Thames
Supplies; Engineering; Logistics; Office
Ltd; Limited; PLC

IE EUR en en 23,13.5 4a14n AIBK,BOFI
12 Dame Street; 4 Quay Road
Dublin 2; Cork T12 X70A
Liffey; Shannon; Emerald
Trading; Services
Ltd; DAC

CH CHF de,fr,en ch 8.1,2.6 17n UBSW,ZKBK
Bahnhofstrasse 21; Rue du Rhône 40
8001 Zürich; 1204 Genève
Alpina; Helvetia; Zürcher; Léman
Werkzeug; Präzision; Services
AG; SA; GmbH

NL EUR en de 21,9 4a10n ABNA,INGB,RABO
Keizersgracht 123; Coolsingel 40
1015 CJ Amsterdam; 3011 AD Rotterdam
Van der Berg; De Vries; Noordzee; Oranje
Handel; Techniek
B.V.
"""


def _parse_countries(table: str) -> tuple[Country, ...]:
    out = []
    for block in table.strip().split("\n\n"):
        head, streets, cities, *names = block.split("\n")
        code, currency, languages, style, rates, bban, banks = head.split()
        out.append(
            Country(
                code,
                currency,
                tuple(languages.split(",")),
                style,
                tuple(rates.split(",")),
                bban,
                tuple(banks.split(",")),
                tuple(streets.split("; ")),
                tuple(cities.split("; ")),
                tuple(tuple(part.split("; ")) for part in names),
            )
        )
    return tuple(out)


COUNTRIES = _parse_countries(_COUNTRY_TABLE)

BUYERS = {
    "en": ("Northfield Retail Ltd", "5 Market Street", "York YO1 8AB", "GB 402 8817 23"),
    "de": ("Kaufhaus Lindner GmbH", "Schillerplatz 2", "70173 Stuttgart", "DE 287 114 560"),
    "fr": ("Groupe Verdier SAS", "3 place Bellecour", "69002 Lyon", "FR 41 552100554"),
}

#: unit, price range, price decimals, quantity kind | English | German | French.
_CATALOG_TABLE = """
h 80 220 2 hours | Consulting services | Beratungsleistung | Prestation de conseil
pcs 200 4800 2 few | Software licence, annual | Softwarelizenz, jährlich | Licence annuelle
pcs 120 690 2 count | Office chair | Bürostuhl, ergonomisch | Chaise de bureau ergonomique
pcs 35 140 2 count | Printer toner, black | Druckertoner, schwarz | Toner noir
pcs 3.5 9.9 2 count | Copy paper A4, 80 g | Kopierpapier A4, 80 g | Papier copie A4, 80 g
pcs 0.35 4.2 2 many | Steel bracket 40 mm | Stahlwinkel 40 mm | Équerre en acier 40 mm
pcs 2.1 12.5 2 count | Cable ties, pack of 100 | Kabelbinder, 100 Stück | Colliers, lot de 100
h 45 120 2 hours | Installation labour | Montagearbeiten | Main-d'œuvre d'installation
pcs 15 390 2 one | Freight and packaging | Fracht und Verpackung | Transport et emballage
kg 14 38 2 weight | Coffee beans | Kaffeebohnen | Café en grains
pcs 90 650 2 one | Heating maintenance | Wartung Heizungsanlage | Entretien du chauffage
pcs 49 2400 2 few | Cloud hosting, monthly | Cloud-Hosting, monatlich | Hébergement cloud
pcs 1.2 8.9 2 many | Safety gloves, size 9 | Schutzhandschuhe, Gr. 9 | Gants, taille 9
words 0.08 0.2 3 words | Translation, per word | Übersetzung, pro Wort | Traduction, par mot
l 1.45 1.99 3 volume | Diesel fuel | Dieselkraftstoff | Gazole
"""


@dataclass(frozen=True)
class _Product:
    names: tuple[str, str, str]  # en, de, fr
    unit: str
    low: Decimal
    high: Decimal
    places: int
    kind: str


def _parse_catalog(table: str) -> tuple[_Product, ...]:
    out = []
    for row in table.strip().split("\n"):
        head, en, de, fr = (part.strip() for part in row.split("|"))
        unit, low, high, places, kind = head.split()
        out.append(_Product((en, de, fr), unit, Decimal(low), Decimal(high), int(places), kind))
    return tuple(out)


CATALOG = _parse_catalog(_CATALOG_TABLE)

UNITS = {
    "h": ("h", "Std.", "h"),
    "pcs": ("pcs", "Stk.", "pce"),
    "kg": ("kg", "kg", "kg"),
    "l": ("l", "l", "l"),
    "words": ("words", "Wörter", "mots"),
}
LANG_INDEX = {"en": 0, "de": 1, "fr": 2}

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "invoice": "INVOICE", "number": "Invoice no.", "date": "Invoice date", "due": "Due date",
        "vat_id": "VAT No.", "bill_to": "Bill to", "pos": "Pos", "desc": "Description",
        "qty": "Qty", "price": "Unit price", "amount": "Amount", "tax": "VAT",
        "net": "Net total", "tax_line": "VAT {rate}% on {base}", "gross": "Total due",
        "currency": "Currency", "bank": "Bank details", "page": "Page",
        "terms": "Payable within {days} days of the invoice date.",
        "thanks": "Thank you for your business.", "payable": "Amount payable",
    },
    "de": {
        "invoice": "RECHNUNG", "number": "Rechnungsnummer", "date": "Rechnungsdatum",
        "due": "Fällig am", "vat_id": "USt-IdNr.", "bill_to": "Rechnungsempfänger",
        "pos": "Pos.", "desc": "Bezeichnung", "qty": "Menge", "price": "Einzelpreis",
        "amount": "Betrag", "tax": "MwSt.", "net": "Nettobetrag",
        "tax_line": "zzgl. {rate} % MwSt. auf {base}", "gross": "Rechnungsbetrag",
        "currency": "Währung", "bank": "Bankverbindung", "page": "Seite",
        "terms": "Zahlbar innerhalb von {days} Tagen ohne Abzug.",
        "thanks": "Vielen Dank für Ihren Auftrag.", "payable": "Zahlbetrag",
    },
    "fr": {
        "invoice": "FACTURE", "number": "N° de facture", "date": "Date de facture",
        "due": "Date d'échéance", "vat_id": "N° TVA intracom.", "bill_to": "Facturé à",
        "pos": "Réf.", "desc": "Désignation", "qty": "Qté", "price": "Prix unitaire HT",
        "amount": "Montant HT", "tax": "TVA", "net": "Total HT",
        "tax_line": "TVA {rate} % sur {base}", "gross": "Total TTC", "currency": "Devise",
        "bank": "Coordonnées bancaires", "page": "Page",
        "terms": "Paiement à {days} jours date de facture.",
        "thanks": "Merci de votre confiance.", "payable": "Montant à payer",
    },
}  # fmt: skip
_MONTH_NAMES = {
    "en": "January February March April May June July August September October November December",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
}
_DATE_FORMATS = {
    "en": ("{d} {month} {y}", "{y}-{mm}-{dd}", "{dd}/{mm}/{y}"),
    "de": ("{dd}.{mm}.{y}", "{d}. {month} {y}"),
    "fr": ("{dd}/{mm}/{y}", "{d} {month} {y}"),
}
#: (group separator, decimal mark) per number style.
_NUMBER_STYLES = {"en": (",", "."), "de": (".", ","), "fr": ("\u202f", ","), "ch": ("'", ".")}
SYMBOLS = {"EUR": "€", "GBP": "£", "USD": "$"}


@dataclass(frozen=True)
class Numbers:
    """Number printing in one style (``en``, ``de``, ``fr``, ``ch``), grouped or not."""

    style: str
    grouped: bool

    def fmt(self, value: Decimal, places: int | None = 2) -> str:
        """Print ``value`` in this locale; ``places=None`` drops trailing zeros (qty, rates)."""
        group, mark = _NUMBER_STYLES[self.style]
        text = format(value.normalize(), "f") if places is None else format(value, f".{places}f")
        sign, text = ("-", text[1:]) if text.startswith("-") else ("", text)
        whole, _, frac = text.partition(".")
        if self.grouped and len(whole) > 3:
            head = len(whole) % 3 or 3
            whole = group.join(
                [whole[:head]] + [whole[i : i + 3] for i in range(head, len(whole), 3)]
            )
        return sign + whole + (mark + frac if frac else "")


def fmt_date(value: date, language: str, style: int) -> str:
    """``value`` in ``language``'s date format number ``style`` (cycled)."""
    month = _MONTH_NAMES[language].split()[value.month - 1]
    template = _DATE_FORMATS[language][style % len(_DATE_FORMATS[language])]
    return template.format(
        d=value.day, dd=f"{value.day:02d}", mm=f"{value.month:02d}", y=value.year, month=month
    )
