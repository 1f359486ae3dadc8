"""The fuzzer's own words: labels, table headers, sentences and item grammars per language.

Written here, independently of the generator's lexicon (``benchmarks/invoices``), so the
fuzzer prints wording the extraction rules were not tuned on: other synonyms, the
abbreviations real invoices use ("EP", "Qté", "Q.tà", "À-pris"), sentences instead of
labels. Every template names its slots in braces; the renderer fills them with the
printed strings whose offsets become the truth's evidence, so a template may put the
slots in any order.

Invariant: every language in :data:`WORDS` has every key of :data:`WORDS` ``"en"`` (the
test checks), and every item grammar holds ``{desc}``, ``{qty}``, ``{price}`` and
``{amount}`` (``{rate}`` only in the grammars of :data:`RATED_ITEM_GRAMMARS`).
"""

from __future__ import annotations

#: Table columns the fuzzer permutes (the position number, where printed, stays first).
COLUMNS = ("description", "quantity", "unit_price", "amount", "rate")

WORDS: dict[str, dict[str, str | tuple[str, ...]]] = {
    "en": {
        "long_date": "{d} {month} {y}",
        "months": (
            "January February March April May June July August September October November December"
        ),
        "date": "{d:02d}/{m:02d}/{y}",
        "title": "INVOICE",
        "number": ("Invoice no.", "Invoice number", "Inv. #"),
        "issue": ("Invoice date", "Date of invoice"),
        "due": ("Due date", "Payment due by"),
        "vat": ("VAT no.", "VAT reg. no."),
        "customer": "Invoice to:",
        "order": "Your order",
        "customer_no": "Customer no.",
        "phone": "Phone",
        "delivery": "Delivery date",
        "register": "Registered in England, company no. {n}",
        "founded": "Established {y}",
        "net": "Net amount",
        "tax_line": "VAT {rate} on {base}:",
        "tax_total": "VAT total",
        "gross": "Amount payable",
        "headers": ("No.", "Description", "Quantity", "Unit price", "Amount", "VAT rate"),
        "abbr": ("#", "Desc.", "Qty", "U/P", "Amt", "VAT"),
        "unit": "pcs",
        "issued": "This invoice was issued on {date}.",
        "due_by": ("Please pay by {date}.", "The amount is payable by {date}."),
        "term": "Please pay within {n} days.",
        "place": "London",
        "subject": "Re: Invoice {number}",
        "salute": "Dear Sir or Madam,",
        "body": "for our deliveries we invoice you as follows:",
        "close": "Yours faithfully,",
        "carried": "Carried forward",
        "page": "Page {p} of {n}",
        "prose": (
            "{qty} {unit} of {desc} at {price} each, totalling {amount}",
            "{desc}, quantity {qty}, price {price} per unit: {amount}",
        ),
        "prose_rated": ("{qty} x {desc} @ {price} = {amount} (VAT {rate})",),
    },
    "de": {
        "long_date": "{d}. {month} {y}",
        "months": (
            "Januar Februar März April Mai Juni Juli August September Oktober November Dezember"
        ),
        "date": "{d:02d}.{m:02d}.{y}",
        "title": "RECHNUNG",
        "number": ("Rechnungsnummer", "Rechnung Nr.", "Beleg-Nr."),
        "issue": ("Rechnungsdatum", "Belegdatum"),
        "due": ("Fällig am", "Zahlbar bis"),
        "vat": ("USt-IdNr.", "UID"),
        "customer": "Rechnungsempfänger:",
        "order": "Ihre Bestellung",
        "customer_no": "Kundennr.",
        "phone": "Tel.",
        "delivery": "Lieferdatum",
        "register": "Amtsgericht Berlin HRB {n}",
        "founded": "Gegründet {y}",
        "net": "Summe netto",
        "tax_line": "zzgl. {rate} USt. auf {base}:",
        "tax_total": "Umsatzsteuer gesamt",
        "gross": "Rechnungsbetrag",
        "headers": ("Pos.", "Bezeichnung", "Menge", "Einzelpreis", "Gesamtpreis", "USt."),
        "abbr": ("Pos", "Bez.", "Mg.", "EP", "GP", "St."),
        "unit": "Stk.",
        "issued": "Diese Rechnung wurde am {date} ausgestellt.",
        "due_by": ("Bitte zahlen Sie bis zum {date}.", "Der Betrag ist zahlbar bis {date}."),
        "term": "Zahlbar innerhalb von {n} Tagen.",
        "place": "Berlin",
        "subject": "Betreff: Rechnung {number}",
        "salute": "Sehr geehrte Damen und Herren,",
        "body": "für unsere Lieferungen berechnen wir Ihnen:",
        "close": "Mit freundlichen Grüßen",
        "carried": "Übertrag",
        "page": "Seite {p} von {n}",
        "prose": (
            "{qty} {unit} {desc} zu je {price}, zusammen {amount}",
            "{desc}: Menge {qty}, Preis {price}, Betrag {amount}",
        ),
        "prose_rated": ("{qty} x {desc} à {price} = {amount} (USt. {rate})",),
    },
    "fr": {
        "long_date": "{d} {month} {y}",
        "months": (
            "janvier février mars avril mai juin juillet août septembre octobre novembre décembre"
        ),
        "date": "{d:02d}/{m:02d}/{y}",
        "title": "FACTURE",
        "number": ("Facture n°", "N° de facture", "Réf. facture"),
        "issue": ("Date de facture", "Émise le"),
        "due": ("Échéance", "À régler avant le"),
        "vat": ("N° TVA intracom.", "TVA intra."),
        "customer": "Facturé à :",
        "order": "Votre commande",
        "customer_no": "Code client",
        "phone": "Tél.",
        "delivery": "Date de livraison",
        "register": "RCS Lyon B {n}",
        "founded": "Depuis {y}",
        "net": "Total HT",
        "tax_line": "TVA {rate} sur {base} :",
        "tax_total": "Total TVA",
        "gross": "Net à payer",
        "headers": ("Réf.", "Désignation", "Quantité", "Prix unitaire", "Montant", "Taux TVA"),
        "abbr": ("N°", "Désign.", "Qté", "PU HT", "Mt HT", "TVA"),
        "unit": "pce",
        "issued": "Facture établie le {date}.",
        "due_by": ("Merci de régler avant le {date}.", "Montant payable au plus tard le {date}."),
        "term": "Paiement à {n} jours.",
        "place": "Lyon",
        "subject": "Objet : facture {number}",
        "salute": "Madame, Monsieur,",
        "body": "pour nos livraisons nous vous facturons :",
        "close": "Veuillez agréer nos salutations distinguées.",
        "carried": "Report",
        "page": "Page {p} sur {n}",
        "prose": (
            "{qty} {unit} {desc} à {price} l'unité, soit {amount}",
            "{desc} : quantité {qty}, prix {price}, montant {amount}",
        ),
        "prose_rated": ("{qty} x {desc} à {price} = {amount} (TVA {rate})",),
    },
    "es": {
        "long_date": "{d} de {month} de {y}",
        "months": (
            "enero febrero marzo abril mayo junio "
            "julio agosto septiembre octubre noviembre diciembre"
        ),
        "date": "{d:02d}/{m:02d}/{y}",
        "title": "FACTURA",
        "number": ("Factura nº", "Número de factura", "Nº fra."),
        "issue": ("Fecha de factura", "Fecha de emisión"),
        "due": ("Vencimiento", "Fecha de pago"),
        "vat": ("NIF-IVA", "CIF"),
        "customer": "Cliente:",
        "order": "Su pedido",
        "customer_no": "Nº cliente",
        "phone": "Tel.",
        "delivery": "Fecha de entrega",
        "register": "Registro Mercantil de Madrid, hoja M-{n}",
        "founded": "Desde {y}",
        "net": "Base imponible",
        "tax_line": "IVA {rate} sobre {base}:",
        "tax_total": "Total IVA",
        "gross": "Total factura",
        "headers": ("Línea", "Concepto", "Cantidad", "Precio unitario", "Importe", "% IVA"),
        "abbr": ("Nº", "Desc.", "Cant.", "P.U.", "Imp.", "IVA"),
        "unit": "ud.",
        "issued": "Factura emitida el {date}.",
        "due_by": ("Rogamos el pago antes del {date}.", "Importe pagadero hasta el {date}."),
        "term": "Pago a {n} días.",
        "place": "Madrid",
        "subject": "Asunto: factura {number}",
        "salute": "Estimados señores:",
        "body": "por nuestros suministros les facturamos:",
        "close": "Atentamente,",
        "carried": "Suma y sigue",
        "page": "Página {p} de {n}",
        "prose": (
            "{qty} {unit} de {desc} a {price} cada una, total {amount}",
            "{desc}: cantidad {qty}, precio {price}, importe {amount}",
        ),
        "prose_rated": ("{qty} x {desc} a {price} = {amount} (IVA {rate})",),
    },
    "it": {
        "long_date": "{d} {month} {y}",
        "months": (
            "gennaio febbraio marzo aprile maggio giugno "
            "luglio agosto settembre ottobre novembre dicembre"
        ),
        "date": "{d:02d}/{m:02d}/{y}",
        "title": "FATTURA",
        "number": ("Fattura n.", "Numero fattura", "N. documento"),
        "issue": ("Data fattura", "Data documento"),
        "due": ("Scadenza", "Pagamento entro il"),
        "vat": ("P. IVA", "Partita IVA"),
        "customer": "Spett.le",
        "order": "Vs. ordine",
        "customer_no": "Cod. cliente",
        "phone": "Tel.",
        "delivery": "Data consegna",
        "register": "REA MI-{n}",
        "founded": "Dal {y}",
        "net": "Imponibile",
        "tax_line": "IVA {rate} su {base}:",
        "tax_total": "Totale IVA",
        "gross": "Totale documento",
        "headers": ("Riga", "Descrizione", "Quantità", "Prezzo unitario", "Importo", "Aliquota"),
        "abbr": ("N.", "Descr.", "Q.tà", "Pr. un.", "Imp.", "IVA"),
        "unit": "pz",
        "issued": "Fattura emessa il {date}.",
        "due_by": ("Si prega di pagare entro il {date}.", "Importo da saldare entro il {date}."),
        "term": "Pagamento a {n} giorni.",
        "place": "Milano",
        "subject": "Oggetto: fattura {number}",
        "salute": "Gentili Signori,",
        "body": "per le nostre forniture vi addebitiamo:",
        "close": "Distinti saluti",
        "carried": "A riportare",
        "page": "Pagina {p} di {n}",
        "prose": (
            "{qty} {unit} di {desc} a {price} cad., totale {amount}",
            "{desc}: quantità {qty}, prezzo {price}, importo {amount}",
        ),
        "prose_rated": ("{qty} x {desc} a {price} = {amount} (IVA {rate})",),
    },
    "nl": {
        "long_date": "{d} {month} {y}",
        "months": (
            "januari februari maart april mei juni "
            "juli augustus september oktober november december"
        ),
        "date": "{d:02d}-{m:02d}-{y}",
        "title": "FACTUUR",
        "number": ("Factuurnummer", "Factuur nr.", "Documentnr."),
        "issue": ("Factuurdatum", "Datum factuur"),
        "due": ("Vervaldatum", "Te betalen voor"),
        "vat": ("Btw-nummer", "BTW-nr."),
        "customer": "Factuuradres:",
        "order": "Uw order",
        "customer_no": "Klantnummer",
        "phone": "Tel.",
        "delivery": "Leverdatum",
        "register": "KvK {n}",
        "founded": "Opgericht {y}",
        "net": "Totaal excl. btw",
        "tax_line": "Btw {rate} over {base}:",
        "tax_total": "Totaal btw",
        "gross": "Te betalen",
        "headers": ("Regel", "Omschrijving", "Aantal", "Stukprijs", "Bedrag", "Btw-tarief"),
        "abbr": ("Nr", "Omschr.", "Aant.", "Prijs/st", "Bedr.", "Btw"),
        "unit": "st.",
        "issued": "Deze factuur is opgemaakt op {date}.",
        "due_by": ("Graag betalen vóór {date}.", "Het bedrag dient uiterlijk {date} betaald."),
        "term": "Betaling binnen {n} dagen.",
        "place": "Utrecht",
        "subject": "Betreft: factuur {number}",
        "salute": "Geachte heer, mevrouw,",
        "body": "voor onze leveringen brengen wij u in rekening:",
        "close": "Met vriendelijke groet,",
        "carried": "Transport",
        "page": "Pagina {p} van {n}",
        "prose": (
            "{qty} {unit} {desc} à {price} per stuk, totaal {amount}",
            "{desc}: aantal {qty}, prijs {price}, bedrag {amount}",
        ),
        "prose_rated": ("{qty} x {desc} à {price} = {amount} (btw {rate})",),
    },
    "pt": {
        "long_date": "{d} de {month} de {y}",
        "months": (
            "janeiro fevereiro março abril maio junho "
            "julho agosto setembro outubro novembro dezembro"
        ),
        "date": "{d:02d}/{m:02d}/{y}",
        "title": "FATURA",
        "number": ("Fatura n.º", "Número da fatura", "Doc. n.º"),
        "issue": ("Data da fatura", "Data de emissão"),
        "due": ("Vencimento", "Data limite de pagamento"),
        "vat": ("NIF", "Contribuinte n.º"),
        "customer": "Exmo(s). Sr(s).",
        "order": "V/ encomenda",
        "customer_no": "N.º cliente",
        "phone": "Tel.",
        "delivery": "Data de entrega",
        "register": "Conserv. Reg. Com. Lisboa, matrícula {n}",
        "founded": "Desde {y}",
        "net": "Total sem IVA",
        "tax_line": "IVA {rate} sobre {base}:",
        "tax_total": "Total IVA",
        "gross": "Total a pagar",
        "headers": ("Linha", "Designação", "Quantidade", "Preço unitário", "Valor", "Taxa IVA"),
        "abbr": ("N.º", "Desig.", "Qtd.", "P. unit.", "Valor", "IVA"),
        "unit": "un.",
        "issued": "Fatura emitida em {date}.",
        "due_by": ("Agradecemos o pagamento até {date}.", "Valor a pagar até {date}."),
        "term": "Pagamento a {n} dias.",
        "place": "Lisboa",
        "subject": "Assunto: fatura {number}",
        "salute": "Exmos. Senhores,",
        "body": "pelos nossos fornecimentos faturamos o seguinte:",
        "close": "Com os melhores cumprimentos,",
        "carried": "A transportar",
        "page": "Página {p} de {n}",
        "prose": (
            "{qty} {unit} de {desc} a {price} cada, no total de {amount}",
            "{desc}: quantidade {qty}, preço {price}, valor {amount}",
        ),
        "prose_rated": ("{qty} x {desc} a {price} = {amount} (IVA {rate})",),
    },
    "pl": {
        "long_date": "{d} {month} {y}",
        "months": (
            "stycznia lutego marca kwietnia maja czerwca "
            "lipca sierpnia września października listopada grudnia"
        ),
        "date": "{d:02d}.{m:02d}.{y}",
        "title": "FAKTURA VAT",
        "number": ("Faktura nr", "Numer faktury", "Nr dokumentu"),
        "issue": ("Data wystawienia", "Data faktury"),
        "due": ("Termin płatności", "Płatne do"),
        "vat": ("NIP", "NIP UE"),
        "customer": "Nabywca:",
        "order": "Zamówienie",
        "customer_no": "Nr klienta",
        "phone": "Tel.",
        "delivery": "Data dostawy",
        "register": "KRS {n}",
        "founded": "Od {y} roku",
        "net": "Razem netto",
        "tax_line": "VAT {rate} od {base}:",
        "tax_total": "Razem VAT",
        "gross": "Do zapłaty",
        "headers": ("Lp.", "Nazwa towaru", "Ilość", "Cena jedn.", "Wartość", "Stawka"),
        "abbr": ("Lp", "Nazwa", "Il.", "C. jedn.", "Wart.", "VAT"),
        "unit": "szt.",
        "issued": "Faktura wystawiona dnia {date}.",
        "due_by": ("Prosimy o zapłatę do {date}.", "Kwota płatna do dnia {date}."),
        "term": "Płatne w ciągu {n} dni.",
        "place": "Kraków",
        "subject": "Dotyczy: faktura {number}",
        "salute": "Szanowni Państwo,",
        "body": "za nasze dostawy obciążamy Państwa kwotą:",
        "close": "Z poważaniem",
        "carried": "Z przeniesienia",
        "page": "Strona {p} z {n}",
        "prose": (
            "{qty} {unit} {desc} po {price} za sztukę, razem {amount}",
            "{desc}: ilość {qty}, cena {price}, wartość {amount}",
        ),
        "prose_rated": ("{qty} x {desc} po {price} = {amount} (VAT {rate})",),
    },
    "sv": {
        "long_date": "{d} {month} {y}",
        "months": (
            "januari februari mars april maj juni juli augusti september oktober november december"
        ),
        "date": "{y}-{m:02d}-{d:02d}",
        "title": "FAKTURA",
        "number": ("Fakturanummer", "Faktura nr", "Fakt.nr"),
        "issue": ("Fakturadatum", "Datum"),
        "due": ("Förfallodatum", "Betalas senast"),
        "vat": ("Momsreg.nr", "VAT-nr"),
        "customer": "Faktureras till:",
        "order": "Er order",
        "customer_no": "Kundnr",
        "phone": "Tel.",
        "delivery": "Leveransdatum",
        "register": "Org.nr 556{n}",
        "founded": "Sedan {y}",
        "net": "Summa exkl. moms",
        "tax_line": "Moms {rate} på {base}:",
        "tax_total": "Moms totalt",
        "gross": "Att betala",
        "headers": ("Rad", "Benämning", "Antal", "Styckpris", "Belopp", "Momssats"),
        "abbr": ("Nr", "Benämn.", "Ant.", "À-pris", "Summa", "Moms"),
        "unit": "st",
        "issued": "Fakturan utfärdades den {date}.",
        "due_by": ("Vänligen betala senast {date}.", "Beloppet ska vara betalt senast {date}."),
        "term": "Betalning inom {n} dagar.",
        "place": "Göteborg",
        "subject": "Ärende: faktura {number}",
        "salute": "Hej,",
        "body": "för våra leveranser fakturerar vi följande:",
        "close": "Med vänliga hälsningar",
        "carried": "Att överföra",
        "page": "Sida {p} av {n}",
        "prose": (
            "{qty} {unit} {desc} à {price} per styck, totalt {amount}",
            "{desc}: antal {qty}, pris {price}, belopp {amount}",
        ),
        "prose_rated": ("{qty} x {desc} à {price} = {amount} (moms {rate})",),
    },
    "da": {
        "long_date": "{d}. {month} {y}",
        "months": (
            "januar februar marts april maj juni juli august september oktober november december"
        ),
        "date": "{d:02d}.{m:02d}.{y}",
        "title": "FAKTURA",
        "number": ("Fakturanr.", "Faktura nummer", "Bilagsnr."),
        "issue": ("Fakturadato", "Dato"),
        "due": ("Forfaldsdato", "Betales senest"),
        "vat": ("CVR-nr.", "Momsnr."),
        "customer": "Faktureres til:",
        "order": "Jeres ordre",
        "customer_no": "Kundenr.",
        "phone": "Tlf.",
        "delivery": "Leveringsdato",
        "register": "Reg. i Erhvervsstyrelsen {n}",
        "founded": "Siden {y}",
        "net": "Subtotal ekskl. moms",
        "tax_line": "Moms {rate} af {base}:",
        "tax_total": "Moms i alt",
        "gross": "Total at betale",
        "headers": ("Linje", "Beskrivelse", "Antal", "Enhedspris", "Beløb", "Momssats"),
        "abbr": ("Nr.", "Beskr.", "Ant.", "Stk.pris", "Beløb", "Moms"),
        "unit": "stk.",
        "issued": "Fakturaen er udstedt den {date}.",
        "due_by": ("Venligst betal senest {date}.", "Beløbet forfalder til betaling {date}."),
        "term": "Betaling inden {n} dage.",
        "place": "Aarhus",
        "subject": "Vedr.: faktura {number}",
        "salute": "Kære kunde,",
        "body": "for vores leverancer fakturerer vi følgende:",
        "close": "Med venlig hilsen",
        "carried": "Transport",
        "page": "Side {p} af {n}",
        "prose": (
            "{qty} {unit} {desc} à {price} pr. stk., i alt {amount}",
            "{desc}: antal {qty}, pris {price}, beløb {amount}",
        ),
        "prose_rated": ("{qty} x {desc} à {price} = {amount} (moms {rate})",),
    },
}

#: The e-mail item list of issue 41 ("- Widget A: 3 x 12.50 = 37.50"), any language.
EMAIL_ITEM_GRAMMARS = (
    "- {desc}: {qty} x {price} = {amount}",
    "* {desc} - {qty} x {price} - {amount}",
)
RATED_ITEM_GRAMMARS = ("prose_rated",)

#: Customers printed in the bill-to block (their VAT ids are decoys for the supplier's).
CUSTOMERS = (
    ("Harbour Lane Trading Ltd", "12 Quay Street", "Bristol BS1 4DJ"),
    ("Müller & Söhne KG", "Hauptstraße 41", "80331 München"),
    ("Atelier Moreau SARL", "5 rue des Lilas", "31000 Toulouse"),
    ("Construcciones Ribera SL", "Calle Mayor 18", "46001 Valencia"),
)


def words(language: str) -> dict[str, str | tuple[str, ...]]:
    """The vocabulary of ``language`` (English for a language the fuzzer does not know)."""
    return WORDS.get(language, WORDS["en"])


def word(language: str, key: str) -> str:
    """One fixed word of ``language``'s vocabulary."""
    value = words(language)[key]
    if not isinstance(value, str):
        raise TypeError(f"{key!r} is a list of choices, not one word")
    return value


def choices(language: str, key: str) -> tuple[str, ...]:
    """Synonyms or templates of ``key``; one fixed word is a list of one."""
    value = words(language)[key]
    return (value,) if isinstance(value, str) else value
