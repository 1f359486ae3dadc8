"""Named SQL blocks loaded from ``sql/queries/*.sql``.

Each block starts with ``-- name: <noun>_<verb>[_if_<guard>]``; the text up to the
next name line is the query. Names are unique across files so a query can be
found by grepping for it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)


def parse(text: str, origin: str = "<string>") -> dict[str, str]:
    """Split ``text`` into ``{name: sql}``; duplicate or empty blocks are errors."""
    out: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[m.end() : end].strip()
        name = m.group(1)
        if not body:
            raise ValueError(f"{origin}: query {name!r} is empty")
        if name in out:
            raise ValueError(f"{origin}: query {name!r} defined twice")
        out[name] = body
    return out


@cache
def all_queries() -> dict[str, str]:
    """Every named query of ``sql/queries``, loaded once."""
    out: dict[str, str] = {}
    for path in sorted((SQL_DIR / "queries").glob("*.sql")):
        for name, body in parse(path.read_text(), str(path)).items():
            if name in out:
                raise ValueError(f"{path}: query {name!r} also defined in another file")
            out[name] = body
    return out


def q(name: str) -> str:
    """The SQL text of query ``name``; KeyError names the missing query."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {SQL_DIR / 'queries'}") from None
