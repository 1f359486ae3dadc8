"""An API key's label: the name a person gives a key ("Ana Ruiz"), shown where the
console names who reviewed, corrected or re-drove a job (the key's prefix otherwise).

Optional; the stored form follows the text-safety rule of every stored
human-readable field (:mod:`pipeline.text_safety`): NFC-normalised, trimmed, not
blank, at most :data:`MAX_LENGTH` characters, no character a person cannot see for
what it is (bidi controls, zero-width and control characters) and no white space
other than the plain space. Migration 030 keeps the bounds.
"""

from __future__ import annotations

from pipeline.text_safety import one_line_name

MAX_LENGTH = 100


def key_label(raw: str | None) -> str | None:
    """``raw`` in the one stored form (NFC, trimmed), None for no label, or ValueError.

    Raises:
        ValueError: blank, too long, or an invisible or non-space white-space character
            (named by code point, never echoed).
    """
    if raw is None:
        return None
    return one_line_name(raw, "a key label", MAX_LENGTH)
