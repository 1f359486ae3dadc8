"""Answers as an engine without the grammar writes them: every item listed."""

from __future__ import annotations

from pipeline.extraction.answer import Answer, parse_answer, table_items
from pipeline.extraction.layout import Layout
from pipeline.extraction.table import table_rows


def every_item(answer: str, ocr_text: str) -> Answer:
    """``answer`` (contract v2) with the rows code fills in listed too, in table order:
    the list a model writes where nothing spares it the rows of one description."""
    rows = table_rows(Layout.read(ocr_text))
    parsed = parse_answer(answer)
    return parsed.model_copy(update={"items": table_items(parsed.items, rows) or ()})
