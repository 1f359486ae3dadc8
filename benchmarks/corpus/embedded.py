"""The corpus PDFs' embedded e-invoices, each with its page, decided as a job asking for
contract v3 (``schema_version`` 3) would: the corpus measures what v3 reads.

:mod:`benchmarks.corpus.xml_read` and :mod:`benchmarks.corpus.xml_plant` read the same
documents the same way: the embedded XML (``factur-x.xml``, ``zugferd-invoice.xml``,
``xrechnung.xml``), the text layer of every page, and a tenant that has the XML's
supplier (name, VAT id, tax number), IBANs, national accounts and currency on file, with
"today" the day after issue.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from benchmarks.corpus.tree import CorpusTree
from pipeline.documents import pdf_attachments, read_pdf_text
from pipeline.extraction import (
    InvoiceFacts,
    NotAnEInvoice,
    is_embedded_invoice,
    read_invoice_xml,
)
from pipeline.invoice import SCHEMA_V3, SupplierRecord, TenantMasterData, national_account
from pipeline.worker.interpretation import Interpretation, interpret_einvoice


@dataclass(frozen=True)
class EmbeddedInvoice:
    """One corpus PDF's XML and page text (``""``: the PDF prints no text)."""

    path: str
    xml: bytes
    page: str

    @property
    def facts(self) -> InvoiceFacts | None:
        try:
            return read_invoice_xml(self.xml)
        except NotAnEInvoice:
            return None


def embedded_invoices(tree: CorpusTree) -> Iterator[EmbeddedInvoice | str]:
    """Each corpus document with its XML, or a word saying why it has none to read."""
    for path in tree.documents():
        data = tree.read(path)
        try:
            found = pdf_attachments(data)
            pages = read_pdf_text(data, max_pages=50).pages
        except Exception as exc:  # a PDF PDFium refuses: counted, not fatal
            yield f"pdf_unreadable:{type(exc).__name__}"
            continue
        xml = next((b for n, b in found.items() if is_embedded_invoice(n)), None)
        if xml is None:
            yield "no_embedded_xml"
            continue
        yield EmbeddedInvoice(path, xml, "\f".join(p.laid_out().text for p in pages))


def decide(xml: bytes, page: str, *, master_xml: bytes | None = None) -> Interpretation:
    """``xml`` (CII or UBL) with ``page`` through the worker's e-invoice path for a job
    asking for contract v3, for a tenant that has the XML's own supplier, IBANs and
    currency on file, the day after its issue.

    The supplier is registered as the XML states it: its name (BT-27), its VAT id
    (BT-31) and its tax number (BT-32) where the XML states them, none invented, so a
    seller known only by its tax number is on file by that alone (as ``fenceline
    suppliers add NAME --tax-number ...`` stores it); its IBANs and its national accounts
    (BT-84 of a scheme the register holds, a Swedish bankgiro: as ``--account`` stores
    them), so the measure shows what a tenant that registered them gets. ``master_xml``:
    take the master data (and "today") from this XML instead, the untouched one a plant
    was made from, so a planted seller identity meets the truth on file.

    An empty ``page`` is a standalone XML upload: no page, validated on what the XML
    states, as the worker does."""
    facts = _facts(xml)
    master_facts = facts if master_xml is None else _facts(master_xml)
    suppliers: tuple[SupplierRecord, ...] = ()
    today = date.today()
    currencies: frozenset[str] = frozenset()
    if master_facts is not None:
        name = master_facts.seller_name or "-"
        suppliers = (
            SupplierRecord(
                name,
                master_facts.seller_vat_id,
                frozenset(master_facts.ibans),
                tax_number=master_facts.seller_tax_number,
                accounts=frozenset(
                    held
                    for a in master_facts.stated_accounts
                    if (held := national_account(a.scheme, a.id)) is not None
                ),
            ),
        )
        currencies = frozenset({master_facts.currency}) if master_facts.currency else frozenset()
        issued = master_facts.issue_date
        today = issued + timedelta(days=1) if issued else today
    master = TenantMasterData(suppliers, currencies)
    return interpret_einvoice(
        xml,
        master,
        schema_version=SCHEMA_V3,
        today=today,
        page_text=page if page.strip() else None,
    )


def _facts(xml: bytes) -> InvoiceFacts | None:
    try:
        return read_invoice_xml(xml)
    except NotAnEInvoice:
        return None


def corpus_einvoices(tree: CorpusTree) -> Iterator[tuple[str, bytes, str]]:
    """(path, XML, page text) of each e-invoice of ``tree``: every standalone XML that
    reads as one (page empty), then every document's embedded XML with its page. A
    file the mirror lists but does not hold is skipped."""
    for path in (p for p in tree.paths() if p.lower().endswith(".xml")):
        try:
            xml = tree.read(path)
            read_invoice_xml(xml)
        except (NotAnEInvoice, subprocess.CalledProcessError):
            continue
        yield path, xml, ""
    for doc in embedded_invoices(tree):
        if not isinstance(doc, str):
            yield doc.path, doc.xml, doc.page
