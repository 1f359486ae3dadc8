"""The one hook registry: order, the first failure stops the rest, and the three sites use it."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.api.intake import IntakeService
from pipeline.hooks import Hooks
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import WorkerConfig

POOL: Any = None


async def test_hooks_run_in_the_order_added_with_the_connection_and_event() -> None:
    seen: list[tuple[str, object, int]] = []

    def recorder(tag: str) -> Any:
        async def hook(conn: object, event: int) -> None:
            seen.append((tag, conn, event))

        return hook

    hooks: Hooks[object, int] = Hooks([recorder("a")])
    hooks.add(recorder("b"))
    hooks.extend([recorder("c")])
    conn = object()
    await hooks.run(conn, 7)
    assert seen == [("a", conn, 7), ("b", conn, 7), ("c", conn, 7)]
    assert len(hooks) == 3 and bool(hooks)
    assert not Hooks()


async def test_the_first_failing_hook_stops_the_rest_and_propagates() -> None:
    ran: list[str] = []

    async def first(_c: None, _e: str) -> None:
        ran.append("first")

    async def boom(_c: None, _e: str) -> None:
        raise RuntimeError("roll back")

    async def never(_c: None, _e: str) -> None:
        ran.append("never")

    hooks: Hooks[None, str] = Hooks([first, boom, never])
    with pytest.raises(RuntimeError, match="roll back"):
        await hooks.run(None, "e")
    assert ran == ["first"]


async def test_a_hook_added_while_running_waits_for_the_next_run() -> None:
    ran: list[str] = []
    hooks: Hooks[None, str] = Hooks()

    async def late(_c: None, _e: str) -> None:
        ran.append("late")

    async def adder(_c: None, _e: str) -> None:
        ran.append("adder")
        hooks.add(late)

    hooks.add(adder)
    await hooks.run(None, "1")
    assert ran == ["adder"]


async def test_the_three_sites_hold_one_registry_each() -> None:
    settings = Settings()

    async def hook(_c: Any, _e: Any) -> None: ...

    store = JobStore(POOL, settings)
    assert isinstance(store.settle_hooks, Hooks) and not store.settle_hooks
    intake = IntakeService(POOL, store, POOL, settings, documents=POOL, accept_hook=hook)
    assert isinstance(intake.accept_hooks, Hooks) and list(intake.accept_hooks) == [hook]
    assert not IntakeService(POOL, store, POOL, settings, documents=POOL).accept_hooks
    runner = AttemptRunner(store, POOL, WorkerConfig(worker_id="w"), on_settled=hook)
    assert list(runner.on_settled) == [hook]
