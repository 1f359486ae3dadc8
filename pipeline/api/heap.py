"""A served app's heap, frozen once it has started, so that full collections skip it.

CPython's cyclic collector walks every tracked object in a full (generation 2)
collection. An intake process holds about 94,000 of them after start (FastAPI,
pydantic, asyncpg), nearly all alive until the process ends, and a full
collection over them took 45-76 ms here while finding nothing to free
(``collected 0``). Every request in flight waits that long: at 200 Poisson
accepts/s under uvicorn it was the largest single stall in the acceptance tail
(``docs/benchmarks.md``, seventh pass).

:func:`freeze_heap` collects once and moves what is left to the permanent
generation (:func:`gc.freeze`), the way pre-forking servers do: later
collections walk only what was allocated after start. The cost: a frozen
object that later becomes part of an unreachable cycle is not freed (objects
freed by reference counting, most of them, still are). The startup heap is the
app's modules, routes, settings, pool and caches, which live as long as the
process. ``Settings.freeze_heap_at_start`` turns it off.

The uvicorn factory (:func:`pipeline.api.app.app_from_env`) wraps its app. The
Serve ingress does not: Ray Serve (2.60) already collects and freezes a
replica's heap once its user code has started (``RAY_SERVE_FREEZE_GC_ON_STARTUP``,
on by default), the ASGI lifespan included.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

log = logging.getLogger(__name__)


def freeze_heap() -> int:
    """Collect, then freeze every object still tracked; return how many are frozen."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("froze %d objects in %.0f ms", frozen, (time.perf_counter() - started) * 1000)
    return frozen


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
            freeze_heap()
            yield state

    app.router.lifespan_context = lifespan
    return app
