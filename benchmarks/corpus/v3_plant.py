"""A wrong contract-v3 value planted in every SUCCEEDED e-invoice (issue 44).

``python -m benchmarks.corpus.v3_plant SOURCE...`` reads every UBL or CII e-invoice of
each source (a bare git mirror or a folder: standalone ``.xml`` files, decided as an XML
upload, and the corpus PDFs' embedded XML, decided with their page), keeps those that are
SUCCEEDED untouched, and plants one wrong value at a time where the XML states it, in
the first element of its kind that a reader reads into a contract v3 field:

- ``amount_due``, ``prepaid``, ``rounding``: BT-115, BT-113, BT-114 1 higher;
- ``line_entry``: a line-level allowance's or charge's amount (BT-136, BT-141) 1 higher,
  never one inside a price (which no reader takes as a line entry);
- ``basis``: the net price's basis quantity (BT-149) 1 higher;
- ``tax_currency``: the tax currency (BT-6) replaced by ``CHF``;
- ``tax_number``: the seller's tax number (BT-32: CII ``SpecifiedTaxRegistration/ID``
  ``schemeID="FC"``, UBL a ``PartyTaxScheme`` other than VAT) with a ``9`` appended,
  where the XML states one the reader takes (one with a digit: a statement such as
  Sweden's ``Godkänd för F-skatt`` is no tax number, and a ``9`` appended to it would
  plant a tax number where there was none, not change one);
- ``o_seller_iban``: on an invoice not subject to VAT (category ``O``) whose seller states
  neither VAT id nor tax number, the IBAN (BT-84), the one identifier that proves the
  seller, replaced by another valid IBAN;
- ``o_tax``: on an invoice not subject to VAT, its breakdown's tax amount (BT-117, which
  BR-O-09 makes 0) 1 higher;
- ``national_account``: on an invoice paid to a national account (BT-84 that is no IBAN,
  a Swedish bankgiro, which the result holds as ``payee_account``), the account's last
  digit changed wherever the XML states it (UBL ``PayeeFinancialAccount/ID``, CII
  ``ProprietaryID``): another account than the one on file.

Master data is the untouched XML's (:func:`~benchmarks.corpus.embedded.decide`'s
``master_xml``): its supplier with VAT id, tax number, IBANs and national accounts as
stated, so a planted tax number or account meets the one on file.

The plant re-serialises the tree (:mod:`xml.etree.ElementTree`: prefixes change, local
names and namespaces do not, which is all the readers and the schema check read). Every
plant must go to review: ``accepted`` must be 0.
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path

from benchmarks.corpus.embedded import corpus_einvoices, decide
from benchmarks.corpus.tree import CorpusTree
from pipeline.extraction import read_einvoice, read_invoice_xml
from pipeline.extraction.xml_tree import local, parse_xml
from pipeline.invoice import names_a_registration
from pipeline.validation import Decision

#: Header elements planted by name: (plant, local names).
_HEADER = (
    ("amount_due", ("PayableAmount", "DuePayableAmount")),
    ("prepaid", ("PrepaidAmount", "TotalPrepaidAmount")),
    ("rounding", ("PayableRoundingAmount", "RoundingAmount")),
    ("tax_currency", ("TaxCurrencyCode",)),
)
PLANTS = (
    "amount_due",
    "prepaid",
    "rounding",
    "line_entry",
    "basis",
    "tax_currency",
    "tax_number",
    "o_seller_iban",
    "o_tax",
    "national_account",
)
#: Valid IBANs a planted seller IBAN takes (the second where the first is the XML's).
_OTHER_IBANS = ("DE02120300000000202051", "DE89370400440532013000")


def _kids(el: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in el if local(c.tag) == name]


def targets(root: ET.Element) -> Iterator[tuple[str, ET.Element]]:
    """(plant, element) for each value a reader reads into a contract v3 field."""
    for el in root.iter():
        name = local(el.tag)
        for plant, names in _HEADER:
            if name in names:
                yield plant, el
        if name in ("InvoiceLine", "CreditNoteLine"):
            for entry in _kids(el, "AllowanceCharge"):
                yield from (("line_entry", a) for a in _kids(entry, "Amount"))
            for price in _kids(el, "Price"):
                yield from (("basis", b) for b in _kids(price, "BaseQuantity"))
        if name == "SpecifiedLineTradeSettlement":
            for entry in _kids(el, "SpecifiedTradeAllowanceCharge"):
                yield from (("line_entry", a) for a in _kids(entry, "ActualAmount"))
        if name == "NetPriceProductTradePrice":
            yield from (("basis", b) for b in _kids(el, "BasisQuantity"))
        if name == "SellerTradeParty":
            for reg in _kids(el, "SpecifiedTaxRegistration"):
                ids = _kids(reg, "ID")
                yield from (
                    ("tax_number", i)
                    for i in ids
                    if (i.get("schemeID") or "").upper() == "FC"
                    and names_a_registration(i.text or "")
                )
        if name in ("PayeeFinancialAccount", "PayeePartyCreditorFinancialAccount"):
            yield from (("o_seller_iban", i) for i in (*_kids(el, "ID"), *_kids(el, "IBANID")))
            accounts = (*_kids(el, "ID"), *_kids(el, "ProprietaryID"))
            yield from (("national_account", i) for i in accounts)
        if name == "TaxSubtotal":
            yield from (("o_tax", a) for a in _kids(el, "TaxAmount"))
        if name == "ApplicableTradeTax":
            yield from (("o_tax", a) for a in _kids(el, "CalculatedAmount"))
        if name == "AccountingSupplierParty":
            for party in _kids(el, "Party"):
                for scheme in _kids(party, "PartyTaxScheme"):
                    kinds = [i.text for t in _kids(scheme, "TaxScheme") for i in _kids(t, "ID")]
                    if "VAT" not in [(k or "").strip().upper() for k in kinds]:
                        yield from (
                            ("tax_number", c)
                            for c in _kids(scheme, "CompanyID")
                            if names_a_registration(c.text or "")
                        )


def planted(xml: bytes, plant: str) -> bytes | None:
    """``xml`` with the first value of ``plant`` changed, or None where it states none."""
    if plant.startswith("o_"):
        facts = read_invoice_xml(xml)
        unidentified = facts.seller_vat_id is None and facts.seller_tax_number is None
        if not facts.not_subject_to_vat or (plant == "o_seller_iban" and not unidentified):
            return None
    if plant == "national_account" and read_einvoice(xml).extraction.payee_account is None:
        return None
    root = parse_xml(xml)
    el = next((e for p, e in targets(root) if p == plant), None)
    if el is None:
        return None
    if plant == "national_account":
        stated = el.text or ""
        for same in (e for p, e in targets(root) if p == plant and e.text == stated):
            same.text = _other_account(stated)
    elif plant == "o_seller_iban":
        stated = (el.text or "").replace(" ", "").upper()
        el.text = next(i for i in _OTHER_IBANS if i != stated)
    elif plant == "tax_currency":
        el.text = "CHF"
    elif plant == "tax_number":
        el.text = (el.text or "").strip() + "9"
    else:
        try:
            el.text = str(Decimal((el.text or "").strip()) + 1)
        except InvalidOperation:
            return None
    out: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return out


def _other_account(account: str) -> str:
    """``account`` with its last digit changed (``5050-1055`` to ``5050-1056``)."""
    at = max(i for i, ch in enumerate(account) if ch.isdigit())
    return account[:at] + str((int(account[at]) + 1) % 10) + account[at + 1 :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", help="bare git mirrors or folders")
    args = parser.parse_args(argv)
    counts: collections.Counter[str] = collections.Counter()
    accepted: list[str] = []
    for source in args.sources:
        for path, xml, page in corpus_einvoices(CorpusTree(source)):
            if decide(xml, page).report.decision is not Decision.SUCCEEDED:
                continue
            counts["succeeded"] += 1
            for plant in PLANTS:
                wrong = planted(xml, plant)
                if wrong is None:
                    continue
                counts[f"{plant} planted"] += 1
                if decide(wrong, page, master_xml=xml).report.decision is Decision.SUCCEEDED:
                    counts[f"{plant} accepted"] += 1
                    accepted.append(f"{plant}: {path}")
    print(f"SUCCEEDED untouched: {counts['succeeded']}")
    print(f"  {'plant':14} planted accepted")
    for plant in PLANTS:
        print(f"  {plant:14} {counts[plant + ' planted']:7d} {counts[plant + ' accepted']:8d}")
    for line in accepted:
        print(f"  accepted: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
