"""KeyCache's bookkeeping without a database: the fill race, its bounds, its fail-safe."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.api.key_cache import KeyCache
from pipeline.tenants import Principal, VerifiedKey


class _Listener:
    def __init__(self) -> None:
        self.live = True


def cache(**kw: Any) -> KeyCache:
    c = KeyCache(
        "postgresql://unused",
        max_entries=kw.pop("max_entries", 10),
        **{"max_age_seconds": 60.0, **kw},
    )
    c.listener = _Listener()  # type: ignore[assignment]
    return c


def verified(expires_at: datetime | None = None) -> VerifiedKey:
    p = Principal(uuid.uuid4(), uuid.uuid4(), "t", frozenset({"jobs"}))
    return VerifiedKey(p, expires_at)


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_change_during_the_read_voids_the_fill() -> None:
    c = cache()
    v = verified()
    ticket = c.ticket()
    c._on_change(str(v.principal.key_id))  # revoked while the read was in flight
    assert not c.put(ticket, "d", v)
    assert c.get("d", NOW) is None
    assert c.put(c.ticket(), "d", v)
    assert c.get("d", NOW) == v.principal


def test_a_notification_drops_only_its_key() -> None:
    c = cache()
    a, b = verified(), verified()
    c.put(c.ticket(), "a", a)
    c.put(c.ticket(), "b", b)
    c._on_change(str(a.principal.key_id))
    assert c.get("a", NOW) is None
    assert c.get("b", NOW) == b.principal
    c._on_change("*")
    assert len(c) == 0


def test_not_live_neither_answers_nor_fills() -> None:
    c = cache()
    v = verified()
    c.put(c.ticket(), "d", v)
    c.listener.live = False  # type: ignore[misc]
    assert c.ticket() is None
    assert c.get("d", NOW) is None
    assert not c.put(None, "d", v)
    c.listener.live = True  # type: ignore[misc]
    assert c.get("d", NOW) is None  # emptied while it was deaf
    assert c.bypasses == 1


def test_size_bound_evicts_the_least_recently_used() -> None:
    c = cache(max_entries=2)
    keys = [verified() for _ in range(3)]
    c.put(c.ticket(), "0", keys[0])
    c.put(c.ticket(), "1", keys[1])
    assert c.get("0", NOW) is not None  # 0 is now the most recent
    c.put(c.ticket(), "2", keys[2])
    assert len(c) == 2
    assert c.get("1", NOW) is None
    assert c.get("0", NOW) is not None


def test_expiry_margin_and_age(monkeypatch: pytest.MonkeyPatch) -> None:
    c = cache(max_age_seconds=5.0)
    c.put(c.ticket(), "e", verified(NOW + timedelta(seconds=10)))
    assert c.get("e", NOW) is not None
    assert c.get("e", NOW + timedelta(seconds=8.5)) is None  # within the margin
    c.put(c.ticket(), "f", verified())
    import pipeline.api.key_cache as kc

    real = kc.time.monotonic
    monkeypatch.setattr(kc.time, "monotonic", lambda: real() + 6)
    assert c.get("f", NOW) is None  # older than max_age_seconds
