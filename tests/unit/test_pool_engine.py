"""PoolEngine's deployment logic on an in-process engine: no vLLM, no Ray.

``PoolEngine(pool, engine_cls=...)`` takes its engine as a factory (Ray Serve
LLM's ``engine_cls`` pattern). :class:`TinyEngine` streams a scripted answer in
chunks, so the request path (prompt rendering, context check, usage and timing,
timeout → abort, cancel → abort, malformed output, engine errors) and the
replica's metrics are exercised exactly as a Serve replica runs them.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from deployments.engine import GenerateRequest, PoolEngine
from deployments.engine_metrics import EngineMetrics
from deployments.pools import PoolConfig
from deployments.vllm_engine import Stream
from pipeline.errors import (
    ContextTooLong,
    FencelineError,
    MalformedOutput,
    ProviderTimeout,
    ProviderUnavailable,
)

SCHEMA = {"type": "object"}
MESSAGES = [{"role": "user", "content": "invoice 7"}]


class TinyTokenizer:
    """One token per character of the rendered chat (enough for render_prompt)."""

    def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        assert add_special_tokens is False
        return [ord(c) for c in text]


class TinyEngine:
    """A PoolBackend that streams ``chunks`` (two tokens each) with ``delay`` between them."""

    def __init__(self, pool: PoolConfig, metrics: EngineMetrics) -> None:
        self.pool, self.metrics = pool, metrics
        self.chunks: list[str] = ['{"total": ', '"12.50"}']
        self.delay = 0.0
        self.finish_reason = "stop"
        self.error: Exception | None = None
        self.requests: list[tuple[list[int], int, str]] = []
        self.trace_headers: list[Any] = []
        self.running: set[str] = set()
        self.aborted: list[str] = []
        self.shut_down = False

    def tokenizer(self) -> TinyTokenizer:
        return TinyTokenizer()

    async def stream(
        self,
        prompt_token_ids: list[int],
        json_schema: Any,
        max_tokens: int,
        request_id: str,
        started: float,
        into: Stream,
        trace_headers: Any = None,
    ) -> Stream:
        assert json_schema == SCHEMA
        self.requests.append((prompt_token_ids, max_tokens, request_id))
        self.trace_headers.append(trace_headers)
        self.running.add(request_id)
        into.prompt_tokens, into.cached_tokens = len(prompt_token_ids), 3
        try:
            for chunk in self.chunks:
                await asyncio.sleep(self.delay)
                if self.error is not None:
                    raise self.error
                into.text.append(chunk)
                into.token_count += 2
                into.ttft_s = into.ttft_s if into.ttft_s is not None else 0.001
                into.itl_s.extend([0.002, 0.002])
            into.finish_reason = self.finish_reason
        finally:
            self.running.discard(request_id)
        return into

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)

    async def check_health(self) -> None:
        if self.shut_down:
            raise RuntimeError("dead")

    def unfinished(self) -> int:
        return len(self.running)

    def classify(self, exc: Exception) -> FencelineError:
        return ProviderUnavailable(f"tiny: {exc}", uncertain=True)

    def shutdown(self) -> None:
        self.shut_down = True


def pool_engine(max_model_len: int = 256) -> tuple[PoolEngine, TinyEngine]:
    made: list[TinyEngine] = []

    def factory(pool: PoolConfig, metrics: EngineMetrics) -> TinyEngine:
        made.append(TinyEngine(pool, metrics))
        return made[-1]

    engine = PoolEngine({"name": "short", "max_model_len": max_model_len}, engine_cls=factory)
    return engine, made[0]


def requests_counted(engine: PoolEngine, outcome: str) -> float:
    found = re.search(
        rf'fenceline_engine_requests_total\{{outcome="{outcome}",pool="short"\}} (\S+)',
        engine.metrics_text(),
    )
    return float(found.group(1)) if found else 0.0


async def test_a_request_runs_through_the_injected_engine_with_usage_timing_and_metrics():
    engine, tiny = pool_engine()
    assert tiny.pool is engine.pool and tiny.metrics is engine.metrics
    done = await engine.complete(MESSAGES, json_schema=SCHEMA, max_tokens=32, timeout=5)
    assert done.text == '{"total": "12.50"}'
    assert done.finish_reason == "stop" and done.pool == "short" and done.engine == "vllm:short"
    ((ids, max_tokens, request_id),) = tiny.requests
    # The replica rendered the chat itself (no prompt_token_ids from the router).
    assert ids == TinyTokenizer().encode(TinyTokenizer().apply_chat_template(MESSAGES))
    assert max_tokens == 32 and done.request_id == request_id
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (len(ids), 4)
    assert done.usage.cached_tokens == 3
    assert done.timings.ttft_s == 0.001 and done.timings.itl_s == (0.002,) * 4
    assert done.timings.e2e_s > 0
    assert requests_counted(engine, "ok") == 1.0
    assert "fenceline_engine_request_seconds_count" in engine.metrics_text()
    assert (await engine.stats())["in_flight"] == 0


async def test_router_token_ids_are_used_and_an_oversized_prompt_never_reaches_the_engine():
    engine, tiny = pool_engine(max_model_len=64)
    ids = list(range(40))
    await engine.generate(GenerateRequest(MESSAGES, SCHEMA, 20, 5, prompt_token_ids=ids))
    assert tiny.requests[0][0] == ids
    with pytest.raises(ContextTooLong, match="prompt 40 \\+ max_tokens 30 > max_model_len 64"):
        await engine.generate(GenerateRequest(MESSAGES, SCHEMA, 30, 5, prompt_token_ids=ids))
    assert len(tiny.requests) == 1


async def test_a_shared_engine_reports_the_pool_the_router_chose():
    # engine-short serving a pool that is served_by it: the completion names the routed pool.
    engine, _ = pool_engine()
    routed = await engine.generate(GenerateRequest(MESSAGES, SCHEMA, 20, 5, pool="tiny"))
    own = await engine.generate(GenerateRequest(MESSAGES, SCHEMA, 20, 5))
    assert (routed.pool, own.pool) == ("tiny", "short")
    assert routed.engine == own.engine == "vllm:short"


async def test_a_timeout_aborts_the_request_and_charges_exactly_what_was_spent():
    engine, tiny = pool_engine()
    tiny.delay = 0.2
    request = GenerateRequest(MESSAGES, SCHEMA, 32, timeout=0.3, prompt_token_ids=[1] * 10)
    with pytest.raises(ProviderTimeout) as info:
        await engine.generate(request)
    assert tiny.aborted == [request.request_id]
    error = info.value
    assert error.uncertain is False and error.engine == "vllm:short"
    assert error.usage is not None
    assert (error.usage.prompt_tokens, error.usage.completion_tokens) == (10, 2)  # one chunk
    assert "2 tokens generated, request aborted" in str(error)
    assert requests_counted(engine, "timeout") == 1.0
    assert (await engine.stats())["in_flight"] == 0


async def test_a_cancelled_caller_aborts_the_engine_request():
    engine, tiny = pool_engine()
    tiny.delay = 10.0
    request = GenerateRequest(MESSAGES, SCHEMA, 32, timeout=30, prompt_token_ids=[1] * 4)
    task = asyncio.create_task(engine.generate(request))
    while not tiny.running:
        await asyncio.sleep(0.01)
    assert (await engine.stats())["in_flight"] == 1
    assert (await engine.stats())["engine_unfinished"] == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tiny.aborted == [request.request_id]
    assert requests_counted(engine, "cancelled") == 1.0
    assert (await engine.stats())["in_flight"] == 0


async def test_output_cut_at_max_tokens_is_malformed_with_its_usage():
    engine, tiny = pool_engine()
    tiny.chunks, tiny.finish_reason = ['{"total": '], "length"
    with pytest.raises(MalformedOutput) as info:
        await engine.complete(MESSAGES, json_schema=SCHEMA, max_tokens=2, timeout=5)
    assert info.value.usage is not None and info.value.usage.completion_tokens == 2
    assert requests_counted(engine, "malformed") == 1.0
    assert tiny.aborted == []


async def test_an_engine_failure_is_classified_by_the_engine():
    engine, tiny = pool_engine()
    tiny.error = RuntimeError("core died")
    with pytest.raises(ProviderUnavailable, match="tiny: core died") as info:
        await engine.complete(MESSAGES, json_schema=SCHEMA, max_tokens=8, timeout=5)
    assert info.value.uncertain is True
    assert requests_counted(engine, "error") == 1.0


async def test_stop_shuts_the_engine_down_and_later_requests_are_refused():
    engine, tiny = pool_engine()
    await engine.check_health()
    engine.stop()
    assert tiny.shut_down
    with pytest.raises(ProviderUnavailable, match="engine stopped"):
        await engine.complete(MESSAGES, json_schema=SCHEMA, max_tokens=8, timeout=5)
    engine.stop()  # idempotent
