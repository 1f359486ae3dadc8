"""Named-query loader and naming convention (house style rule 2)."""

from __future__ import annotations

import re

import pytest

from pipeline.queries import all_queries, parse


def test_parse_splits_named_blocks() -> None:
    text = "-- name: a_get\nSELECT 1;\n\n-- name: b_set\nUPDATE x SET y = 1;\n"
    assert parse(text) == {"a_get": "SELECT 1;", "b_set": "UPDATE x SET y = 1;"}


def test_parse_rejects_duplicates_and_empty() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")
    with pytest.raises(ValueError, match="empty"):
        parse("-- name: a\n\n-- name: b\nSELECT 1;\n")


def test_every_query_name_is_noun_verb() -> None:
    names = all_queries()
    assert len(names) > 20
    bad = [n for n in names if not re.fullmatch(r"[a-z]+(_[a-z0-9]+)+", n)]
    assert bad == []


def test_conditional_updates_are_guarded() -> None:
    """Every job-state UPDATE names the state it moves from."""
    for name, sql in all_queries().items():
        if re.search(r"UPDATE\s+extraction_jobs", sql) and "SET state" in sql:
            # IS NOT DISTINCT FROM: the per-row statements' form (sql/queries/jobs.sql).
            where = sql.split("WHERE", 1)[1]
            assert re.search(r"state\s*(=|IN|IS NOT DISTINCT FROM)\s*", where), name
