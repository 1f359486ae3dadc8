"""Scans for erased content: every column of every table, cast to text, and every
file of the document store, searched for planted strings.

Used by the erasure tests (issue 46): a copy of an invoice's text, IBAN or values
that erasure missed is a hit here, whatever table a later change adds. With a KEK
configured (``FENCELINE_KEK``) much of that content is sealed at rest, so
:func:`content_hits` also opens every sealed value through the product's own
readers (:mod:`pipeline.data_keys`, :mod:`pipeline.sealed_results`) and searches
what they give; :func:`sealed_places` lists the columns holding a sealed value, so a
test can check that the opener knows every one (:data:`OPENED_PLACES`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import asyncpg

from pipeline.data_keys import DataKeys, document_subject
from pipeline.documents import read_pdf_text
from pipeline.envelope import ARMOR
from pipeline.sealed_results import (
    UNREADABLE,
    open_body,
    open_changes,
    open_reasons,
    open_result,
    open_validation,
)

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


#: The columns :func:`opened_hits` opens (every place the product seals a value).
OPENED_PLACES = frozenset(
    {
        "documents.content",
        "document_texts.content",
        "extraction_results.result",
        "extraction_results.validation",
        "deliveries.body",
        "review_corrections.changes",
        "review_corrections.reasons_before",
        "review_corrections.reasons_after",
    }
)


async def sealed_places(pool: asyncpg.Pool, *, skip: frozenset[str] = frozenset()) -> set[str]:
    """The ``table.column`` places (receiver's tables and ``skip`` left out) where some
    value holds a sealed token."""
    return {
        place
        for place in (await table_hits(pool, [ARMOR], skip=skip))[ARMOR]
        if not place.startswith("tenant_data_keys.")  # the wrapped keys, not content
    }


async def opened_hits(
    pool: asyncpg.Pool, keys: DataKeys, needles: Iterable[str]
) -> dict[str, list[str]]:
    """``{needle: ["table.column", ...]}`` for the sealed places (:data:`OPENED_PLACES`)
    whose values, opened as the product opens them, hold the needle. A value that does
    not open (its key shredded, no KEK here) holds nothing readable and is no hit."""
    wanted = list(needles)
    hits: dict[str, list[str]] = {n: [] for n in wanted}
    async with pool.acquire() as conn:
        for place, text in [t async for t in _opened(conn, keys)]:
            for needle in wanted:
                if needle in text and place not in hits[needle]:
                    hits[needle].append(place)
    return hits


async def content_hits(
    pool: asyncpg.Pool,
    keys: DataKeys,
    needles: Iterable[str],
    *,
    skip: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """:func:`table_hits` and :func:`opened_hits` together (each place once, sorted)."""
    wanted = list(needles)
    plain = await table_hits(pool, wanted, skip=skip)
    opened = await opened_hits(pool, keys, wanted)
    return {
        n: sorted(set(plain[n]) | {p for p in opened[n] if p.split(".")[0] not in skip})
        for n in wanted
    }


async def _opened(conn: asyncpg.Connection, keys: DataKeys) -> Any:
    """``(place, text)`` for every value of :data:`OPENED_PLACES` that opens."""
    # a file's text is sealed to its document's SHA-256 (document_texts.sha256 is the
    # text's own digest)
    for table, sql in (
        ("documents", "SELECT tenant_id, sha256, content FROM documents"),
        (
            "document_texts",
            "SELECT t.tenant_id, d.sha256, t.content FROM document_texts t"
            " JOIN documents d ON d.id = t.document_id",
        ),
    ):
        for r in await conn.fetch(sql):
            if r["content"] is None:
                continue
            try:
                yield (
                    f"{table}.content",
                    await keys.open_text(
                        conn, r["tenant_id"], r["content"], document_subject(r["sha256"])
                    ),
                )
            except UNREADABLE:
                continue
    rows = await conn.fetch(
        "SELECT j.tenant_id, r.job_id, r.result, r.validation FROM extraction_results r"
        " JOIN extraction_jobs j ON j.id = r.job_id WHERE r.result IS NOT NULL"
    )
    for r in rows:
        result = json.loads(r["result"]) if isinstance(r["result"], str) else r["result"]
        opened = await open_result(keys, conn, r["tenant_id"], r["job_id"], result, mark=UNREADABLE)
        yield "extraction_results.result", json.dumps(opened, ensure_ascii=False)
        report = await open_validation(
            keys, conn, r["tenant_id"], r["job_id"], r["validation"] or {}, mark=UNREADABLE
        )
        yield "extraction_results.validation", json.dumps(report, ensure_ascii=False)
    rows = await conn.fetch("SELECT tenant_id, job_id, body FROM deliveries")
    for r in rows:
        try:
            body = await open_body(keys, conn, r["tenant_id"], r["job_id"], bytes(r["body"]))
        except UNREADABLE:
            continue
        yield "deliveries.body", body.decode("utf-8", "replace")
    rows = await conn.fetch(
        "SELECT tenant_id, job_id, changes, reasons_before, reasons_after FROM review_corrections"
    )
    for r in rows:
        changes = json.loads(r["changes"]) if isinstance(r["changes"], str) else r["changes"]
        opened_changes = await open_changes(
            keys, conn, r["tenant_id"], r["job_id"], changes, mark=UNREADABLE
        )
        yield "review_corrections.changes", json.dumps(opened_changes, ensure_ascii=False)
        for side in ("reasons_before", "reasons_after"):
            reasons = await open_reasons(
                keys, conn, r["tenant_id"], r["job_id"], r[side], mark=UNREADABLE
            )
            yield f"review_corrections.{side}", json.dumps(reasons, ensure_ascii=False)
