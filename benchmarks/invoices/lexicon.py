"""Words synthetic invoices print, per language, with the synonyms real suppliers use.

Each language block maps a label key to its alternatives (``|``); the plan draws
one alternative per key and invoice, so two invoices in one language rarely
share all their labels and a model trained on them learns the field, not the
word. Keys: the document title and header fields, table columns, totals,
decoy fields (order and customer numbers, phone, delivery date: values a model
must not take for the invoice number or dates), legal footer lines (register
number, share capital with a currency: not a price of the invoice) and the
sentences of the ``prose`` layout (``{field}`` marks a value whose evidence span
is recorded). Templates with ``{rate}``/``{base}``/``{days}``/... are filled in
by the layout.
"""

from __future__ import annotations

_LEXICON = """
[en]
invoice = INVOICE | Invoice | TAX INVOICE
number = Invoice no. | Invoice # | Invoice number | Document number | Bill number
date = Invoice date | Date of issue | Issue date | Date
due = Due date | Payment due | Due by
vat_id = VAT No. | VAT reg. no. | VAT ID
bill_to = Bill to | Customer | Invoice to | Sold to
pos = Pos | No. | #
desc = Description | Item | Service
qty = Qty | Quantity
price = Unit price | Rate | Price
amount = Amount | Line total
tax = VAT | Tax
net = Net total | Subtotal | Total excl. VAT
tax_line = VAT {rate} on {base} | VAT at {rate} on {base}
tax_total = VAT | Total VAT | Tax total
gross = Total due | Total | Amount due | Invoice total
currency = Currency
bank = Bank details | Payment details
page = Page
terms = Payable within {days} days of the invoice date. | Payment terms: {days} days net.
thanks = Thank you for your business. | We appreciate your order.
payable = Amount payable
order = Order no. | PO number | Your order
customer_no = Customer no. | Account no. | Customer ID
phone = Phone | Tel.
delivery = Delivery date | Shipped on
capital = Share capital: {amount} {cur} | Issued share capital {amount} {cur}
register = Registered in England and Wales no. {reg} | Company no. {reg}
intro = This invoice {number} was issued on {issue} and is payable by {due}.
item = {qty} {desc} at {price} each: {amount} ({tax} {rate})
net_s = The net total is {net}.
tax_s = Total VAT: {tax}.
gross_s = Please pay {gross}.
bank_s = Please transfer the amount to IBAN {iban} (BIC {bic}).

[de]
invoice = RECHNUNG | Rechnung
number = Rechnungsnummer | Rechnungs-Nr. | Rechnung Nr. | Belegnummer
date = Rechnungsdatum | Datum | Ausstellungsdatum
due = Fällig am | Zahlbar bis | Fälligkeitsdatum
vat_id = USt-IdNr. | USt-ID | Umsatzsteuer-ID
bill_to = Rechnungsempfänger | Kunde | Rechnungsadresse
pos = Pos. | Nr.
desc = Bezeichnung | Artikel | Leistung
qty = Menge | Anzahl
price = Einzelpreis | E-Preis | Preis
amount = Betrag | Gesamt
tax = MwSt. | USt.
net = Nettobetrag | Summe netto | Zwischensumme
tax_line = zzgl. {rate} MwSt. auf {base} | {rate} USt. auf {base}
tax_total = MwSt. | Umsatzsteuer | Summe MwSt.
gross = Rechnungsbetrag | Gesamtbetrag | Endbetrag | Zu zahlen
currency = Währung
bank = Bankverbindung
page = Seite
terms = Zahlbar innerhalb von {days} Tagen ohne Abzug. | Zahlungsziel: {days} Tage netto.
thanks = Vielen Dank für Ihren Auftrag. | Wir danken für Ihr Vertrauen.
payable = Zahlbetrag
order = Bestellnummer | Ihre Bestellung | Auftragsnr.
customer_no = Kundennummer | Kunden-Nr.
phone = Telefon | Tel.
delivery = Lieferdatum | Leistungsdatum
capital = Stammkapital: {amount} {cur} | Grundkapital {amount} {cur}
register = Amtsgericht Berlin HRB {reg} | Registergericht HRB {reg}
intro = Mit dieser Rechnung {number} vom {issue} berechnen wir Folgendes, zahlbar bis {due}.
item = {qty} {desc} zu je {price}: {amount} ({tax} {rate})
net_s = Der Nettobetrag beträgt {net}.
tax_s = Die Umsatzsteuer beträgt {tax}.
gross_s = Bitte überweisen Sie {gross}.
bank_s = Bitte zahlen Sie auf IBAN {iban} (BIC {bic}).

[fr]
invoice = FACTURE | Facture
number = N° de facture | Facture n° | Numéro de facture | Réf. facture
date = Date de facture | Date d'émission | Émise le
due = Date d'échéance | Échéance | À payer avant le
vat_id = N° TVA intracom. | TVA intracommunautaire | N° TVA
bill_to = Facturé à | Client | Adresse de facturation
pos = Réf. | N°
desc = Désignation | Description
qty = Qté | Quantité
price = Prix unitaire HT | P.U. HT
amount = Montant HT | Total HT
tax = TVA
net = Total HT | Montant HT | Sous-total HT
tax_line = TVA {rate} sur {base} | TVA à {rate} sur {base}
tax_total = TVA | Total TVA | Montant TVA
gross = Total TTC | Net à payer | Montant TTC
currency = Devise
bank = Coordonnées bancaires | RIB
page = Page
terms = Paiement à {days} jours date de facture. | Règlement à {days} jours.
thanks = Merci de votre confiance.
payable = Montant à payer
order = N° de commande | Votre commande | Bon de commande
customer_no = N° client | Code client
phone = Tél. | Téléphone
delivery = Date de livraison | Livré le
capital = SARL au capital de {amount} {cur} | Capital social {amount} {cur}
register = RCS Paris {reg} | SIRET {reg}
intro = La présente facture {number} a été émise le {issue} et est payable au plus tard le {due}.
item = {qty} {desc} à {price} l'unité : {amount} ({tax} {rate})
net_s = Le total HT s'élève à {net}.
tax_s = Le montant de la TVA est de {tax}.
gross_s = Montant total à régler : {gross}.
bank_s = Merci de régler par virement sur l'IBAN {iban} (BIC {bic}).

[es]
invoice = FACTURA | Factura
number = Nº de factura | Factura n.º | Número de factura | Factura
date = Fecha de factura | Fecha de emisión | Fecha
due = Fecha de vencimiento | Vencimiento
vat_id = NIF-IVA | CIF | NIF
bill_to = Facturar a | Cliente | Datos del cliente
pos = Pos. | Nº
desc = Descripción | Concepto
qty = Cant. | Cantidad
price = Precio unitario | Precio
amount = Importe
tax = IVA
net = Base imponible | Subtotal | Total sin IVA
tax_line = IVA {rate} sobre {base} | IVA al {rate} s/ {base}
tax_total = IVA | Total IVA | Cuota IVA
gross = Total factura | Total a pagar | Importe total
currency = Moneda | Divisa
bank = Datos bancarios | Domiciliación bancaria
page = Página
terms = Pago a {days} días fecha factura. | Forma de pago: transferencia a {days} días.
thanks = Gracias por su confianza.
payable = Importe a pagar
order = Nº de pedido | Su pedido | Pedido
customer_no = Nº de cliente | Código cliente
phone = Tel. | Teléfono
delivery = Fecha de entrega | Entregado el
capital = Capital social: {amount} {cur} | Capital social {amount} {cur}
register = Inscrita en el Registro Mercantil de Madrid, tomo {reg} | Reg. Merc. {reg}
intro = La presente factura {number} se emitió el {issue} y vence el {due}.
item = {qty} {desc} a {price} cada uno: {amount} ({tax} {rate})
net_s = La base imponible asciende a {net}.
tax_s = El IVA total es de {tax}.
gross_s = Total a pagar: {gross}.
bank_s = Rogamos transfieran el importe a la cuenta IBAN {iban} (BIC {bic}).

[it]
invoice = FATTURA | Fattura
number = Fattura n. | Numero fattura | N. documento | Fattura nr.
date = Data fattura | Data emissione | Data
due = Scadenza | Data di scadenza | Scadenza pagamento
vat_id = P. IVA | Partita IVA | P.IVA
bill_to = Cliente | Spett.le | Destinatario
pos = Pos. | N.
desc = Descrizione | Articolo
qty = Q.tà | Quantità
price = Prezzo unitario | Prezzo un.
amount = Importo
tax = IVA
net = Imponibile | Totale imponibile | Subtotale
tax_line = IVA {rate} su {base} | IVA al {rate} su {base}
tax_total = IVA | Totale IVA | Imposta
gross = Totale fattura | Totale documento | Totale da pagare
currency = Valuta
bank = Coordinate bancarie | Modalità di pagamento
page = Pagina
terms = Pagamento a {days} giorni data fattura. | Bonifico bancario a {days} gg d.f.
thanks = Grazie per la preferenza.
payable = Importo da pagare
order = Ordine n. | Vs. ordine | Rif. ordine
customer_no = Codice cliente | Cod. cliente
phone = Tel.
delivery = Data consegna | DDT del
capital = Capitale sociale {amount} {cur} i.v. | Cap. soc. {amount} {cur}
register = R.E.A. MI-{reg} | Registro Imprese di Milano n. {reg}
intro = La presente fattura {number} è stata emessa il {issue} con scadenza il {due}.
item = {qty} {desc} a {price} cad.: {amount} ({tax} {rate})
net_s = L'imponibile ammonta a {net}.
tax_s = L'IVA complessiva è di {tax}.
gross_s = Totale da pagare: {gross}.
bank_s = Si prega di effettuare il bonifico sull'IBAN {iban} (BIC {bic}).

[nl]
invoice = FACTUUR | Factuur
number = Factuurnummer | Factuurnr. | Factuur nr.
date = Factuurdatum | Datum
due = Vervaldatum | Uiterste betaaldatum
vat_id = Btw-nummer | BTW-nr. | Btw-id
bill_to = Factuuradres | Klant | Aan
pos = Pos. | Nr.
desc = Omschrijving
qty = Aantal
price = Stukprijs | Prijs per eenheid
amount = Bedrag
tax = Btw
net = Subtotaal | Totaal excl. btw
tax_line = Btw {rate} over {base} | {rate} btw over {base}
tax_total = Btw | Totaal btw
gross = Totaal incl. btw | Te betalen | Totaalbedrag
currency = Valuta
bank = Bankgegevens
page = Pagina
terms = Betaling binnen {days} dagen na factuurdatum. | Gelieve binnen {days} dagen te betalen.
thanks = Bedankt voor uw opdracht.
payable = Te betalen
order = Ordernummer | Uw referentie | Bestelnr.
customer_no = Klantnummer | Debiteurnr.
phone = Tel. | Telefoon
delivery = Leverdatum | Geleverd op
capital = Geplaatst kapitaal: {amount} {cur} | Maatschappelijk kapitaal {amount} {cur}
register = KvK {reg} | Ondernemingsnummer {reg}
intro = Deze factuur {number} is opgemaakt op {issue} en moet uiterlijk {due} worden voldaan.
item = {qty} {desc} à {price} per stuk: {amount} ({tax} {rate})
net_s = Het subtotaal bedraagt {net}.
tax_s = De btw bedraagt {tax}.
gross_s = Te betalen: {gross}.
bank_s = Gelieve het bedrag over te maken op IBAN {iban} (BIC {bic}).

[pt]
invoice = FATURA | Fatura
number = Fatura n.º | Nº da fatura | Número da fatura | Documento n.º
date = Data da fatura | Data de emissão | Data
due = Data de vencimento | Vencimento
vat_id = NIF | Contribuinte n.º | NIPC
bill_to = Cliente | Faturar a | Exmo(s). Sr(s).
pos = Pos. | Nº
desc = Descrição | Designação
qty = Qtd. | Quantidade
price = Preço unitário | Preço unit.
amount = Valor | Total
tax = IVA
net = Total ilíquido | Subtotal | Base tributável
tax_line = IVA {rate} sobre {base} | IVA à taxa de {rate} s/ {base}
tax_total = IVA | Total IVA
gross = Total a pagar | Total da fatura | Total
currency = Moeda
bank = Dados bancários | Pagamento por transferência
page = Página
terms = Pagamento a {days} dias. | Condições de pagamento: {days} dias.
thanks = Obrigado pela sua preferência.
payable = Montante a pagar
order = Encomenda n.º | N/ referência | Requisição
customer_no = N.º de cliente | Código de cliente
phone = Tel. | Telefone
delivery = Data de entrega | Data de expedição
capital = Capital social: {amount} {cur} | Capital social {amount} {cur}
register = Matrícula na C.R.C. de Lisboa n.º {reg} | C.R.C. Porto {reg}
intro = A presente fatura {number} foi emitida em {issue} e vence em {due}.
item = {qty} {desc} a {price} cada: {amount} ({tax} {rate})
net_s = O total ilíquido é de {net}.
tax_s = O IVA totaliza {tax}.
gross_s = Total a pagar: {gross}.
bank_s = Queira transferir o montante para o IBAN {iban} (BIC {bic}).

[pl]
invoice = FAKTURA | Faktura VAT | FAKTURA VAT
number = Nr faktury | Faktura nr | Numer faktury
date = Data wystawienia | Data faktury
due = Termin płatności | Płatne do
vat_id = NIP | NIP UE
bill_to = Nabywca | Odbiorca | Kupujący
pos = Lp.
desc = Nazwa towaru lub usługi | Nazwa | Opis
qty = Ilość
price = Cena jedn. netto | Cena netto
amount = Wartość netto | Wartość
tax = VAT
net = Razem netto | Wartość netto | Suma netto
tax_line = VAT {rate} od {base} | Stawka VAT {rate} od {base}
tax_total = VAT | Kwota VAT | Razem VAT
gross = Do zapłaty | Razem brutto | Wartość brutto
currency = Waluta
bank = Dane do przelewu | Konto bankowe
page = Strona
terms = Płatność przelewem w terminie {days} dni. | Termin płatności: {days} dni.
thanks = Dziękujemy za współpracę.
payable = Kwota do zapłaty
order = Nr zamówienia | Zamówienie
customer_no = Nr klienta | Kod klienta
phone = Tel.
delivery = Data dostawy | Data sprzedaży
capital = Kapitał zakładowy: {amount} {cur} | Kapitał zakładowy {amount} {cur}
register = KRS {reg} | Sąd Rejonowy, KRS {reg}
intro = Niniejsza faktura {number} została wystawiona {issue} i jest płatna do {due}.
item = {qty} {desc} po {price} za sztukę: {amount} ({tax} {rate})
net_s = Wartość netto wynosi {net}.
tax_s = Kwota VAT wynosi {tax}.
gross_s = Do zapłaty: {gross}.
bank_s = Prosimy o przelew na rachunek IBAN {iban} (BIC {bic}).

[sv]
invoice = FAKTURA | Faktura
number = Fakturanummer | Fakturanr | Faktura nr
date = Fakturadatum | Datum
due = Förfallodatum | Förfaller | Att betala senast
vat_id = Momsreg.nr | VAT-nummer | Momsnr
bill_to = Kund | Faktureras till | Fakturaadress
pos = Pos | Nr
desc = Beskrivning | Artikel
qty = Antal
price = À-pris | Pris
amount = Belopp | Summa
tax = Moms
net = Netto | Summa exkl. moms | Delsumma
tax_line = Moms {rate} på {base} | Moms {rate} av {base}
tax_total = Moms | Summa moms
gross = Att betala | Totalt | Summa att betala
currency = Valuta
bank = Bankuppgifter | Betalningsinformation
page = Sida
terms = Betalningsvillkor {days} dagar netto. | Betalas inom {days} dagar.
thanks = Tack för ert köp! | Tack för beställningen.
payable = Att betala
order = Ordernummer | Er referens | Beställning
customer_no = Kundnummer | Kundnr
phone = Tel. | Telefon
delivery = Leveransdatum | Levererat
capital = Aktiekapital: {amount} {cur} | Aktiekapital {amount} {cur}
register = Org.nr {reg} | Styrelsens säte: Stockholm, org.nr {reg}
intro = Denna faktura {number} utfärdades {issue} och ska vara betald senast {due}.
item = {qty} {desc} à {price} per st: {amount} ({tax} {rate})
net_s = Nettobeloppet uppgår till {net}.
tax_s = Momsen uppgår till {tax}.
gross_s = Att betala: {gross}.
bank_s = Vänligen betala till IBAN {iban} (BIC {bic}).

[da]
invoice = FAKTURA | Faktura
number = Fakturanummer | Fakturanr. | Faktura nr.
date = Fakturadato | Dato
due = Forfaldsdato | Betales senest | Sidste rettidige betaling
vat_id = CVR-nr. | Momsnr. | SE-nr.
bill_to = Kunde | Faktureres til
pos = Pos. | Nr.
desc = Beskrivelse | Varenavn
qty = Antal
price = Stykpris | Enhedspris
amount = Beløb | I alt
tax = Moms
net = Subtotal | I alt ekskl. moms | Netto
tax_line = Moms {rate} af {base} | {rate} moms af {base}
tax_total = Moms | Moms i alt
gross = I alt inkl. moms | At betale | Total
currency = Valuta
bank = Bankoplysninger | Betalingsoplysninger
page = Side
terms = Betalingsbetingelser: netto {days} dage. | Betales inden {days} dage.
thanks = Tak for handlen. | Tak for ordren.
payable = At betale
order = Ordrenummer | Jeres reference | Rekvisition
customer_no = Kundenummer | Kundenr.
phone = Tlf. | Telefon
delivery = Leveringsdato | Leveret
capital = Selskabskapital: {amount} {cur} | Aktiekapital {amount} {cur}
register = CVR {reg} | CVR-nr. {reg}
intro = Denne faktura {number} er udstedt den {issue} og forfalder til betaling den {due}.
item = {qty} {desc} à {price} pr. stk.: {amount} ({tax} {rate})
net_s = Subtotalen udgør {net}.
tax_s = Momsen udgør {tax}.
gross_s = At betale: {gross}.
bank_s = Beløbet bedes overført til IBAN {iban} (BIC {bic}).
"""


def _parse(text: str) -> dict[str, dict[str, tuple[str, ...]]]:
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for block in text.strip().split("\n\n"):
        head, *rows = block.split("\n")
        entries = {}
        for row in rows:
            key, _, alternatives = row.partition(" = ")
            entries[key] = tuple(alt.strip() for alt in alternatives.split(" | "))
        out[head.strip("[]")] = entries
    return out


#: language -> label key -> the alternatives one is drawn from.
LEXICON = _parse(_LEXICON)
#: Every generated language, in a fixed order (``en`` first: the fallback).
LANGUAGES: tuple[str, ...] = tuple(LEXICON)
#: Invoice-number prefixes per language (``INV-2025-00012``, ``FV/2025/0042``...).
PREFIXES = {"en": ("INV", "IN"), "de": ("RE", "R"), "fr": ("F", "FA"), "es": ("FAC", "F"),
            "it": ("FT", "FATT"), "nl": ("F", "FACT"), "pt": ("FT", "FAT"), "pl": ("FV", "FA"),
            "sv": ("F", "FAK"), "da": ("F", "FAK")}  # fmt: skip
