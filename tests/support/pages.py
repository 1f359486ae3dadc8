"""A German invoice page the grounding tests print their item rows into: its header
(supplier, number, dates, buyer) and its totals, for one row of 8 x 125,00 = 1.000,00."""

NORDWIND_HEAD = """\
Nordwind Technik GmbH
Hauptstraße 12, 10115 Berlin
USt-IdNr.: DE 123 456 789
IBAN: DE89 3704 0044 0532 0130 00
Rechnung Nr. RE-2024-00017          Gesamtbetrag: 1.190,00 EUR
Rechnungsdatum: 05.03.2024
Fällig am: 04.04.2024

Rechnungsempfänger:
Kaufhaus Lindner GmbH
USt-IdNr.: DE 987 654 321

"""
NORDWIND_TOTALS = """
Nettobetrag: 1.000,00
zzgl. 19 % MwSt. auf 1.000,00: 190,00
Rechnungsbetrag: 1.190,00 EUR
"""
