"""Text a person will read: which characters are refused, and how the rest is shown.

A bidi override (U+202E) makes ``invoice\\u202efdp.exe`` display as
``invoiceexe.pdf``; a zero-width space makes two option keys that look alike
differ; a private-use or format character may render as nothing at all
(Trojan Source, CVE-2021-42574). One rule, :func:`is_invisible`, says which
characters a person cannot see for what they are:

* ``Cc`` control characters (tab and newline included: a field that carries
  them is escaped when shown, so it cannot forge a second line of output);
* ``Cf`` format characters: the bidi embeddings, overrides and isolates, the
  directional marks, zero-width space / joiners, word joiner, BOM, soft hyphen,
  the tag characters;
* ``Co`` private use and ``Cs`` surrogates (never valid text on the wire);
* ``Zl`` / ``Zp``, the line and paragraph separators;
* a few letters and marks that render blank although their category says
  otherwise (Hangul fillers, the combining grapheme joiner, variation
  selectors, the Braille blank).

Two uses, one rule:

* **Intake refuses** them where they carry no meaning: document file names and
  option keys, and every human-readable field the API stores (endpoint
  descriptions, disable reasons, review notes, corrected values), a note keeping
  its newlines and tabs (:func:`first_invisible` finds the offender;
  :func:`refuse_invisible` refuses it, and the API answers 422 ``unsafe_text``).
  :func:`safe_text_pattern` documents the rule's BMP part in the OpenAPI document.
* **Display escapes** them everywhere text is shown to a person (the CLI's
  ``explain``, ``status``, ``submit``, ``review``, tenant and supplier listings):
  :func:`visible` writes each as ``\\u202e`` (``\\n``, ``\\t``, ``\\r`` for the
  usual three), so what was stored is what is seen.
"""

from __future__ import annotations

import functools
import unicodedata

_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})
#: Render blank although not in an invisible category.
_BLANK = frozenset(
    {
        0x034F,  # combining grapheme joiner
        0x115F,  # Hangul choseong filler
        0x1160,  # Hangul jungseong filler
        0x17B4,  # Khmer vowel inherent aq
        0x17B5,  # Khmer vowel inherent aa
        0x180B,  # Mongolian free variation selectors
        0x180C,
        0x180D,
        0x180F,
        0x2800,  # Braille pattern blank
        0x3164,  # Hangul filler
        0xFFA0,  # halfwidth Hangul filler
        *range(0xFE00, 0xFE10),  # variation selectors 1-16
        *range(0xE0100, 0xE01F0),  # variation selectors 17-256
    }
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_LINE_BREAKS = frozenset("\n\t")


def is_invisible(char: str) -> bool:
    """Whether a person cannot see ``char`` for what it is (see the module docstring)."""
    return ord(char) in _BLANK or unicodedata.category(char) in _CATEGORIES


def first_invisible(text: str, *, multiline: bool = False) -> str | None:
    """The first invisible character of ``text``, or None when every character shows.

    With ``multiline`` (text meant to span lines: a note), a newline or a tab is
    allowed; a carriage return is not (``\\r\\n`` is normalised to ``\\n`` first
    by whoever reads a browser's form).
    """
    for char in text:
        if is_invisible(char) and not (multiline and char in _LINE_BREAKS):
            return char
    return None


def refuse_invisible(where: str, text: str | None, *, multiline: bool = False) -> None:
    """The write-time rule for stored text a person will read: every writer (the API
    through :func:`pipeline.api.problems.refuse_unsafe_text`, the CLI) calls this.

    Raises:
        ValueError: naming ``where`` and the code point, never echoing the text.
    """
    char = None if text is None else first_invisible(text, multiline=multiline)
    if char is not None:
        raise ValueError(
            f"{where} contains an invisible or bidi control character ({describe(char)})"
        )


def describe(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: how a problem names a refused character."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def visible(text: str) -> str:
    """``text`` with every invisible character escaped (``\\u202e``, ``\\n``, ``\\U000e0041``).

    Text without invisible characters is returned unchanged, so the escaping
    costs nothing where there is nothing to show.
    """
    if first_invisible(text) is None:
        return text
    return "".join(_escape(c) if is_invisible(c) else c for c in text)


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


@functools.cache
def safe_text_pattern(*, multiline: bool = False) -> str:
    """A JSON Schema ``pattern`` refusing the rule's characters in the Basic Multilingual Plane.

    With ``multiline`` (a note) a newline and a tab are allowed, as in
    :func:`first_invisible`. Written with ``\\uXXXX`` escapes, which ECMA-262 and
    Python read alike; the characters above U+FFFF that the rule refuses (tag
    characters, the private-use planes) are refused by :func:`first_invisible`
    but cannot be written portably in a pattern.
    """
    allowed = _LINE_BREAKS if multiline else frozenset()
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF or not is_invisible(chr(code)) or chr(code) in allowed:
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    body = "".join(f"\\u{lo:04x}" if lo == hi else f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in ranges)
    return f"^[^{body}]*$"


def one_line_name(raw: str, what: str, max_length: int) -> str:
    """``raw`` as a name is stored (NFC, trimmed: a tenant's name, a key's label), or
    ValueError saying why not: blank, longer than ``max_length``, or holding a
    character a person cannot see or a white space other than a plain space (named by
    code point, never echoed)."""
    name = unicodedata.normalize("NFC", raw).strip()
    if not name:
        raise ValueError(f"{what} cannot be blank")
    if len(name) > max_length:
        raise ValueError(f"{what} has at most {max_length} characters")
    hidden = first_invisible(name)
    if hidden is None:
        hidden = next((c for c in name if c.isspace() and c != " "), None)
    if hidden is not None:
        raise ValueError(f"{what} cannot contain {describe(hidden)}")
    return name
