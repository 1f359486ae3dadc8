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
        "date", "datum", "fecha", "data", "dated", "issued", "emisión", "emissione", "émission",
        "rechnungsdatum", "factuurdatum", "fakturadatum",
    ),
    "due_date": (
        "due", "fällig", "échéance", "vencimiento", "scadenza", "vervaldatum", "vencimento",
        "termin", "förfallo", "payable", "zahlbar", "pay by", "betaaldatum", "uiterlijk", "vence",
        "płatn", "förfaller", "senast", "forfald", "betales", "betaling", "payer avant",
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

#: Words that label a date which is not the invoice's issue or due date (delivery,
#: shipping, service, sale or order dates: decoys a model may take). A date whose
#: nearest label carries one of these is refused for issue_date and due_date.
DECOY_DATE_LABELS: tuple[str, ...] = (
    "deliver", "shipped", "shipping", "dispatch", "liefer", "leistung", "versand", "livr",
    "expédi", "entreg", "expedi", "consegn", "ddt", "spedi", "lever", "verzend", "dostaw",
    "sprzeda", "wysył", "order", "bestell", "commande", "pedido", "ordine", "zamówien",
    "beställ", "bestil",
)  # fmt: skip
