"""A job's trace starts at acceptance even where no tracing SDK runs.

``root_span`` makes up the ids itself then, and the ``traceparent`` it hands back
(what the job row stores) must name the same trace and span the process treats
as current, so log lines and ``explain`` agree with the stored row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from opentelemetry import trace

from pipeline import tracing

W3C = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-01$")


@pytest.fixture
def no_sdk() -> Iterator[None]:
    before = tracing._installed
    tracing.install(trace.NoOpTracerProvider())
    try:
        yield
    finally:
        tracing.install(before)


def test_root_span_without_an_sdk_stores_the_ids_it_makes_current(no_sdk: None) -> None:
    assert tracing.current_trace_id() is None
    with tracing.root_span("fenceline.accept", {"fenceline.tenant": "t"}) as (span, made):
        assert W3C.match(made), made
        assert tracing.current_traceparent() == made
        assert tracing.current_trace_id() == tracing.trace_id_of(made)
        assert tracing.traceparent_of(span) == made
        # A child started inside continues the same trace.
        with tracing.child_span("fenceline.validate") as child:
            assert f"{child.get_span_context().trace_id:032x}" == tracing.trace_id_of(made)
    assert tracing.current_trace_id() is None


def test_each_root_span_starts_its_own_trace(no_sdk: None) -> None:
    seen = set()
    for _ in range(50):
        with tracing.root_span("fenceline.accept") as (_, made):
            seen.add(tracing.trace_id_of(made))
    assert len(seen) == 50
