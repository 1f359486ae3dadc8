"""Field labels real invoices print, folded (NFKC, casefold), for grounding's tie-breaks.

When a copied value is printed more than once, grounding prefers the occurrence
whose line carries one of the field's labels before it. The lists cover the
languages the generator writes and the common synonyms of each; a missing label
only costs the tie-break (grounding then takes the first or last occurrence),
never a value.
"""

from __future__ import annotations

from collections.abc import Mapping

LABELS: Mapping[str, tuple[str, ...]] = {
    "invoice_number": (
        "invoice", "inv", "no", "nr", "n°", "nº", "#", "number", "nummer", "numéro", "numero",
        "número", "factura", "fattura", "facture", "rechnung", "faktura", "fatura", "document",
    ),
    "issue_date": (
        "date", "datum", "fecha", "data", "dato", "dated", "issued", "emisión", "emissione",
        "émission", "émis", "rechnungsdatum", "factuurdatum", "fakturadatum", "fakturadato",
        # prose: "Rechnung RE-17 vom", "se emitió el", "is opgemaakt op", "została
        # wystawiona", "è stata emessa il", "utfärdades", "er udstedt den", "foi emitida em"
        "vom", "emiti", "opgemaakt", "wystawi", "emess", "utfärda", "udstedt",
        # "Rechnung # RE-20170509/505 von 09.05.2017" (own labels stop at the previous value)
        "von",
    ),
    "due_date": (
        "due", "fällig", "échéance", "vencimiento", "scadenza", "vervaldatum", "vencimento",
        "termin płat", "termin zapł", "förfallo", "payable", "zahlbar", "pay by", "betaaldatum",
        "uiterlijk", "vence", "płatn", "förfaller", "senast", "forfald", "betales", "betaling",
        "payer avant",
        # payment instructions: "Please remit until", "überweisen Sie bitte bis zum"
        "remit", "pay until", "payment until", "pay before", "überweis", "zahlungsziel",
        "entro il", "pagamento entro", "fecha de pago", "pagar antes", "pagar até",
        "data limite", "date limite", "betalen vóór", "betalen voor", "zapłata do",
        "régler avant", "à régler", "pagadero", "pagável", "pagabile", "zahlen sie bis",
        "bitte zahlen", "zapłat", "pago antes", "pagamento até",
        # net payment in a term with a discount: "innerhalb 30 Tagen netto bis", "net by"
        "netto bis", "netto zum", "ohne abzug bis", "net by", "net until",
    ),
    "net_total": (
        "net", "netto", "subtotal", "sub-total", "sous-total", "ht", "imponible", "base",
        "zwischensumme", "imponibile", "excl", "bez", "exkl",
    ),
    "tax_total": (
        "vat", "tax", "mwst", "ust", "tva", "iva", "btw", "moms", "podatek", "imposta",
        "impuesto", "steuer",
    ),
    "gross_total": (
        "total", "gross", "due", "payable", "brutto", "rechnungsbetrag", "gesamt", "ttc",
        "totale", "importe", "bedrag", "pagar", "zapłaty", "summa", "betala", "pagamento",
        "endbetrag", "zahlbetrag", "à payer", "te betalen", "do zapłaty", "att betala",
    ),
    "currency": ("currency", "währung", "devise", "moneda", "valuta", "moeda", "waluta"),
    "iban": ("iban",),
    "supplier.name": (),
}  # fmt: skip

#: Issue-date words of prose that date whatever document the words before them name
#: ("Rechnung RE-17 vom", "Rapport-Nr.: 42389 vom", "Report 7 dated"): an issue date
#: only where that document is the invoice (:func:`pipeline.extraction.label_proof.
#: date_proof`). SmolLM2 took "Rapport-Nr.: 42389 vom 08.03.2018", a work report's
#: date, as the issue date of a FeRD sample (`EN16931_Elektron`), and grounding kept it.
PROSE_DATE_WORDS: tuple[str, ...] = (
    "vom", "von", "dated", "emiti", "opgemaakt", "wystawi", "emess", "utfärda", "udstedt",
)  # fmt: skip

#: Words that label a date which is not the invoice's issue or due date (delivery,
#: shipping, service, sale or order dates: decoys a model may take). A date whose
#: nearest label carries one of these is refused for issue_date and due_date.
DECOY_DATE_LABELS: tuple[str, ...] = (
    "deliver", "shipped", "shipping", "dispatch", "liefer", "leistung", "versand", "livr",
    "expédi", "entreg", "expedi", "consegn", "ddt", "spedi", "lever", "verzend", "dostaw",
    "sprzeda", "wysył", "order", "bestell", "commande", "pedido", "ordine", "zamówien",
    "beställ", "bestil",
    # offers, quotes and prescriptions carry dates of their own
    "angebot", "offer", "quot", "devis", "preventiv", "presupuest", "offerte", "verordnung",
)  # fmt: skip

#: Words of a cash-discount term, folded ("3 % Skonto innerhalb 10 Tagen bis 15.03."): a
#: date in such a term may be the discount's deadline, not the due date.
DISCOUNT_WORDS: tuple[str, ...] = (
    "skonto", "discount", "escompte", "sconto", "descuento", "desconto", "korting",
    "rabat", "rabatt", "rebate",
)  # fmt: skip

#: Words that say a term is the net one, the full amount without discount ("netto bis",
#: "ohne Abzug", "net 30"), folded and matched as whole words.
NET_WORDS: tuple[str, ...] = (
    "netto", "net", "ohne abzug", "without deduction", "sans escompte", "senza sconto",
    "sin descuento", "sem desconto", "zonder korting", "rein netto",
)  # fmt: skip

#: Words that name the invoice itself in a number's label (not the generic "no", "#"
#: that an order or customer number's label carries too).
INVOICE_WORDS: tuple[str, ...] = (
    "invoice", "bill", "facture", "factura", "fattura", "rechnung", "faktur", "fatura",
    "factuur", "beleg", "document", "dokument", "inv.", "bilag", "rg.",
)  # fmt: skip

#: Words between an invoice word and its number ("Faktura nr. 2023/7286", "Nº de
#: factura: FAC/2024/148", "Fatura n.º FT149405"), folded, their dots and colons kept.
NUMBER_WORDS: frozenset[str] = frozenset((
    "no", "no.", "nr", "nr.", "n.", "n°", "nº", "n.º", "n.°", "n.o", "#", "num", "num.", "núm",
    "núm.", "number", "nummer", "numéro", "numero", "número", "nro", "nro.", "de", "di",
    "du", "id", "reference", "ref", "ref.", "réf", "réf.", "référence", "referenz",
    "referencia", "referência", "riferimento", "referentie",
))  # fmt: skip

#: Words that label another document's number: an order or purchase order, the
#: customer or account, a delivery note, a contract. A number whose label names one
#: of these after any invoice word is refused as the invoice number (a model copies
#: "Votre commande: 4504665309" as the invoice's number).
DECOY_NUMBER_LABELS: tuple[str, ...] = (
    "order", "purchase", "p.o.", "po no", "po number", "po#", "bestell", "auftrag",
    "commande", "pedido", "ordine", "zamówien", "beställ", "bestil", "ordre", "encomenda",
    "requisi", "rekvisit",
    "customer", "client", "kund", "klant", "klient", "debiteur", "debtor", "account",
    "deliver", "liefer", "livraison", "albar", "ddt", "leverans", "levering", "dostaw",
    "consegn", "shipment",
    "contract", "vertrag", "contrat", "umow",
    # the supplier's bank: "(BIC BCITIT22XXX)" was copied as the invoice number
    "iban", "bic", "swift",
)  # fmt: skip

#: Reference words that label an order in some languages ("Uw referentie", "Er
#: referens") and the invoice in others ("Invoice reference", "Réf. facture"): a
#: decoy only in a label that names no invoice word at all.
REFERENCE_WORDS: tuple[str, ...] = ("referen", "referên", "ref.", "ref:", "réf", "rif.")

#: Units a quantity is printed with, folded and without their dots ("Std." -> "std"):
#: pieces, time, words, mass, volume, length and area in the languages above. A
#: word right after a number that is one of these is the number's unit, never the
#: first word of a description ("8.568 Wörter Übersetzung, pro Wort" describes
#: "Übersetzung, pro Wort"). A unit missing here only leaves both readings to the
#: model, as before. English singulars that also start product names ("Day pass",
#: "Unit heater") are left out.
UNIT_WORDS: frozenset[str] = frozenset((
    "pcs", "pc", "pce", "pces", "piece", "pieces", "ea", "each", "units",
    "stk", "stck", "st", "stück", "stuk", "stuks", "szt", "sztuk", "pz", "pezzi",
    "pezzo", "ud", "uds", "un", "unid", "unidad", "unidades", "unidade", "pièce",
    "pièces", "kpl", "kom", "ks", "db", "tk", "vnt", "gab", "kos",
    "h", "hr", "hrs", "hours", "std", "stunde", "stunden", "uur", "ore", "ora",
    "godz", "godzin", "godziny", "tim", "timmar", "timer", "heure", "heures", "hora",
    "horas", "min", "days", "tag", "tage", "jour", "jours", "día", "días", "dia",
    "dias", "giorno", "giorni", "dag", "dagen", "dagar", "dni", "months",
    "monat", "monate", "mois", "mes", "meses", "mese", "mesi", "maand", "maanden",
    "månad", "månader", "måned", "måneder", "miesiąc", "miesięcy",
    "words", "wort", "wörter", "mot", "mots", "palabra", "palabras", "parola",
    "parole", "woord", "woorden", "ord", "słowo", "słów", "palavra", "palavras",
    "kg", "g", "mg", "t", "l", "lt", "ltr", "ml", "m", "m2", "m²", "m3", "m³", "km",
    "cm", "mm",
))  # fmt: skip


#: Short words that join a row's parts, folded: connectives before a price or a factor
#: ("à", "zu je", "po", "x", "@"), the tax words of "(VAT 20%)", and the articles and
#: prepositions of running-text rows. A short word beside a description that is none of
#: these (nor a unit or a currency) is part of the description, not its edge.
JOINING_WORDS: frozenset[str] = frozenset((
    "x", "à", "a", "á", "@", "at", "zu", "je", "po", "per", "pro", "por", "til", "for", "of",
    "each", "ea", "za", "la", "le", "de", "du", "da", "di", "del", "van", "av", "und", "and",
    "et", "e", "y", "i", "og", "och", "en", "um", "au", "le", "un", "une", "to", "w", "z",
    "vat", "tax", "mwst", "ust", "tva", "iva", "btw", "moms", "mva", "vat:", "net", "pos",
    "nr", "no", "qty", "is", "are", "was", "cada", "em", "com", "met", "mit", "with", "par",
))  # fmt: skip


def is_unit(word: str) -> bool:
    """Whether ``word`` (as printed, e.g. "Stk.", "godz.") is a quantity's unit."""
    return word.casefold().strip(".,:;") in UNIT_WORDS
