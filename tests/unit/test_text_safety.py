"""The text-safety rule: which characters are invisible, and how they are shown."""

from __future__ import annotations

import re
import unicodedata
import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.jobs.admin import render_explain
from pipeline.text_safety import (
    describe,
    first_invisible,
    is_invisible,
    safe_text_pattern,
    visible,
)


def test_bidi_zero_width_and_other_invisible_characters_are_caught() -> None:
    for char in (
        "\u202e",  # right-to-left override
        "\u202a",  # left-to-right embedding
        "\u2066",  # left-to-right isolate
        "\u2069",  # pop directional isolate
        "\u200e",  # left-to-right mark
        "\u061c",  # Arabic letter mark
        "\u200b",  # zero-width space
        "\u200d",  # zero-width joiner
        "\u2060",  # word joiner
        "\ufeff",  # byte order mark
        "\u00ad",  # soft hyphen
        "\U000e0041",  # tag latin capital A
        "\ue000",  # private use
        "\U000f0000",  # supplementary private use
        "\ud800",  # a lone surrogate
        "\u2028",  # line separator
        "\x00",
        "\x1b",  # escape: terminal control sequences
        "\n",
        "\t",
        "\x85",  # next line (C1)
        "\u3164",  # Hangul filler: a letter that renders blank
        "\ufe0f",  # variation selector
    ):
        assert is_invisible(char), describe(char)
    for char in ("a", " ", "é", "ß", "€", "中", "\u0645", "😀", "-", ".", "\u00a0"):
        assert not is_invisible(char), describe(char)


def test_visible_escapes_what_cannot_be_seen_and_leaves_the_rest() -> None:
    assert visible("invoice\u202efdp.exe") == "invoice\\u202efdp.exe"
    assert visible("a\nb\tc\rd\x1b[2J") == "a\\nb\\tc\\rd\\x1b[2J"
    assert visible("tag\U000e0041") == "tag\\U000e0041"
    assert visible("Rechnung Nr. 5 — Müller GmbH 😀") == "Rechnung Nr. 5 — Müller GmbH 😀"
    assert first_invisible("ok\u200bok") == "\u200b"
    assert first_invisible("ok") is None
    assert describe("\u202e") == "U+202E RIGHT-TO-LEFT OVERRIDE"


@settings(max_examples=500)
@given(st.text())
def test_visible_output_never_holds_an_invisible_character(text: str) -> None:
    shown = visible(text)
    assert first_invisible(shown) is None
    if first_invisible(text) is None:
        assert shown == text
    # Escaping only adds characters: nothing a person should see is dropped.
    for char in set(text) - {c for c in text if is_invisible(c)}:
        assert shown.count(char) >= text.count(char)


def test_the_documented_pattern_refuses_exactly_the_rule_in_the_bmp() -> None:
    pattern = re.compile(safe_text_pattern())
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        assert (pattern.fullmatch(char) is None) == is_invisible(char), (
            hex(code),
            unicodedata.category(char),
        )


def test_the_note_pattern_allows_newlines_and_tabs_and_refuses_the_rest_like_the_rule() -> None:
    pattern = re.compile(safe_text_pattern(multiline=True))
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        refused = first_invisible(char, multiline=True) is not None
        assert (pattern.fullmatch(char) is None) == refused, hex(code)
    assert pattern.fullmatch("wrong supplier\n\tsee ticket 42")
    assert not pattern.fullmatch("checked\r\nwith the supplier")
    assert not pattern.fullmatch("Paid \u202egnp.exe")
    assert first_invisible("a\nb", multiline=True) is None and first_invisible("a\nb") == "\n"


def test_explain_shows_bidi_controls_and_newlines_escaped() -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    data = {
        "job": {
            "id": uuid.uuid4(),
            "tenant_id": uuid.uuid4(),
            "state": "FAILED_TERMINAL",
            "state_version": 3,
            "attempt": 1,
            "max_attempts": 3,
            "fence": 1,
            "created_at": now,
            "deadline_at": now,
            "finished_at": now,
            "terminal_reason": "invoice\u202efdp.exe",
            "last_error_class": "malformed_output",
            "last_error": "line one\nevents:\n  #9 forged",
        },
        "events": [],
        "attempts": [],
        "outbox": [],
        "inbox": [],
    }
    text = render_explain(data)
    assert "\u202e" not in text and "invoice\\u202efdp.exe" in text
    assert "line one\\nevents:\\n  #9 forged" in text
    assert text.count("events:") == 2  # the real heading ("events: none"), the escaped forgery
    assert all(first_invisible(line) is None for line in text.split("\n"))
