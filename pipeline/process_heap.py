"""A long-running process's heap after start-up, frozen out of the collector's reach.

CPython's cyclic collector walks every tracked object in a full (generation 2)
collection, with the event loop stopped. What start-up allocates (modules, warmed
caches, the pool, routes) lives as long as the process, so walking it again and
again finds nothing to free:

* a task driver (``cluster/drivers.py``): its attempts allocate briskly (prompts,
  schemas, answers, grounding), and full collections of 0.1-0.15 s came five
  times in one ~15 s run of the 40-document overhead benchmark;
* the intake under uvicorn (``pipeline.api.heap``): about 94,000 startup objects,
  a full collection of 45-76 ms that freed nothing, at 200 accepts/s the
  largest single stall in the acceptance tail (``docs/history/benchmarks-passes.md``).

:func:`freeze_startup_heap` collects once and moves what is left to the permanent
generation (:func:`gc.freeze`), the way pre-forking servers do: later collections
walk only what was allocated after start. The cost: a frozen object that later
becomes part of an unreachable cycle is never freed (objects freed by reference
counting, most of them, still are).
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect, then freeze every object still tracked; return how many are frozen."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("froze %d objects in %.0f ms", frozen, (time.perf_counter() - started) * 1000)
    return frozen
