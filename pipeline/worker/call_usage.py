"""The usage an engine call reported, as an attempt row records it: from a completion,
or from a failed call that still billed (``FencelineError.usage``)."""

from __future__ import annotations

from pipeline.errors import FencelineError
from pipeline.usage import AttemptUsage, ReportedUsage


def recorded_usage(u: ReportedUsage, engine: str) -> AttemptUsage:
    """An engine's reported usage as the attempt row records it."""
    return AttemptUsage(
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        cached_tokens=u.cached_tokens,
        engine=engine,
    )


def spent_usage(exc: FencelineError, engine: str) -> AttemptUsage | None:
    """The usage a failed call still reported (see ``FencelineError.usage``)."""
    return None if exc.usage is None else recorded_usage(exc.usage, exc.engine or engine)
