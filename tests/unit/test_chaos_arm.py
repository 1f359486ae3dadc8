"""Arming a crash point in an actor: once, and never in the process Ray put in its place.

The reply to ``arm`` can be lost when work passes the point before it leaves:
the process is dead, or stopped (a stop-armed point), and a stopped process
never replies. The harness used to retry the call, which armed the freshly
restarted, never started actor (the 2,000-invoice run stalled every delivery
for 30 s that way), or wait for ever on a stopped one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from ray.exceptions import ActorUnavailableError

from benchmarks.chaos.faults import _arm
from benchmarks.chaos.stack import Member
from pipeline import checkpoints


class Method:
    """An actor method whose ``remote()`` answers with ``result`` (a value, an
    exception, or None: no reply ever)."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.calls = 0

    def remote(self, *_args: Any) -> Any:
        self.calls += 1
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if isinstance(self.result, BaseException):
            fut.set_exception(self.result)
        elif self.result is not None:
            fut.set_result(self.result)
        return SimpleNamespace(future=lambda: fut)


@pytest.fixture
def process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


async def test_a_stopped_process_counts_as_armed_without_its_reply(
    process: subprocess.Popen[bytes],
) -> None:
    arm = Method(None)  # the process stopped at the point before replying
    member = Member("driver-0", SimpleNamespace(pid=Method(process.pid), arm=arm))
    os.kill(process.pid, signal.SIGSTOP)
    try:
        pid = await asyncio.wait_for(_arm(member, checkpoints.ATTEMPT_ANSWERED, "stop"), 10)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    assert pid == process.pid and arm.calls == 1


async def test_a_process_that_died_while_arming_is_not_armed_again(
    process: subprocess.Popen[bytes],
) -> None:
    arm = Method(ActorUnavailableError("the actor died", None))
    member = Member("delivery", SimpleNamespace(pid=Method(process.pid), arm=arm))
    process.kill()
    process.wait()
    pid = await asyncio.wait_for(_arm(member, checkpoints.DELIVERY_ANSWERED), 10)
    assert pid == process.pid
    assert arm.calls == 1  # never sent to the process Ray restarts in its place
