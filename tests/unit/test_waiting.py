"""pipeline.waiting.wait_within: wait_for's contract without its Python 3.11 race."""

from __future__ import annotations

import asyncio
import sys

import pytest

from pipeline.waiting import wait_within


async def _loop_until_cancelled(wake: asyncio.Event, wait: object) -> None:
    """A loop that waits for ``wake`` with a limit, as the scheduler and the monitors do."""
    while True:
        await wait(wake.wait(), 10)  # type: ignore[operator]
        wake.clear()


async def _cancel_as_it_wakes(wait: object) -> bool:
    """Wake the loop and cancel it in the same step; True if the cancellation ended it."""
    wake = asyncio.Event()
    task = asyncio.create_task(_loop_until_cancelled(wake, wait))
    await asyncio.sleep(0)  # the loop is now waiting
    wake.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
        return False
    return task.cancelled()


async def test_a_cancellation_arriving_as_the_wait_completes_ends_the_loop() -> None:
    assert await _cancel_as_it_wakes(wait_within)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the race is Python 3.11's wait_for")
async def test_asyncio_wait_for_loses_that_cancellation_on_python_3_11() -> None:
    # Why the module exists: the same loop with asyncio.wait_for survives its cancel().
    assert not await _cancel_as_it_wakes(asyncio.wait_for)


async def test_returns_the_result_in_time() -> None:
    async def answer() -> int:
        await asyncio.sleep(0.01)
        return 42

    assert await wait_within(answer(), 1.0) == 42


async def test_times_out_and_cancels_the_call() -> None:
    cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await wait_within(slow(), 0.05)
    assert cancelled.is_set()


async def test_none_waits_without_limit_and_zero_times_out_a_pending_call() -> None:
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.02, fut.set_result, "late")
    assert await wait_within(fut, None) == "late"
    with pytest.raises(TimeoutError):
        await wait_within(asyncio.sleep(1), 0)
