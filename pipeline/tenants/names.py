"""A tenant's name: the one form an operator types and every listing shows.

A name addresses a tenant in the CLI (``--tenant NAME``); an id addresses it as
``--tenant-id UUID``. The two never share one lookup, and a name cannot look like
an id, so no name can stand for another tenant. Invariants of a stored name:

* NFC-normalised, no leading or trailing white space, not blank, at most
  :data:`MAX_LENGTH` characters;
* no character a person cannot see for what it is (bidi controls, zero-width and
  other format characters, control characters: :func:`pipeline.text_safety.is_invisible`)
  and no other white space than the plain space;
* not UUID-shaped (anything :class:`uuid.UUID` reads: any case, with or without
  hyphens, braces or ``urn:uuid:``);
* unique case-insensitively (``lower(name)``; migration 026 enforces it).
"""

from __future__ import annotations

import uuid

from pipeline.text_safety import one_line_name

MAX_LENGTH = 100


def _uuid_shaped(name: str) -> bool:
    """Whether Python's UUID parser reads ``name`` (any case, hyphens, braces, ``urn:uuid:``)."""
    try:
        uuid.UUID(name)
    except ValueError:
        return False
    return True


def tenant_name(raw: str) -> str:
    """``raw`` in the one stored form (NFC, trimmed), or ValueError saying why not.

    Raises:
        ValueError: blank, too long, an invisible or non-space white-space character,
            or UUID-shaped.
    """
    name = one_line_name(raw, "a tenant name", MAX_LENGTH)
    if _uuid_shaped(name):
        raise ValueError("a tenant name cannot look like a tenant id (a UUID)")
    return name
