"""An e-invoice's XML checked against EN 16931's business rules (its Schematron).

The rules are CEN/TC 434's own validation artefacts, release 1.3.16, compiled to XSLT 2.0
by CEN and vendored unchanged beside this module (``schematron/``, see its NOTICE): one
stylesheet for UBL 2.1 ``Invoice`` and ``CreditNote``, one for CII D16B. They are run by
Saxon-HE (the ``saxonche`` package); each stylesheet is compiled once per process (0.2 to
0.9 s on a loaded 2-core machine, :func:`warm_rules` does it ahead) and a compiled
stylesheet transforms one document at a time under its lock, a few milliseconds each.

The stylesheet's report (SVRL) lists each rule a document fails: ``flag="fatal"`` (the
document is no EN 16931 invoice: BR-CO-10, the sum of the line net amounts is not the
total net amount) or ``flag="warning"`` (a recommendation). A fatal one sends the
invoice to review (``einvoice_invalid``, field ``rules``) with the rule ids and the
messages; warnings are kept on the check for the corpus benchmarks, never reviewed.

Which documents the rules are run on: UBL, and CII of the Factur-X/ZUGFeRD profiles
BASIC, EN 16931 and EXTENDED (XRechnung CII reads as EN 16931). Not MINIMUM and BASIC WL,
which are not EN 16931 invoices by design (no lines: they review with
``einvoice_not_holdable`` ``no_line_items`` anyway), nor ZUGFeRD 1.0 (D13B), which
predates the standard.

The bytes reach lxml only after :func:`pipeline.extraction.xml_tree.parse_xml` refused
any DTD or entity declaration, and Saxon only as lxml's serialisation of that tree.
The stylesheets load no other document. Nothing here raises for what the bytes hold:
XML that does not parse, and a transform Saxon refuses, are reported as a failed check.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lxml import etree

from pipeline.extraction.xml_schema import CII_D16B, UBL_ROOTS, cii_level

_HERE = Path(__file__).resolve().parent / "schematron"
UBL_RULES = "EN16931-UBL-validation.xslt"
CII_RULES = "EN16931-CII-validation.xslt"
#: The Factur-X/ZUGFeRD profiles EN 16931's rules apply to.
EN16931_PROFILES = frozenset({"basic", "en16931", "extended"})
_SVRL = "{http://purl.oclc.org/dsdl/svrl}"
#: How many failed rules a reason names, and its detail's length at most.
MAX_MESSAGES = 5
MAX_DETAIL = 800


@dataclass(frozen=True)
class RuleFailure:
    """One failed assertion: the rule's id (``BR-CO-10``), its flag (``fatal`` or
    ``warning``), the rule's message and where in the document it failed."""

    rule: str
    flag: str
    message: str
    location: str = ""


@dataclass(frozen=True)
class RulesCheck:
    """Which stylesheet a document was checked with (``None``: the rules do not apply to
    it) and the rules it fails."""

    rules: str | None
    failures: tuple[RuleFailure, ...] = ()

    @property
    def fatal(self) -> tuple[RuleFailure, ...]:
        return tuple(f for f in self.failures if f.flag != "warning")

    @property
    def warnings(self) -> tuple[RuleFailure, ...]:
        return tuple(f for f in self.failures if f.flag == "warning")

    @property
    def valid(self) -> bool:
        return not self.fatal

    def detail(self) -> str:
        """The fatal failures' ids and messages as one bounded line for a review reason."""
        fatal = self.fatal
        ids = sorted({f.rule for f in fatal})
        shown = "; ".join(f.message for f in fatal[:MAX_MESSAGES])
        more = len(fatal) - MAX_MESSAGES
        if more > 0:
            shown += f"; and {more} more"
        text = f"fails EN 16931 rules {', '.join(ids)} ({self.rules}): {shown}"
        return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


@functools.cache
def _saxon() -> Any:
    """Saxon-HE's processor, started on first use (its native library is ~40 MB, which a
    process that never reads an e-invoice need not load)."""
    from saxonche import PySaxonProcessor

    return PySaxonProcessor(license=False)


@dataclass
class _Compiled:
    executable: Any
    lock: threading.Lock


@functools.cache
def _compiled(name: str) -> _Compiled:
    compiler = _saxon().new_xslt30_processor()
    executable = compiler.compile_stylesheet(stylesheet_file=str(_HERE / name))
    return _Compiled(executable, threading.Lock())


def warm_rules() -> None:
    """Compile both stylesheets now (0.5 s together on a loaded 2-core machine), so the
    first e-invoice of each syntax does not pay it in its own attempt."""
    for name in (UBL_RULES, CII_RULES):
        _compiled(name)


def rules_for(root: etree._Element) -> str | None:
    """The stylesheet for a parsed root, ``None`` where EN 16931's rules do not apply."""
    if str(root.tag) in UBL_ROOTS:
        return UBL_RULES
    if str(root.tag) == f"{{{CII_D16B}}}CrossIndustryInvoice" and (
        cii_level(root) in EN16931_PROFILES
    ):
        return CII_RULES
    return None


def rules_for_xml(xml: bytes) -> str | None:
    """:func:`rules_for` the document ``xml`` holds, ``None`` where it does not parse."""
    try:
        return rules_for(etree.fromstring(xml, parser=_parser()))
    except etree.XMLSyntaxError:
        return None


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False
    )


def check_rules(xml: bytes) -> RulesCheck:
    """Run EN 16931's rules on ``xml`` (already refused by ``parse_xml`` if it declares a
    DTD or entity). Never raises for what the bytes hold."""
    try:
        root = etree.fromstring(xml, parser=_parser())
    except etree.XMLSyntaxError as exc:
        return RulesCheck("XML", (RuleFailure("XML", "fatal", str(exc)),))
    name = rules_for(root)
    if name is None:
        return RulesCheck(None)
    compiled = _compiled(name)
    text = etree.tostring(root, encoding="unicode")
    try:
        with compiled.lock:
            node = _saxon().parse_xml(xml_text=text)
            report = compiled.executable.transform_to_string(xdm_node=node)
    except Exception as exc:  # saxonche raises its own PySaxonApiError for any refusal
        return RulesCheck(name, (RuleFailure("XSLT", "fatal", " ".join(str(exc).split())),))
    return RulesCheck(name, _failures(report))


def _failures(report: str) -> tuple[RuleFailure, ...]:
    svrl = etree.fromstring(report.encode("utf-8"), parser=_parser())
    return tuple(
        RuleFailure(
            rule=str(element.get("id") or ""),
            flag=str(element.get("flag") or "fatal"),
            message=" ".join("".join(element.findtext(f"{_SVRL}text") or "").split()),
            location=str(element.get("location") or ""),
        )
        for element in svrl.iter(f"{_SVRL}failed-assert")
    )
