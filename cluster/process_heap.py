"""The driver process's heap after start-up (issue 21: pipeline overhead)."""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Move what start-up allocated (modules, the warmed caches, the pool) out of the
    garbage collector's reach: ``gc.freeze()`` after a full collection.

    A driver's attempts allocate briskly (prompts, schemas, answers, grounding), so
    full collections keep coming, and each one scanned the whole start-up heap with
    the event loop stopped: five of 0.1-0.15 s in one ~15 s run of the 40-document
    overhead benchmark (docs/benchmarks.md). Frozen objects are never collected;
    start-up objects live as long as the process anyway.
    """
    gc.collect()
    gc.freeze()
