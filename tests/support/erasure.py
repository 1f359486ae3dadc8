"""Scans for erased content: every column of every table, cast to text, and every
file of the document store, searched for planted strings.

Used by the erasure tests (issue 46): a copy of an invoice's text, IBAN or values
that erasure missed is a hit here, whatever table a later change adds.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import asyncpg

from pipeline.documents import read_pdf_text

#: The reference ERP receiver's tables: the third party's own copy of what was
#: delivered, which erasure reports and never recalls (they share the test database).
RECEIVER_PREFIX = "erp_"


async def table_hits(
    pool: asyncpg.Pool, needles: Iterable[str], *, skip: frozenset[str] = frozenset()
) -> dict[str, list[str]]:
    """``{needle: ["table.column", ...]}`` for every column of every table of the
    current schema that holds the needle (any type cast to text; bytea searched for
    the needle's UTF-8 bytes). ``skip``: tables left out, each for a reason the caller states."""
    wanted = list(needles)
    hits: dict[str, list[str]] = {n: [] for n in wanted}
    async with pool.acquire() as conn:
        columns = await conn.fetch(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
            " ORDER BY 1, 2"
        )
        for col in columns:
            table, column = col["table_name"], col["column_name"]
            if table.startswith(RECEIVER_PREFIX) or table in skip:
                continue
            # bytea is searched as bytes (the needle's UTF-8): a column of hashes or
            # keys is not text, and decoding it as UTF-8 would fail
            where = (
                f"position(convert_to($1, 'UTF8') IN \"{column}\") > 0"
                if col["data_type"] == "bytea"
                else f'strpos("{column}"::text, $1) > 0'
            )
            for needle in wanted:
                found = await conn.fetchval(f'SELECT count(*) FROM "{table}" WHERE {where}', needle)
                if found:
                    hits[needle].append(f"{table}.{column}")
    return hits


def store_hits(root: Path, needles: Iterable[str]) -> dict[str, list[str]]:
    """``{needle: [path, ...]}`` for every file under ``root`` whose bytes, or whose
    text layer where it is a PDF (its text is compressed in the file), hold the needle."""
    wanted = list(needles)
    hits: dict[str, list[str]] = {n: [] for n in wanted}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        text = data.decode("utf-8", "replace")
        if data.startswith(b"%PDF-"):
            text += "\n".join(p.laid_out().text for p in read_pdf_text(data, max_pages=50).pages)
        for needle in wanted:
            if needle in text:
                hits[needle].append(str(path.relative_to(root)))
    return hits
