"""A service group starts in order, reports every member, replaces only the stalled
members it may replace, and stops in the order asked (no database, no broker)."""

from __future__ import annotations

import pytest

from pipeline.service import LoopProgress, ServiceHealth
from pipeline.service_group import ServiceGroup


class Fake:
    """A service whose liveness the test sets."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.running = False
        self.progress = LoopProgress.begin()

    async def start(self) -> None:
        self.running = True
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.running = False
        self.log.append(f"stop {self.name}")

    async def run_once(self) -> None: ...

    def health(self) -> ServiceHealth:
        return self.progress.health(self.name, running=self.running)


async def test_start_health_and_stop_in_the_order_asked() -> None:
    log: list[str] = []
    group = ServiceGroup()
    for name in ("a", "b", "c"):
        await group.start(name, lambda name=name: Fake(name, log))  # type: ignore[misc]
    assert group.names() == ["a", "b", "c"] and len(group) == 3
    health = group.health()
    assert list(health) == ["a", "b", "c"]
    assert not any(h["stalled"] for h in health.values())
    with pytest.raises(ValueError):
        await group.start("a", lambda: Fake("a", log))
    await group.stop("b")
    await group.stop()
    assert log == ["start a", "start b", "start c", "stop b", "stop c", "stop a"]
    assert group.health() == {} and group.get("a") is None


async def test_only_replaceable_stalled_members_are_replaced() -> None:
    log: list[str] = []
    group = ServiceGroup()
    kept = await group.start("kept", lambda: Fake("kept", log))
    first = await group.start("loop", lambda: Fake("loop", log), replace=True)
    assert await group.replace_stalled() == []
    kept.running = first.running = False  # both loops died; the group still answers
    assert await group.replace_stalled() == ["loop"]
    fresh = group.get("loop")
    assert isinstance(fresh, Fake) and fresh is not first and fresh.running
    assert group.get("kept") is kept and group.health()["kept"]["stalled"] is True
    assert log == ["start kept", "start loop", "stop loop", "start loop"]
