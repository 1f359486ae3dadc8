"""Every long-running loop has the one service shape, and its health tells the truth.

No database or broker: the loops are built, not started (construction opens nothing),
and the base's own loop runs over passes this test scripts with events.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, cast

import pytest

from pipeline.api.key_cache import KeyCache
from pipeline.api.status_stream import EventHub
from pipeline.delivery.dispatcher import DeliveryDispatcher
from pipeline.delivery.endpoints import SecretBox
from pipeline.delivery.policy import DeliveryConfig
from pipeline.jobs import JobStore
from pipeline.jobs.reaper import Reaper
from pipeline.messaging.broker import BrokerConfig
from pipeline.messaging.consumer import ACK, QueueConsumer
from pipeline.messaging.dlq import DeadLetterArchiver
from pipeline.messaging.dlq_retention import DeadLetterRetention, RetentionConfig
from pipeline.messaging.inbox import InboxConsumer
from pipeline.messaging.outbox import OutboxRelay
from pipeline.messaging.scheduler import NotificationListener, Scheduler
from pipeline.periodic import PeriodicPass
from pipeline.service import LoopProgress, Service, ServiceHealth
from pipeline.settings import Settings
from pipeline.tenants.reconciliation import SpendReconciler
from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import WorkerConfig
from pipeline.worker.fleet import DriverAutoscaler
from pipeline.worker.loop import DriverLoop
from pipeline.worker.scaling import ScalingConfig

SETTINGS = Settings(amqp_url="amqp://guest:guest@127.0.0.1:5672/")
#: Construction only stores the pool; nothing here touches it.
POOL: Any = None


def _store() -> JobStore:
    return JobStore(POOL, SETTINGS)


async def _ack(_d: Any) -> Any:
    return ACK


#: Every loop of the system, built as cheaply as it can be.
LOOPS: dict[str, Callable[[], object]] = {
    "reaper": lambda: Reaper(_store()),
    "autoscaler": lambda: DriverAutoscaler(
        store=_store(), fleet=cast(Any, None), config=ScalingConfig(), concurrency=2
    ),
    "dlq retention": lambda: DeadLetterRetention(POOL, RetentionConfig.from_settings(SETTINGS)),
    "spend reconciler": lambda: SpendReconciler(POOL, SETTINGS),
    "outbox relay": lambda: OutboxRelay(POOL, SETTINGS),
    "scheduler": lambda: Scheduler(POOL, SETTINGS),
    "listener": lambda: NotificationListener(SETTINGS.database_url, "ch", lambda _p: None),
    "dispatcher": lambda: DeliveryDispatcher(
        POOL, DeliveryConfig(), client=cast(Any, None), box=SecretBox(bytes(32))
    ),
    "queue consumer": lambda: QueueConsumer(
        BrokerConfig.required(SETTINGS, "test"),
        "q",
        _ack,
        prefetch=1,
        name="t",
        source="t",
    ),
    "inbox consumer": lambda: InboxConsumer(POOL, SETTINGS),
    "dlq archiver": lambda: DeadLetterArchiver(POOL, SETTINGS),
    "event hub": lambda: EventHub(POOL, SETTINGS),
    "key cache": lambda: KeyCache(SETTINGS.database_url, max_entries=4, max_age_seconds=60.0),
    "driver loop": lambda: DriverLoop(
        AttemptRunner(_store(), cast(Any, None), WorkerConfig(worker_id="w1"))
    ),
}


@pytest.mark.parametrize("name", sorted(LOOPS))
async def test_every_loop_is_a_service_that_is_not_running_before_start(name: str) -> None:
    loop = LOOPS[name]()
    assert isinstance(loop, Service)
    for method in ("start", "stop", "run_once"):
        assert inspect.iscoroutinefunction(getattr(loop, method)), method
    health = loop.health()
    assert isinstance(health, ServiceHealth)
    assert health.name
    assert (health.running, health.stalled, health.passes, health.last_error) == (
        False,
        True,
        0,
        "",
    )
    assert health.as_dict()["stalled"] is True


def test_a_loop_without_health_is_not_a_service() -> None:
    class Bare:
        async def start(self) -> None: ...
        async def stop(self) -> None: ...
        async def run_once(self) -> None: ...

    assert not isinstance(Bare(), Service)


class Scripted(PeriodicPass):
    """Passes that fail or succeed as the test says, each announced before it returns."""

    pass_name = "scripted pass"

    def __init__(self, outcomes: list[Exception | None]) -> None:
        self.outcomes = outcomes
        self.entered: list[asyncio.Event] = [asyncio.Event() for _ in range(len(outcomes) + 1)]
        self.gate: list[asyncio.Event] = [asyncio.Event() for _ in range(len(outcomes) + 1)]
        self.calls = 0

    def pass_interval(self) -> float:
        return 0.0

    async def run_once(self) -> None:
        n = self.calls
        self.calls += 1
        self.entered[min(n, len(self.entered) - 1)].set()
        await self.gate[min(n, len(self.gate) - 1)].wait()
        outcome = self.outcomes[n] if n < len(self.outcomes) else None
        if outcome is not None:
            raise outcome


async def test_periodic_pass_health_names_the_error_then_clears_it() -> None:
    p = Scripted([RuntimeError("database gone"), None])
    assert p.health().running is False
    await p.start()
    try:
        await p.entered[0].wait()
        assert p.health().running and p.health().passes == 0
        p.gate[0].set()  # pass 0 fails
        await p.entered[1].wait()  # the loop went on to pass 1: pass 0 is counted
        h = p.health()
        assert (h.running, h.passes, h.failed_passes) == (True, 1, 1)
        assert h.last_error == "RuntimeError: database gone"
        assert h.seconds_since_success is None
        p.gate[1].set()  # pass 1 succeeds
        await p.entered[2].wait()
        h = p.health()
        assert (h.passes, h.failed_passes, h.last_error) == (2, 1, "")
        assert h.seconds_since_success is not None
        assert p.progress is not None and p.progress.last_error == "RuntimeError: database gone"
    finally:
        p.gate[2].set()
        await p.stop()
    h = p.health()
    assert (h.running, h.stalled) == (False, True)


async def test_a_periodic_pass_with_a_stall_bound_reports_a_stuck_pass() -> None:
    p = Scripted([None])
    p.stall_seconds = 0.0
    await p.start()
    try:
        await p.entered[0].wait()  # the first pass hangs at its gate
        h = p.health()
        assert h.running and h.stalled and h.quiet_seconds > 0
    finally:
        p.gate[0].set()
        p.gate[1].set()
        await p.stop()


def test_loop_progress_stalls_only_past_its_bound_or_when_gone() -> None:
    progress = LoopProgress(started_at=100.0)
    assert not progress.stalled(30.0, running=True, now=120.0)
    assert progress.stalled(30.0, running=True, now=131.0)
    assert progress.stalled(None, running=False, now=100.0)
    assert not progress.stalled(None, running=True, now=10_000.0)
    progress.failed(ValueError("x"))
    progress.succeeded()
    h = progress.health("loop", running=True, details={"in_flight": 3})
    assert (h.passes, h.failed_passes, h.last_error) == (2, 1, "")
    assert h.as_dict()["in_flight"] == 3 and h.as_dict()["name"] == "loop"
