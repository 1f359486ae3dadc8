"""What synthetic invoices sell and to whom: products, units and buyers in every language.

Pure data. One product row per line of ``_CATALOG_TABLE`` (unit, price range,
price decimals, quantity kind); its name in each language is the line of the
same number in that language's block of ``_PRODUCT_NAMES``, so adding a
language is adding a block (a test checks every block has every product).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

#: unit, price range, price decimals, quantity kind (one product per line).
_CATALOG_TABLE = """
h 80 220 2 hours
pcs 200 4800 2 few
pcs 120 690 2 count
pcs 35 140 2 count
pcs 3.5 9.9 2 count
pcs 0.35 4.2 2 many
pcs 2.1 12.5 2 count
h 45 120 2 hours
pcs 15 390 2 one
kg 14 38 2 weight
pcs 90 650 2 one
pcs 49 2400 2 few
pcs 1.2 8.9 2 many
words 0.08 0.2 3 words
l 1.45 1.99 3 volume
"""
_PRODUCT_NAMES = {
    "en": """Consulting services; Software licence, annual; Office chair; Printer toner, black;
    Copy paper A4, 80 g; Steel bracket 40 mm; Cable ties, pack of 100; Installation labour;
    Freight and packaging; Coffee beans; Heating maintenance; Cloud hosting, monthly;
    Safety gloves, size 9; Translation, per word; Diesel fuel""",
    "de": """Beratungsleistung; Softwarelizenz, jährlich; Bürostuhl, ergonomisch;
    Druckertoner, schwarz; Kopierpapier A4, 80 g; Stahlwinkel 40 mm; Kabelbinder, 100 Stück;
    Montagearbeiten; Fracht und Verpackung; Kaffeebohnen; Wartung Heizungsanlage;
    Cloud-Hosting, monatlich; Schutzhandschuhe, Gr. 9; Übersetzung, pro Wort; Dieselkraftstoff""",
    "fr": """Prestation de conseil; Licence annuelle; Chaise de bureau ergonomique; Toner noir;
    Papier copie A4, 80 g; Équerre en acier 40 mm; Colliers, lot de 100;
    Main-d'œuvre d'installation; Transport et emballage; Café en grains;
    Entretien du chauffage; Hébergement cloud; Gants, taille 9; Traduction, par mot; Gazole""",
    "es": """Servicios de consultoría; Licencia de software anual; Silla de oficina ergonómica;
    Tóner de impresora, negro; Papel de copia A4, 80 g; Escuadra de acero 40 mm;
    Bridas, paquete de 100; Mano de obra de instalación; Transporte y embalaje; Café en grano;
    Mantenimiento de calefacción; Alojamiento en la nube, mensual;
    Guantes de seguridad, talla 9; Traducción, por palabra; Gasóleo""",
    "it": """Consulenza; Licenza software annuale; Sedia da ufficio ergonomica;
    Toner per stampante, nero; Carta per fotocopie A4, 80 g; Squadretta in acciaio 40 mm;
    Fascette, conf. da 100; Manodopera di installazione; Trasporto e imballo; Caffè in grani;
    Manutenzione impianto termico; Hosting cloud, mensile; Guanti di sicurezza, taglia 9;
    Traduzione, a parola; Gasolio""",
    "nl": """Adviesdiensten; Softwarelicentie, jaarlijks; Bureaustoel, ergonomisch;
    Printertoner, zwart; Kopieerpapier A4, 80 g; Stalen hoekbeugel 40 mm;
    Kabelbinders, 100 stuks; Installatiewerkzaamheden; Vracht en verpakking; Koffiebonen;
    Onderhoud verwarming; Cloudhosting, maandelijks; Veiligheidshandschoenen, maat 9;
    Vertaling, per woord; Diesel""",
    "pt": """Serviços de consultoria; Licença de software anual; Cadeira de escritório ergonómica;
    Toner de impressora, preto; Papel de fotocópia A4, 80 g; Esquadro de aço 40 mm;
    Abraçadeiras, pacote de 100; Mão de obra de instalação; Transporte e embalagem;
    Café em grão; Manutenção do aquecimento; Alojamento na nuvem, mensal;
    Luvas de segurança, tamanho 9; Tradução, por palavra; Gasóleo""",
    "pl": """Usługi doradcze; Licencja na oprogramowanie, roczna; Krzesło biurowe ergonomiczne;
    Toner do drukarki, czarny; Papier ksero A4, 80 g; Kątownik stalowy 40 mm;
    Opaski kablowe, 100 szt.; Robocizna montażowa; Transport i opakowanie; Kawa ziarnista;
    Serwis ogrzewania; Hosting w chmurze, miesięczny; Rękawice ochronne, rozmiar 9;
    Tłumaczenie, za słowo; Olej napędowy""",
    "sv": """Konsulttjänster; Programvarulicens, årlig; Kontorsstol, ergonomisk;
    Skrivartoner, svart; Kopieringspapper A4, 80 g; Stålvinkel 40 mm; Buntband, 100-pack;
    Installationsarbete; Frakt och emballage; Kaffebönor; Service av värmeanläggning;
    Molnhosting, månadsvis; Skyddshandskar, storlek 9; Översättning, per ord; Diesel""",
    "da": """Konsulentydelser; Softwarelicens, årlig; Kontorstol, ergonomisk; Printertoner, sort;
    Kopipapir A4, 80 g; Stålvinkel 40 mm; Strips, pakke med 100; Installationsarbejde;
    Fragt og emballage; Kaffebønner; Service af varmeanlæg; Cloud-hosting, månedlig;
    Sikkerhedshandsker, str. 9; Oversættelse, pr. ord; Diesel""",
}
#: Unit abbreviations per language: h, pcs, kg, l, words.
_UNIT_TABLE = """
en h pcs kg l words
de Std. Stk. kg l Wörter
fr h pce kg l mots
es h ud. kg l palabras
it ore pz. kg l parole
nl uur st. kg l woorden
pt h un. kg l palavras
pl godz. szt. kg l słów
sv tim st kg l ord
da timer stk. kg l ord
"""
#: Customers (name, street, city, VAT id) per language; they read like supplier blocks.
_BUYER_TABLE = """
en Northfield Retail Ltd; 5 Market Street; York YO1 8AB; GB 402 8817 23
en Castlegate Builders Limited; 19 Mill Lane; Cardiff CF10 1FL; GB 731 5520 94
de Kaufhaus Lindner GmbH; Schillerplatz 2; 70173 Stuttgart; DE 287 114 560
de Weber & Partner Bau AG; Königsallee 60; 40212 Düsseldorf; DE 813 552 901
fr Groupe Verdier SAS; 3 place Bellecour; 69002 Lyon; FR 41 552100554
fr Menuiserie Roux SARL; 17 rue Sainte-Catherine; 33000 Bordeaux; FR 72 438109221
es Distribuciones Navarro S.L.; Calle Alcalá 120; 28009 Madrid; ESB84512370
es Hoteles Costa Brava S.A.; Passeig de Gràcia 55; 08007 Barcelona; ESA08123459
it Ristorazione Bianchi S.r.l.; Via Garibaldi 8; 10122 Torino; IT 04820150012
it Edilizia Ferraro S.p.A.; Viale Europa 30; 40127 Bologna; IT 02391750372
nl Bakkerij Jansen B.V.; Lange Voorhout 9; 2514 ED Den Haag; NL 812345678B01
nl Vlaamse Drukkerij NV; Korenmarkt 3; 9000 Gent; BE 0456.789.123
pt Construções Ferreira Lda.; Rua do Ouro 88; 1100-063 Lisboa; PT 507123456
pt Hotelaria Douro S.A.; Avenida dos Aliados 20; 4000-064 Porto; PT 503987654
pl Hurtownia Nowak Sp. z o.o.; ul. Długa 14; 80-827 Gdańsk; PL 5842517390
pl Zakłady Mechaniczne Kowalski S.A.; ul. Wrocławska 7; 61-838 Poznań; PL 7781234568
sv Lindqvist Bygg AB; Storgatan 4; 753 20 Uppsala; SE 556123456701
sv Norrlands Trä AB; Rådhusesplanaden 9; 903 28 Umeå; SE 556789012301
da Jensen Tømrer ApS; Nørregade 12; 5000 Odense C; DK 31 24 56 78
da Bager Hansen A/S; Algade 3; 4000 Roskilde; DK 29 87 65 43
"""


@dataclass(frozen=True)
class Product:
    """One catalogue row: its name per language, unit kind and price range."""

    names: dict[str, str]
    unit: str
    low: Decimal
    high: Decimal
    places: int
    kind: str


def _parse_catalog() -> tuple[Product, ...]:
    names = {
        language: [part.strip() for part in block.replace("\n", " ").split("; ")]
        for language, block in _PRODUCT_NAMES.items()
    }
    out = []
    for i, row in enumerate(_CATALOG_TABLE.strip().split("\n")):
        unit, low, high, places, kind = row.split()
        by_language = {language: parts[i] for language, parts in names.items()}
        out.append(Product(by_language, unit, Decimal(low), Decimal(high), int(places), kind))
    return tuple(out)


CATALOG = _parse_catalog()
_UNIT_KEYS = ("h", "pcs", "kg", "l", "words")
#: language -> unit kind -> printed unit.
UNITS: dict[str, dict[str, str]] = {
    row.split()[0]: dict(zip(_UNIT_KEYS, row.split()[1:], strict=True))
    for row in _UNIT_TABLE.strip().split("\n")
}
#: language -> customers (name, street, city, VAT id).
BUYERS: dict[str, tuple[tuple[str, str, str, str], ...]] = {}
for _row in _BUYER_TABLE.strip().split("\n"):
    _language, _rest = _row.split(" ", 1)
    _name, _street, _city, _vat = _rest.split("; ")
    BUYERS[_language] = (*BUYERS.get(_language, ()), (_name, _street, _city, _vat))
