"""Pure parts of the console: evidence segments, revealed text, signed forms, session ids."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta, timezone

from pipeline.api.console.render import ago_text, iso_text, utc_text
from pipeline.api.console.session import FormSigner
from pipeline.api.evidence_marks import Span, marked_pages, reveal
from pipeline.settings import Settings
from pipeline.tenants.sessions import SESSION_ID_BYTES, session_digest


def test_overlapping_spans_mark_every_character_once_and_anchor_each_field() -> None:
    text = "VAT FR 123 Acme\fTotal 10,00"
    spans = [
        Span("supplier.name", 1, 4, 15),
        Span("supplier.vat_id", 1, 4, 10),
        Span("gross_total", 2, 6, 11),
        Span("outside", 2, 6, 99),
    ]
    pages = marked_pages(text, spans)
    assert ["".join(s.text for s in page) for page in pages] == text.split("\f")
    first = pages[0]
    assert [(s.text, s.fields, s.anchors) for s in first] == [
        ("VAT ", (), ()),
        (
            "FR 123",
            ("supplier.name", "supplier.vat_id"),
            ("ev-supplier-name", "ev-supplier-vat_id"),
        ),
        (" Acme", ("supplier.name",), ()),
    ]
    assert [(s.text, s.fields) for s in pages[1]] == [("Total ", ()), ("10,00", ("gross_total",))]


def test_reveal_escapes_markup_and_shows_hidden_characters() -> None:
    out = str(reveal('<script>x</script><!-- c --> "q" \u202eevil\u200b\tok\n'))
    assert "<script>" not in out and "<!--" not in out
    assert "&lt;script&gt;x&lt;/script&gt;&lt;!-- c --&gt; &#34;q&#34;" in out
    assert "\u202e" not in out and "\u200b" not in out
    assert "⟨U+202E⟩" in out and "⟨U+200B⟩" in out and "\tok\n" in out


def test_csrf_tokens_and_login_nonces_are_bound_to_their_session_and_key() -> None:
    signer = FormSigner(Settings(console_session_key="s" * 40))
    other = FormSigner(Settings(console_session_key="t" * 40))
    session, another = "a" * 43, "b" * 43
    token = signer.csrf_token(session)
    assert signer.csrf_ok(session, token) and not signer.csrf_ok(session, token[:-1] + "x")
    assert not signer.csrf_ok(another, token)  # bound to its session
    assert not other.csrf_ok(session, token)  # and to the signing key
    assert not signer.csrf_ok(session, "é" + token[1:])  # non-ASCII: refused, not raised
    login_cookie, login_token = signer.login_nonce()
    assert signer.login_ok(login_cookie, login_token)
    assert not signer.login_ok(login_cookie, "x") and not other.login_ok(login_cookie, login_token)


def test_times_read_relative_with_the_exact_second_for_the_tooltip() -> None:
    now = datetime(2026, 12, 7, 1, 2, 3, 456789, tzinfo=UTC)
    at = now - timedelta(minutes=3, seconds=5)
    assert ago_text(at, now) == "3m 5s ago"
    assert ago_text(now - timedelta(days=2, hours=4), now) == "2d 4h ago"
    assert ago_text(now + timedelta(seconds=40), now) == "in 40s"
    assert ago_text(now, now) == "just now" and ago_text(None) == "-"
    paris = now.astimezone(timezone(timedelta(hours=1)))
    assert utc_text(paris) == "2026-12-07 01:02:03 UTC"
    assert iso_text(paris) == "2026-12-07T01:02:03+00:00"


def test_session_ids_outside_their_form_never_reach_the_database() -> None:
    good = secrets.token_urlsafe(SESSION_ID_BYTES)
    digest = session_digest(good)
    assert digest is not None and len(digest) == 64 and good not in digest
    for bad in (None, "", good[:-1], good + "A", good[:-1] + "é", good[:-1] + ".", "x.y"):
        assert session_digest(bad) is None
