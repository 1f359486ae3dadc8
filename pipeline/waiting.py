"""Waiting for something with a time limit, without ``asyncio.wait_for``'s 3.11 race.

On Python 3.11 ``asyncio.wait_for`` runs the awaited call in a task of its own;
when the caller is cancelled at the moment that call completes, it returns the
result and the cancellation is lost. A loop stopped by ``cancel()`` then keeps
running and whoever awaits it waits for ever (the DLQ depth monitor hung
``make test`` for 600 s this way). ``asyncio.timeout`` runs the call in the
caller's own task, so a cancellation is never swallowed; :func:`wait_within` is
``wait_for``'s signature on top of it. ``ruff`` bans ``asyncio.wait_for`` in the
product's packages (``pyproject.toml``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, raising :class:`TimeoutError` after ``seconds`` (None: no limit).

    On a timeout the awaited call is cancelled, as with ``asyncio.wait_for``; a
    cancellation of the caller always propagates.
    """
    async with asyncio.timeout(seconds):
        return await awaitable
