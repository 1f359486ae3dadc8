"""Reading an e-invoice's XML safely, and the element lookups both readers share.

The bytes come from uploads: a document type declaration (DTD, entities) is refused
before parsing, so no entity is expanded (no "billion laughs") and nothing outside the
bytes is fetched (no external entity). The readers (:mod:`pipeline.extraction.cii`,
:mod:`pipeline.extraction.ubl`) match elements by *local name*, and name each value's
evidence by its XML path with the syntax's conventional prefixes
(``/rsm:CrossIndustryInvoice/...``, ``/ubl:Invoice/cac:LegalMonetaryTotal/...``).

ElementTree's elements without children are *falsy*: every lookup here compares with
``None``, never chains ``find(a) or find(b)``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from decimal import Decimal, InvalidOperation


class NotAnEInvoice(ValueError):
    """The bytes are no e-invoice this system reads (another syntax, or not XML at all)."""


_DECLARATIONS = ("<!DOCTYPE", "<!ENTITY")


def declares(xml: bytes) -> bool:
    """Whether the bytes hold a DTD or entity declaration, in any encoding XML allows."""
    for marker in _DECLARATIONS:
        for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            if marker.encode(codec) in xml:
                return True
    return False


def parse_xml(xml: bytes) -> ET.Element:
    """The root of ``xml``, refusing a DTD or entity declarations (no expansion, no fetch).

    Raises:
        NotAnEInvoice: a declaration, or no well-formed XML (the parser's message).
    """
    if declares(xml):
        raise NotAnEInvoice("XML with a document type or entity declaration is refused")
    try:
        return ET.fromstring(xml)
    except ET.ParseError as exc:
        raise NotAnEInvoice(f"not XML: {exc}") from exc


def local(tag: object) -> str:
    """An element's name without its namespace."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def namespace(tag: object) -> str:
    """An element's namespace URI (``""``: none)."""
    return tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""


def children(el: ET.Element | None, *names: str) -> Iterator[ET.Element]:
    if el is None:
        return
    for child in el:
        if local(child.tag) in names:
            yield child


def child(el: ET.Element | None, *names: str) -> ET.Element | None:
    """The first child whose local name is one of ``names`` (``None`` when there is none)."""
    return next(children(el, *names), None)


def path(el: ET.Element | None, *steps: tuple[str, ...] | str) -> ET.Element | None:
    """Follow child steps; a step is one local name or a tuple of alternatives."""
    for step in steps:
        el = child(el, *((step,) if isinstance(step, str) else step))
        if el is None:
            return None
    return el


def text(el: ET.Element | None) -> str | None:
    """The element's text with its whitespace collapsed (``None``: absent or empty)."""
    if el is None or el.text is None:
        return None
    collapsed = " ".join(el.text.split())
    return collapsed or None


def decimal(el: ET.Element | None) -> Decimal | None:
    value_text = text(el)
    if value_text is None:
        return None
    try:
        value = Decimal(value_text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def stated_amounts(root: ET.Element, skip: ET.Element | None = None) -> tuple[str, ...]:
    """Every amount the XML states with its currency, as ``"119.00 EUR"``: each element
    that carries a ``currencyID`` attribute (UBL writes one on every amount, CII on a
    few). What the XML prices the invoice in, and nothing else of its text.

    ``skip``: the one amount that states the tax total in the tax currency (EN 16931
    BT-111), which prices nothing: the result holds it as its own field."""
    return tuple(
        f"{text(el) or ''} {currency}".strip()
        for el in root.iter()
        if (currency := (el.get("currencyID") or "").strip()) and el is not skip
    )


class XmlPaths:
    """XML paths of a tree's elements (``/rsm:CrossIndustryInvoice/.../ram:ID``).

    ``prefixes`` maps a word of a namespace URI to its conventional prefix, first match
    wins; an element of another namespace is named without one.
    """

    def __init__(self, root: ET.Element, prefixes: Sequence[tuple[str, str]]) -> None:
        self.root = root
        self.prefixes = prefixes
        self.parents = {c: parent for parent in root.iter() for c in parent}

    def _prefixed(self, tag: object) -> str:
        name = local(tag)
        uri = namespace(tag)
        prefix = next((p for word, p in self.prefixes if word in uri), "")
        return f"{prefix}:{name}" if prefix else name

    def __call__(self, el: ET.Element | None) -> str:
        if el is None:
            return ""
        steps: list[str] = []
        while el is not None:
            step = self._prefixed(el.tag)
            parent = self.parents.get(el)
            if parent is not None:
                same = [c for c in parent if c.tag == el.tag]
                if len(same) > 1:
                    step += f"[{same.index(el) + 1}]"
            steps.append(step)
            el = parent
        return "/" + "/".join(reversed(steps))
