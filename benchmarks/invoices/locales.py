"""Locale data for synthetic invoices: countries, catalogue, labels, number and date formats.

Everything an invoice prints that depends on where it comes from: per country
the currency, VAT rates, IBAN layout, banks, addresses and supplier-name parts;
per language the date formats and month names; per number style the group
separator and decimal mark. Words (labels, products, buyers) live in
:mod:`benchmarks.invoices.lexicon`. Pure data plus the two formatters
(:class:`Numbers`, :func:`fmt_date`); every random choice among it is made in
:mod:`benchmarks.invoices.plan`.

The month names here are the generator's own (what suppliers print), not
CLDR's: validation reads dates with CLDR (:mod:`pipeline.validation.dates`),
so the two are independent and a test of one against the other means something.
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
    bban: str  # n digits, a bank-code letters, c any capital (IBAN BBAN layout)
    banks: tuple[str, ...]
    streets: tuple[str, ...]
    cities: tuple[str, ...]
    names: tuple[tuple[str, ...], ...]


#: One block per country: code currency languages number-style rates IBAN-BBAN banks,
#: (BBAN: n digits, a the bank code's letters, c a random capital letter),
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

NL EUR nl,nl,en de 21,9 4a10n ABNA,INGB,RABO
Keizersgracht 123; Coolsingel 40; Oudegracht 231
1015 CJ Amsterdam; 3011 AD Rotterdam; 3511 NK Utrecht
Van der Berg; De Vries; Noordzee; Oranje
Handel; Techniek; Installaties
B.V.

BE EUR nl,fr,en de 21,12,6 12n GEBA,KRED,BBRU
Meir 78; Rue Neuve 123; Veldstraat 10
2000 Antwerpen; 1000 Bruxelles; 9000 Gent
Schelde; Brabant; Atomium; Ardennes
Services; Logistiek; Construct
BV; SRL; NV

ES EUR es,es,en de 21,10,4 20n CAIX,BBVA,BSCH
Calle Mayor 15; Avenida Diagonal 640; Gran Vía 28
28013 Madrid; 08028 Barcelona; 46002 Valencia
Ibérica; Levante; Castellana; Mediterránea
Suministros; Ingeniería; Logística; Servicios
S.L.; S.A.; S.L.U.

IT EUR it,it,en de 22,10,5,4 1c10n12n UNCR,BCIT,BPMO
Via Roma 21; Corso Buenos Aires 45; Via Toledo 156
20124 Milano; 00184 Roma; 80134 Napoli
Lombarda; Adriatica; Tirrenia; Fratelli Russo
Forniture; Impianti; Servizi; Meccanica
S.r.l.; S.p.A.

PT EUR pt,pt,en sv 23,13,6 21n CGDI,BCOM,TOTA
Rua Augusta 100; Avenida da Liberdade 190; Rua de Santa Catarina 45
1100-048 Lisboa; 1250-147 Lisboa; 4000-442 Porto
Lusitana; Atlântico; Tejo; Douro
Comércio; Serviços; Equipamentos
Lda.; S.A.

PL PLN pl,pl,en sv 23,8,5 24n PKOP,BPKO,INGB
ul. Marszałkowska 84; ul. Floriańska 12; ul. Piotrkowska 101
00-514 Warszawa; 31-019 Kraków; 90-425 Łódź
Wisła; Mazowsze; Bałtyk; Tatry
Handel; Technika; Usługi; Budownictwo
Sp. z o.o.; S.A.

SE SEK sv,sv,en sv 25,12,6 20n ESSE,NDEA,HAND,SWED
Drottninggatan 55; Kungsgatan 12; Avenyn 18
111 21 Stockholm; 411 14 Göteborg; 211 22 Malmö
Nordstjärna; Fjäll; Skärgård; Vasa
Teknik; Handel; Konsult
AB

DK DKK da,da,en de 25 14n DABA,NDEA,JYBA
Strøget 22; Vesterbrogade 41; Søndergade 8
1160 København K; 1620 København V; 8000 Aarhus C
Nordlys; Øresund; Jylland; Havfrue
Handel; Teknik; Service
ApS; A/S
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

#: Month names as suppliers print them in dates (Polish and Czech in the genitive).
_MONTH_NAMES = {
    "en": "January February March April May June July August September October November December",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre "
    "dicembre",
    "nl": "januari februari maart april mei juni juli augustus september oktober november december",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro "
    "dezembro",
    "pl": "stycznia lutego marca kwietnia maja czerwca lipca sierpnia września października "
    "listopada grudnia",
    "sv": "januari februari mars april maj juni juli augusti september oktober november december",
    "da": "januar februar marts april maj juni juli august september oktober november december",
}
_DATE_FORMATS = {
    "en": ("{d} {month} {y}", "{y}-{mm}-{dd}", "{dd}/{mm}/{y}", "{month} {d}, {y}",
           "{d} {mon} {y}"),
    "de": ("{dd}.{mm}.{y}", "{d}. {month} {y}", "{d}. {mon}. {y}"),
    "fr": ("{dd}/{mm}/{y}", "{d} {month} {y}"),
    "es": ("{dd}/{mm}/{y}", "{d} de {month} de {y}", "{dd}-{mm}-{y}"),
    "it": ("{dd}/{mm}/{y}", "{d} {month} {y}", "{dd}.{mm}.{y}"),
    "nl": ("{dd}-{mm}-{y}", "{d} {month} {y}"),
    "pt": ("{dd}/{mm}/{y}", "{d} de {month} de {y}", "{dd}-{mm}-{y}"),
    "pl": ("{dd}.{mm}.{y}", "{d} {month} {y}", "{y}-{mm}-{dd}"),
    "sv": ("{y}-{mm}-{dd}", "{d} {month} {y}"),
    "da": ("{dd}.{mm}.{y}", "{d}. {month} {y}", "{dd}-{mm}-{y}"),
}  # fmt: skip
#: (group separator, decimal mark) per number style.
_NUMBER_STYLES = {
    "en": (",", "."),
    "de": (".", ","),
    "fr": ("\u202f", ","),
    "ch": ("'", "."),
    "sv": ("\u00a0", ","),
}
#: Currencies every generated tenant accepts (a supplier's own currency is among them).
CURRENCIES = ("EUR", "USD", "GBP", "CHF", "PLN", "SEK", "DKK")
#: Symbol printed for a currency, and whether it goes after the amount in ``language``
#: (before it only in English).
SYMBOLS = {"EUR": "€", "GBP": "£", "USD": "$", "PLN": "zł", "SEK": "kr", "DKK": "kr."}


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
        d=value.day,
        dd=f"{value.day:02d}",
        mm=f"{value.month:02d}",
        y=value.year,
        month=month,
        mon=month[:3],
    )
