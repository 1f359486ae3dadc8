"""A PDF's two faces through poppler: the invoice XML it embeds and the text it prints.

Both go through Debian's ``poppler-utils`` (``make corpus-tools`` installs it): ``pdfdetach``
saves the embedded files, ``pdftotext -layout`` keeps the columns of a table on one line.
No PDF library is added to the environment for a benchmark.

The text layer is what Fenceline's ``ocr_text`` expects: pages separated by form feed,
no trailing form feed after the last page.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: File names Factur-X, ZUGFeRD 1.0/2.x and the XRechnung reference profile give the invoice XML,
#: lower-cased, in order of preference.
INVOICE_XML_NAMES = ("factur-x.xml", "zugferd-invoice.xml", "xrechnung.xml")
POPPLER_TOOLS = ("pdftotext", "pdfdetach")
_TIMEOUT_S = 120


class PopplerMissing(RuntimeError):
    """``pdftotext``/``pdfdetach`` are not installed (Debian package ``poppler-utils``)."""


@dataclass(frozen=True)
class EmbeddedXml:
    """The invoice XML a PDF carries, with the name it was attached under."""

    name: str
    data: bytes


def require_poppler() -> None:
    """Raise :class:`PopplerMissing` naming what to install when a tool is absent."""
    missing = [tool for tool in POPPLER_TOOLS if shutil.which(tool) is None]
    if missing:
        raise PopplerMissing(
            f"{', '.join(missing)} not found: install Debian's poppler-utils "
            "(make corpus-tools, or apt-get install poppler-utils)"
        )


def embedded_xml(pdf: Path) -> EmbeddedXml | None:
    """The invoice XML attached to ``pdf``, or ``None`` when it carries none.

    A PDF may carry other attachments (time sheets, images, a second XML of
    additional data); only the names in :data:`INVOICE_XML_NAMES` count, then any
    other ``.xml`` whose name mentions an invoice profile.
    """
    require_poppler()
    with tempfile.TemporaryDirectory(prefix="fenceline-pdf-") as out:
        subprocess.run(
            ["pdfdetach", "-saveall", "-o", out, str(pdf)],
            check=False,
            capture_output=True,
            timeout=_TIMEOUT_S,
        )
        found = {p.name.lower(): p for p in Path(out).iterdir() if p.is_file()}
        for name in INVOICE_XML_NAMES:
            if name in found:
                return EmbeddedXml(found[name].name, found[name].read_bytes())
        for lower, p in sorted(found.items()):
            if lower.endswith(".xml") and ("invoice" in lower or "factur" in lower):
                return EmbeddedXml(p.name, p.read_bytes())
    return None


def text_layer(pdf: Path) -> str:
    """The printed text, ``pdftotext -layout``; pages separated by form feed.

    Poppler's complaints about damaged drawing operators (``Syntax Error ...``) go to
    stderr and are dropped: they concern graphics, not text.
    """
    require_poppler()
    done = subprocess.run(
        ["pdftotext", "-layout", "-enc", "UTF-8", str(pdf), "-"],
        check=False,
        capture_output=True,
        timeout=_TIMEOUT_S,
    )
    text = done.stdout.decode("utf-8", errors="replace")
    pages = text.split("\f")
    while pages and not pages[-1].strip():
        pages.pop()
    return "\f".join(page.rstrip() for page in pages)
