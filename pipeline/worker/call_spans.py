"""What an engine call's span records once the call has ended: its usage, TTFT and
finish reason, or which bound or error ended it (docs/observability.md). The call
itself runs in :mod:`pipeline.worker.attempt`.
"""

from __future__ import annotations

import asyncio

from pipeline.errors import FencelineError, ProviderRateLimited, ProviderTimeout
from pipeline.extraction import Completion
from pipeline.tracing import Span, set_error, set_timeout


def describe_call(span: Span, call: asyncio.Task[Completion], bound: str) -> None:
    """Tokens, TTFT and finish reason of an answered call, or which timeout ended it.

    A :class:`ProviderTimeout` raised by the engine's own clock (its cause is a
    local timeout) fired at ``bound``; one the provider answered (HTTP 408) is the
    provider's.
    """
    exc = call.exception()
    if exc is None:
        c = call.result()
        span.set_attribute("gen_ai.usage.input_tokens", c.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", c.usage.completion_tokens)
        span.set_attribute("gen_ai.response.model", c.model)
        if c.pool:
            span.set_attribute("fenceline.pool", c.pool)
        if c.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [c.finish_reason])
        if c.timings.ttft_s is not None:
            span.set_attribute("fenceline.ttft_seconds", c.timings.ttft_s)
        span.set_attribute("fenceline.e2e_seconds", c.timings.e2e_s)
        return
    if isinstance(exc, ProviderTimeout):
        local = (
            isinstance(exc.__cause__, TimeoutError)
            or "TimeoutException" in type(exc.__cause__).__name__
        )
        set_timeout(span, bound if local else "provider", str(exc))
    elif isinstance(exc, FencelineError):
        set_error(span, exc.error_class, str(exc))
        if isinstance(exc, ProviderRateLimited) and exc.retry_after is not None:
            span.set_attribute("fenceline.retry_after_seconds", exc.retry_after)
    else:
        set_error(span, type(exc).__name__, str(exc))
