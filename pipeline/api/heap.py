"""A served intake freezes its heap once its own startup is done.

Why: :mod:`pipeline.process_heap` (a full collection over the ~94,000 startup
objects of an intake took 45-76 ms and freed nothing, with every request in flight
waiting). ``Settings.freeze_heap_at_start`` turns it off.

The uvicorn factory (:func:`pipeline.api.app.app_from_env`) wraps its app. The
Serve ingress does not: Ray Serve (2.60) already collects and freezes a
replica's heap once its user code has started (``RAY_SERVE_FREEZE_GC_ON_STARTUP``,
on by default), the ASGI lifespan included.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from pipeline.process_heap import freeze_startup_heap


def with_frozen_heap(app: FastAPI, *, enabled: bool = True) -> FastAPI:
    """Freeze the heap once ``app``'s own startup (pool, warm-up, caches) is done.

    Only a server entry point wraps its app (uvicorn's factory): a test process
    builds many apps and should not freeze its heap.
    """
    if not enabled:
        return app
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:
        async with inner(a) as state:
            freeze_startup_heap()
            yield state

    app.router.lifespan_context = lifespan
    return app
