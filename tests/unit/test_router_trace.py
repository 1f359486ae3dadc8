"""The router's choice in the job's trace, and the trace context handed to vLLM.

No Ray and no vLLM engine: the router runs with a character tokenizer and engine
handles that record what they were sent; the vLLM side is checked against the
installed vLLM 0.32 API (``AsyncLLM.generate(..., trace_headers=...)``, the
engine's ``otlp_traces_endpoint``) with a stand-in ``AsyncLLM``. What vLLM then
exports (its ``llm_request`` span) needs a running engine and a collector; it is
not asserted here (docs/observability.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from deployments.engine import GenerateRequest, PoolEngine
from deployments.pools import PoolConfig, parse_pools
from deployments.router import ROUTE_REASON, ContextRouter, ServeEngine
from deployments.vllm_engine import Stream, VLLMEngine, engine_tracing, stream_request
from pipeline import tracing
from pipeline.errors import ContextTooLong
from pipeline.extraction import Completion, Timings
from pipeline.settings import Settings
from pipeline.usage import Usage
from tests.unit.test_pool_engine import SCHEMA, TinyEngine, TinyTokenizer

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

POOLS = {
    "defaults": {"model": "/models/m", "cpu": {"kvcache_space_gib": 2}},
    "pools": [{"name": "short", "max_model_len": 64}, {"name": "long", "max_model_len": 4096}],
}


class Recorded:
    """An engine deployment handle: ``generate.remote(request)`` records the request."""

    def __init__(self) -> None:
        self.requests: list[GenerateRequest] = []
        self.generate = self

    def remote(self, request: GenerateRequest) -> asyncio.Future[Completion]:
        self.requests.append(request)
        fut: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        fut.set_result(
            Completion(
                text="{}",
                usage=Usage(prompt_tokens=1, completion_tokens=1),
                timings=Timings(e2e_s=0.01),
                engine="rec",
                model="m",
                pool=request.pool,
            )
        )
        return fut


def router() -> tuple[ContextRouter, dict[str, Recorded]]:
    handles = {"short": Recorded(), "long": Recorded()}
    r = ContextRouter(parse_pools(POOLS), handles, tokenizer_factory=lambda _: TinyTokenizer())
    return r, handles


def only(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in spans.get_finished_spans() if s.name == name]
    return span


async def test_the_router_choice_is_a_span_under_the_callers_and_vllm_gets_the_context(
    spans: InMemorySpanExporter,
) -> None:
    r, handles = router()
    messages = [{"role": "user", "content": "x" * 40}]  # 40 + 17 template chars = 57 tokens
    with tracing.job_span(tracing.SPAN_ENGINE, None) as engine_call:
        traceparent = tracing.current_traceparent()
        await r.complete(
            messages, json_schema=SCHEMA, max_tokens=32, timeout=5, traceparent=traceparent
        )
    choose = only(spans, tracing.SPAN_ROUTE)
    assert choose.parent is not None
    assert choose.parent.span_id == engine_call.get_span_context().span_id
    assert choose.context.trace_id == engine_call.get_span_context().trace_id
    attrs = dict(choose.attributes or {})
    assert attrs["fenceline.pool"] == "long"  # 57 + 32 > 64: the short pool is skipped
    assert attrs["gen_ai.usage.input_tokens"] == 57
    assert attrs["gen_ai.request.max_tokens"] == 32
    assert attrs["fenceline.route.max_model_len"] == 4096
    assert attrs["fenceline.route.skipped"] == ("short",)
    assert attrs["fenceline.route.reason"] == ROUTE_REASON
    # The engine replica continues the caller's context: vLLM's span joins the same trace.
    (sent,) = handles["long"].requests
    assert not handles["short"].requests
    assert sent.traceparent == traceparent and sent.pool == "long"


async def test_a_prompt_too_long_for_every_pool_fails_the_router_span(
    spans: InMemorySpanExporter,
) -> None:
    r, handles = router()
    with pytest.raises(ContextTooLong):
        await r.complete(
            [{"role": "user", "content": "x" * 5000}], json_schema=SCHEMA, max_tokens=32,
            timeout=5, traceparent=tracing.new_traceparent(),
        )  # fmt: skip
    choose = only(spans, tracing.SPAN_ROUTE)
    assert choose.status.status_code is StatusCode.ERROR
    assert not handles["short"].requests and not handles["long"].requests


async def test_serve_engine_sends_the_current_span_as_the_routers_parent(
    spans: InMemorySpanExporter,
) -> None:
    sent: dict[str, Any] = {}

    class Handle:
        def __init__(self) -> None:
            self.complete = self

        def remote(self, *args: Any, **kwargs: Any) -> asyncio.Future[Completion]:
            sent.update(kwargs)
            return Recorded().remote(GenerateRequest([], {}, 1, 1.0, pool="short"))

    with tracing.job_span(tracing.SPAN_ENGINE, None):
        expected = tracing.current_traceparent()
        await ServeEngine(Handle()).complete([], json_schema=SCHEMA, max_tokens=8, timeout=5)  # type: ignore[arg-type]
    assert expected is not None and sent["traceparent"] == expected


async def test_the_pool_engine_hands_the_context_to_its_engine_as_trace_headers() -> None:
    made: list[TinyEngine] = []

    def factory(pool: PoolConfig, metrics: Any) -> TinyEngine:
        made.append(TinyEngine(pool, metrics))
        return made[-1]

    pool = parse_pools(POOLS).pools[1]
    engine = PoolEngine(pool, engine_cls=factory)
    traceparent = tracing.new_traceparent()
    messages = [{"role": "user", "content": "hi"}]
    await engine.generate(GenerateRequest(messages, SCHEMA, 16, 5.0, traceparent=traceparent))
    await engine.generate(GenerateRequest(messages, SCHEMA, 16, 5.0))
    assert made[0].trace_headers == [{"traceparent": traceparent}, None]
    engine.stop()


def test_vllm_exports_where_fenceline_does() -> None:
    assert engine_tracing(Settings()) == ({}, {})
    http = engine_tracing(Settings(otlp_endpoint="http://collector:4318/"))
    assert http == (
        {"otlp_traces_endpoint": "http://collector:4318/v1/traces"},
        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
    )
    grpc = engine_tracing(Settings(otlp_endpoint="http://collector:4317", otlp_protocol="grpc"))
    assert grpc == (
        {"otlp_traces_endpoint": "http://collector:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
    )
    # The installed vLLM takes the argument and validates it into its observability config.
    from vllm import AsyncEngineArgs
    from vllm.config import ObservabilityConfig

    pool = parse_pools(POOLS).pools[0]
    args = AsyncEngineArgs(**pool.engine_kwargs(), **http[0])
    assert args.otlp_traces_endpoint == "http://collector:4318/v1/traces"
    config = ObservabilityConfig(otlp_traces_endpoint=args.otlp_traces_endpoint)
    assert config.otlp_traces_endpoint == "http://collector:4318/v1/traces"


class StandInLLM:
    """What :func:`stream_request` uses of vLLM's ``AsyncLLM``; records ``trace_headers``."""

    def __init__(self, endpoint: str | None) -> None:
        self.seen: list[Any] = []
        self.renderer = self
        self.observability_config = type("O", (), {"otlp_traces_endpoint": endpoint})()

    async def render_cmpl_async(self, prompts: list[Any]) -> list[Any]:
        return prompts

    async def generate(
        self, prompt: Any, params: Any, request_id: str, **kw: Any
    ) -> AsyncIterator[Any]:
        self.seen.append(kw.get("trace_headers"))
        output = type("C", (), {"token_ids": [1], "text": "{}", "finish_reason": "stop"})()
        yield type(
            "Out", (), {"prompt_token_ids": [1], "num_cached_tokens": 0, "outputs": [output],
                        "finished": True, "metrics": None},
        )()  # fmt: skip


@pytest.mark.parametrize(
    ("endpoint", "expected"), [("http://c:4318/v1/traces", True), (None, False)]
)
async def test_vllm_gets_trace_headers_only_when_it_exports(
    endpoint: str | None, expected: bool
) -> None:
    llm = StandInLLM(endpoint)
    engine = VLLMEngine.__new__(VLLMEngine)  # no engine start: the request path only
    engine.llm, engine.lora = llm, None  # type: ignore[assignment]
    engine.traced = llm.observability_config.otlp_traces_endpoint is not None
    headers = {"traceparent": tracing.new_traceparent()}
    got = await engine.stream([1, 2], SCHEMA, 8, "r1", 0.0, Stream(), trace_headers=headers)
    assert got.finish_reason == "stop"
    assert llm.seen == [headers if expected else None]
    # stream_request itself passes them straight to AsyncLLM.generate.
    await stream_request(llm, [1], object(), "r2", 0.0, trace_headers=headers)  # type: ignore[arg-type]
    assert llm.seen[-1] == headers
