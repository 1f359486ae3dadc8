"""Bounded work per document: the limits a document must meet, and the CPU reading it may spend.

Extraction reads a document line by line, and some of that work grows faster than
the text (a row's numbers are searched pairwise; labels are looked for before each
value on a line). One invoice whose text was a single 100,000-character line once
kept a task driver busy until it was replaced, five times over. So:

* :class:`DocumentLimits` bounds what may be read at all: bytes, estimated tokens,
  lines and the longest line. The intake refuses a document over a limit before
  anything is written (413 for size, 422 for shape); a driver checks again before it
  reads a document (one accepted before the limits existed, or under looser ones)
  and fails its job with :class:`~pipeline.errors.DocumentOverLimit`, naming the limit.
* :func:`~pipeline.cpu_budget.cpu_budget` bounds the CPU one preparation or one
  interpretation spends (this thread's CPU time, so neither a busy machine nor another
  thread spends it): the hot loops of reading call
  :func:`~pipeline.cpu_budget.spend`, which raises
  :class:`~pipeline.errors.ExtractionBudgetExceeded` once it is gone. It is the last
  guard, for a document within every limit that still costs too much.

Invariant: every default limit passes every invoice :mod:`benchmarks.invoices`
generates (up to 200 items: at most 458 lines, 127 characters a line and 21 KB), and
the defaults are :class:`~pipeline.settings.Settings`' defaults.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pipeline.errors import DocumentOverLimit
from pipeline.settings import Settings

_LINE_BREAK = re.compile(r"[\n\f]")
#: Limits that refuse the request as too large (413); the others refuse its shape (422).
SIZE_LIMITS = frozenset({"document_bytes", "document_tokens"})


@dataclass(frozen=True)
class DocumentLimits:
    """What one document may be, and the CPU seconds reading it may take.

    ``bytes_per_token`` turns bytes into the token estimate admission uses (the
    document's share of it: no prompt overhead, no output reserve).
    """

    max_bytes: int = 256 * 1024
    max_tokens: int = 65_536
    max_lines: int = 10_000
    max_line_chars: int = 4_000
    bytes_per_token: float = 4.0
    #: CPU seconds one :func:`~pipeline.extraction.extractor.prepare_call` or one
    #: :func:`~pipeline.extraction.extractor.read_answer` may spend (None: unbounded).
    cpu_seconds: float | None = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> DocumentLimits:
        """The limits a deployment configured (``FENCELINE_MAX_DOCUMENT_*``)."""
        return cls(
            max_bytes=settings.max_document_bytes,
            max_tokens=settings.max_document_tokens,
            max_lines=settings.max_document_lines,
            max_line_chars=settings.max_line_chars,
            bytes_per_token=settings.bytes_per_token,
            cpu_seconds=settings.extraction_cpu_seconds,
        )


#: The limits a caller that names none reads a document under.
DEFAULT_LIMITS = DocumentLimits()


@dataclass(frozen=True)
class Shape:
    """What :class:`DocumentLimits` measures of a text (lines as
    :class:`~pipeline.extraction.layout.Layout` numbers them: split at newlines and
    form feeds)."""

    bytes: int
    tokens: int
    lines: int
    longest_line: int
    longest_at: int


def measure(text: str, bytes_per_token: float = 4.0) -> Shape:
    """The shape of ``text``, in one pass over it (no copy of its lines)."""
    size = len(text.encode("utf-8"))
    lines = 1
    longest = longest_at = 0
    start = 0
    for brk in _LINE_BREAK.finditer(text):
        if brk.start() - start > longest:
            longest, longest_at = brk.start() - start, lines
        lines += 1
        start = brk.end()
    if len(text) - start > longest:
        longest, longest_at = len(text) - start, lines
    return Shape(size, math.ceil(size / bytes_per_token), lines, longest, longest_at or 1)


def over_limit(text: str, limits: DocumentLimits) -> DocumentOverLimit | None:
    """The first limit ``text`` is over (size before shape), or None."""
    shape = measure(text, limits.bytes_per_token)
    if shape.bytes > limits.max_bytes:
        return DocumentOverLimit("document_bytes", allowed=limits.max_bytes, actual=shape.bytes)
    if shape.tokens > limits.max_tokens:
        return DocumentOverLimit("document_tokens", allowed=limits.max_tokens, actual=shape.tokens)
    if shape.lines > limits.max_lines:
        return DocumentOverLimit("lines", allowed=limits.max_lines, actual=shape.lines)
    if shape.longest_line > limits.max_line_chars:
        return DocumentOverLimit(
            "line_chars",
            allowed=limits.max_line_chars,
            actual=shape.longest_line,
            line=shape.longest_at,
        )
    return None


def check_document(text: str, limits: DocumentLimits | None) -> None:
    """Raise :class:`~pipeline.errors.DocumentOverLimit` for a text over ``limits``
    (None: no limits, for measurements that want the unbounded cost)."""
    if limits is None:
        return
    refusal = over_limit(text, limits)
    if refusal is not None:
        raise refusal
