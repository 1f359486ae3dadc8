"""The OpenAI-compatible provider client against the fake provider over real loopback HTTP.

Every test asserts through the fake's call log that the client made exactly
the calls the test made: the client never retries on its own.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from benchmarks.fake_provider import DEFAULT_ANSWER, FakeProvider
from pipeline.errors import (
    ContextTooLong,
    MalformedOutput,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    RetryableError,
    TerminalError,
)
from pipeline.extraction import Completion, Engine, OpenAICompatibleEngine
from pipeline.retry import RetryPolicy

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}},
    "required": ["total"],
}
MESSAGES = [
    {"role": "system", "content": "Extract the invoice fields as JSON."},
    {"role": "user", "content": "Invoice INV-7, total 12.50 EUR"},
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def provider(fake: FakeProvider) -> FakeProvider:
    fake.reset()
    return fake


@pytest.fixture
async def engine(provider: FakeProvider) -> AsyncIterator[OpenAICompatibleEngine]:
    client = OpenAICompatibleEngine(provider.base_url, "fake-model", api_key="k")
    yield client
    await client.aclose()


async def call(engine: OpenAICompatibleEngine, timeout: float = 5.0) -> Completion:
    return await engine.complete(MESSAGES, json_schema=SCHEMA, max_tokens=64, timeout=timeout)


def admin(provider: FakeProvider, plan: dict[str, object]) -> None:
    """Configure faults through the HTTP admin API, as an operator or a fault test would."""
    response = httpx.post(f"{provider.url}/admin/faults", json=plan)
    response.raise_for_status()


def observed(provider: FakeProvider) -> list[dict[str, object]]:
    response = httpx.get(f"{provider.url}/admin/calls")
    response.raise_for_status()
    calls: list[dict[str, object]] = response.json()
    return calls


async def test_success_reads_usage_and_text(provider: FakeProvider, engine: OpenAICompatibleEngine):
    assert isinstance(engine, Engine)
    completion = await call(engine)
    assert completion.json() == DEFAULT_ANSWER
    calls = observed(provider)
    assert len(calls) == 1
    assert calls[0]["outcome"] == "ok"
    assert completion.usage.prompt_tokens == calls[0]["prompt_tokens"] > 0
    assert completion.usage.completion_tokens == calls[0]["completion_tokens"] > 0
    assert completion.usage.cached_tokens == 0
    assert completion.finish_reason == "stop"
    assert completion.engine == "openai-compatible:fake-model"
    assert completion.timings.e2e_s > 0
    assert completion.timings.ttft_s is None  # non-streaming transport


async def test_request_carries_schema_and_bearer(provider: FakeProvider):
    seen: dict[str, object] = {}

    async def capture(request: httpx.Request) -> None:
        seen["auth"] = request.headers.get("authorization")
        seen["body"] = json.loads(request.content)

    client = httpx.AsyncClient(event_hooks={"request": [capture]})
    engine = OpenAICompatibleEngine(provider.base_url, "fake-model", api_key="sk", client=client)
    try:
        await call(engine)
    finally:
        await client.aclose()
    body = seen["body"]
    assert isinstance(body, dict)
    assert seen["auth"] == "Bearer sk"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert body["max_tokens"] == 64


async def test_429_retry_after_seconds_is_retryable_with_that_delay(
    provider: FakeProvider, engine: OpenAICompatibleEngine
):
    admin(provider, {"script": [{"kind": "429", "retry_after": "7"}]})
    with pytest.raises(ProviderRateLimited) as info:
        await call(engine)
    assert isinstance(info.value, RetryableError)
    assert info.value.retry_after == 7.0
    assert info.value.error_class == "rate_limited"
    assert [c["status"] for c in observed(provider)] == [429]

    # The job's retry policy, the only retry layer, never schedules sooner.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    decision = RetryPolicy().decide(
        now=now, attempt=1, deadline=now + timedelta(hours=1), retry_after=info.value.retry_after
    )
    assert decision.retry and decision.delay_seconds >= 7.0


async def test_429_retry_after_http_date(provider: FakeProvider):
    now = datetime(2026, 10, 21, 7, 27, 0, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=90), usegmt=True)
    engine = OpenAICompatibleEngine(provider.base_url, "fake-model", now=lambda: now)
    admin(provider, {"script": [{"kind": "429", "retry_after": date}]})
    try:
        with pytest.raises(ProviderRateLimited) as info:
            await call(engine)
    finally:
        await engine.aclose()
    assert info.value.retry_after == 90.0
    assert len(observed(provider)) == 1


async def test_429_relative_http_date_from_real_clock(
    provider: FakeProvider, engine: OpenAICompatibleEngine
):
    admin(provider, {"script": [{"kind": "429", "retry_after": "+30"}]})
    with pytest.raises(ProviderRateLimited) as info:
        await call(engine)
    assert info.value.retry_after is not None
    assert 28.0 <= info.value.retry_after <= 30.0  # HTTP-dates have whole seconds


async def test_storm_is_one_call_per_attempt(
    provider: FakeProvider, engine: OpenAICompatibleEngine
):
    admin(provider, {"script": [{"kind": "429", "count": 3, "retry_after": "1"}]})
    for _ in range(3):
        with pytest.raises(ProviderRateLimited):
            await call(engine)
    completion = await call(engine)
    assert completion.json() == DEFAULT_ANSWER
    assert [c["status"] for c in observed(provider)] == [429, 429, 429, 200]


async def test_random_storm_rate(provider: FakeProvider, engine: OpenAICompatibleEngine):
    admin(provider, {"rates": {"429": 1.0}, "retry_after": "2", "seed": 1})
    for _ in range(5):
        with pytest.raises(ProviderRateLimited) as info:
            await call(engine)
        assert info.value.retry_after == 2.0
    assert len(observed(provider)) == 5


async def test_5xx_is_unavailable_and_uncertain(
    provider: FakeProvider, engine: OpenAICompatibleEngine
):
    admin(provider, {"script": [{"kind": "5xx", "status": 503, "retry_after": "4"}]})
    with pytest.raises(ProviderUnavailable) as info:
        await call(engine)
    assert info.value.retry_after == 4.0
    assert info.value.uncertain is True
    assert len(observed(provider)) == 1


async def test_hang_times_out_within_deadline(
    provider: FakeProvider, engine: OpenAICompatibleEngine
):
    admin(provider, {"script": [{"kind": "hang"}]})
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        await call(engine, timeout=0.5)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 2.0
    assert isinstance(info.value, RetryableError)  # the job's retry policy retries it
    assert info.value.uncertain is True  # the provider may still bill the call
    assert info.value.error_class == "timeout"
    deadline = time.monotonic() + 5
    while not observed(provider) and time.monotonic() < deadline:
        time.sleep(0.05)  # the fake logs a hang when it notices the disconnect
    assert [c["outcome"] for c in observed(provider)] == ["hang"]


async def test_latency_is_observed(provider: FakeProvider, engine: OpenAICompatibleEngine):
    admin(provider, {"latency": {"dist": "fixed", "a": 0.3}})
    completion = await call(engine)
    # asyncio may wake a timer up to its clock resolution early: allow 5 ms.
    assert completion.timings.e2e_s >= 0.295
    latency = observed(provider)[0]["latency_s"]
    assert isinstance(latency, float) and 0.295 <= latency < 0.3 + 5.0
    assert completion.timings.e2e_s >= latency - 0.005  # the client waited for it


@pytest.mark.parametrize("variant", ["not_json", "no_choices", "bad_content", "truncated"])
async def test_malformed_is_retryable_with_error_class(
    provider: FakeProvider, engine: OpenAICompatibleEngine, variant: str
):
    admin(provider, {"script": [{"kind": "malformed", "malformed": variant}]})
    with pytest.raises(MalformedOutput) as info:
        await call(engine)
    assert isinstance(info.value, RetryableError)
    assert info.value.error_class == "malformed_output"
    assert [c["outcome"] for c in observed(provider)] == [f"malformed:{variant}"]
    call_record = observed(provider)[0]
    if variant in ("truncated", "bad_content"):  # the provider answered and billed it
        assert info.value.usage is not None and info.value.engine == engine.name
        assert info.value.usage.prompt_tokens == call_record["prompt_tokens"] > 0
        assert info.value.usage.completion_tokens == call_record["completion_tokens"] > 0
    else:  # no usable body: nothing reported
        assert info.value.usage is None


async def test_rpm_enforcement_returns_wait(provider: FakeProvider, engine: OpenAICompatibleEngine):
    admin(provider, {"rpm": 2, "window_s": 60})
    await call(engine)
    await call(engine)
    with pytest.raises(ProviderRateLimited) as info:
        await call(engine)
    assert info.value.retry_after is not None and 55 <= info.value.retry_after <= 60
    assert [c["outcome"] for c in observed(provider)] == ["ok", "ok", "rate_limited_quota"]


async def test_tpm_enforcement(provider: FakeProvider, engine: OpenAICompatibleEngine):
    admin(provider, {"tpm": 100, "window_s": 60})  # one call reserves prompt + 64 max tokens
    await call(engine)
    with pytest.raises(ProviderRateLimited):
        await call(engine)
    assert len(observed(provider)) == 2


async def test_context_length_error_is_terminal(provider: FakeProvider):
    def too_long(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            400, json={"error": {"message": "too many tokens", "code": "context_length_exceeded"}}
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(too_long))
    engine = OpenAICompatibleEngine("http://provider.invalid/v1", "m", client=client)
    with pytest.raises(ContextTooLong):
        await call(engine)
    await client.aclose()


async def test_auth_error_is_terminal(provider: FakeProvider):
    def denied(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "bad key"}})

    client = httpx.AsyncClient(transport=httpx.MockTransport(denied))
    engine = OpenAICompatibleEngine("http://provider.invalid/v1", "m", client=client)
    with pytest.raises(TerminalError) as info:
        await call(engine)
    assert not isinstance(info.value, ContextTooLong)
    await client.aclose()


async def test_connection_refused_is_unavailable_and_certain():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = OpenAICompatibleEngine(f"http://127.0.0.1:{port}/v1", "m")
    try:
        with pytest.raises(ProviderUnavailable) as info:
            await call(engine)
    finally:
        await engine.aclose()
    assert info.value.uncertain is False  # nothing reached a provider: nothing billed


async def test_answer_handler_computes_content():
    def answer(body: dict[str, object]) -> dict[str, object]:
        messages = body["messages"]
        assert isinstance(messages, list)
        return {"total": len(messages)}

    with FakeProvider(answer=answer) as fake:
        engine = OpenAICompatibleEngine(fake.base_url, "m")
        try:
            completion = await call(engine)
        finally:
            await engine.aclose()
    assert completion.json() == {"total": 2}
