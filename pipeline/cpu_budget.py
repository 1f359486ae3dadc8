"""The CPU one piece of reading may spend: a budget per context, checked in hot loops.

A budget is this thread's CPU time (neither a busy machine nor another thread
spends it), held in a context variable so that every reading below the block that
set it (the invoice's number reader, extraction's stages) checks the same one
without passing it down. :func:`cpu_budget` opens one; :func:`spend` raises
:class:`~pipeline.errors.ExtractionBudgetExceeded` once it is gone. Outside any
budget :func:`spend` does nothing. What the budget is for, and its limits, is
:mod:`pipeline.extraction.bounds`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pipeline.errors import ExtractionBudgetExceeded

#: The running budget of this context: (what to say once it is spent, the thread CPU
#: time it ends at).
_BUDGET: ContextVar[tuple[str, float] | None] = ContextVar("extraction_budget", default=None)


@contextmanager
def cpu_budget(seconds: float | None, what: str) -> Iterator[None]:
    """Let the block spend ``seconds`` of this thread's CPU time (None: unbounded);
    :func:`spend` inside it raises once they are spent. A budget inside another never
    outlasts it: the earlier end holds."""
    outer = _BUDGET.get()
    if seconds is None:
        yield
        return
    ends = time.thread_time() + seconds
    running = (f"{what} spent more than {seconds:g} s of CPU", ends)
    if outer is not None and outer[1] < ends:
        running = outer
    token = _BUDGET.set(running)
    try:
        yield
    finally:
        _BUDGET.reset(token)


def spend() -> None:
    """Called in reading's hot loops: raise
    :class:`~pipeline.errors.ExtractionBudgetExceeded` once the running budget is spent."""
    budget = _BUDGET.get()
    if budget is not None and time.thread_time() > budget[1]:
        raise ExtractionBudgetExceeded(budget[0])
