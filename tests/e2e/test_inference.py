"""Ray Serve + the real vLLM CPU engine: two pools of SmolLM2, routed by context length.

One local Ray cluster and one inference app for the whole module (engine start
dominates: ~40 s per engine on 2 cores, started in parallel). The pools are
small on purpose (``short`` 384 tokens, ``long`` 1536) so a "long" prompt is a
few hundred tokens and the suite stays within a couple of minutes.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from deployments import model_prepare
from deployments.app import deploy_inference_app
from deployments.pools import parse_pools
from deployments.router import ServeEngine
from pipeline.errors import ContextTooLong, ProviderTimeout
from pipeline.extraction import ChatMessage

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

SHORT_LEN, LONG_LEN = 384, 1536
MAX_TOKENS = 64
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "maxLength": 16},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "total": {"type": "number"},
    },
    "required": ["invoice_number", "currency", "total"],
    "additionalProperties": False,
}
ROOT = Path(__file__).resolve().parents[2]


def invoice(lines: int) -> list[ChatMessage]:
    body = ["INVOICE INV-2040", "Supplier: ACME GmbH"]
    body += [f"Line {n}: widget model {n} qty 1 price {10 + n}.00 EUR" for n in range(lines)]
    body.append("Total due: 123.00 EUR")
    return [
        {"role": "system", "content": "Extract the invoice fields as JSON."},
        {"role": "user", "content": "\n".join(body)},
    ]


SHORT = invoice(2)  # ~80 tokens
LONG = invoice(30)  # ~700 tokens: too long for short, fits long
TOO_LONG = invoice(120)  # ~2700 tokens: fits no pool


@pytest.fixture(scope="module")
def inference() -> Iterator[dict[str, Any]]:
    import ray
    from ray import serve

    model_dir = model_prepare.prepare()  # idempotent; `make test` ran it already
    pools = parse_pools(
        {
            "app_name": "fenceline-inference-e2e",
            "defaults": {
                "model": str(model_dir),
                "dtype": "float32",
                "enforce_eager": True,
                "num_cpus": 0,
                "cpu": {"kvcache_space_gib": 1},
                "env": {"HF_HUB_OFFLINE": "1"},
            },
            "pools": [
                {"name": "short", "max_model_len": SHORT_LEN, "max_num_seqs": 8, "metrics_port": 0},
                {"name": "long", "max_model_len": LONG_LEN, "max_num_seqs": 4},
            ],
        }
    )
    env = {
        "PYTHONPATH": str(ROOT),
        "RAY_USAGE_STATS_ENABLED": "0",
        "HF_HUB_OFFLINE": "1",
    }
    ray.init(
        address="local",  # always a cluster of our own, never another engineer's
        num_cpus=4,
        include_dashboard=False,
        object_store_memory=200 * 1024**2,
        runtime_env={"env_vars": env},
        log_to_driver=False,
    )
    started = time.monotonic()
    try:
        # Bounded: serve.run would wait forever. ~2 min on a quiet 2-core machine; the
        # margin is for machines shared with other engines (all bind OpenMP to core 0).
        handle = deploy_inference_app(pools, timeout_s=450)
        yield {
            "engine": ServeEngine(handle, name="serve:e2e"),
            "router": handle,
            "app": pools.app_name,
            "pools": pools,
            "deploy_s": time.monotonic() - started,
        }
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


def engine_handle(inference: dict[str, Any], pool: str) -> Any:
    from ray import serve

    return serve.get_deployment_handle(inference["pools"].engine_deployment(pool), inference["app"])


def counter(metrics: str, name: str, **labels: str) -> float:
    """One sample's value from Prometheus text (0 when absent)."""
    label_text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{re.escape(name)}\{{{re.escape(label_text)}\}} (\S+)$"
    found = re.search(pattern, metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_short_prompt_runs_on_short_pool_with_usage_and_timings(inference: dict[str, Any]):
    engine: ServeEngine = inference["engine"]
    decision = await engine.route(SHORT, MAX_TOKENS)
    assert decision.pool == "short"
    completion = await engine.complete(SHORT, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=60)
    assert completion.pool == "short"
    assert completion.engine == "vllm:short"
    jsonschema.validate(completion.json(), SCHEMA)
    assert completion.finish_reason == "stop"
    usage, timings = completion.usage, completion.timings
    assert usage.prompt_tokens == decision.prompt_tokens  # the router counted what ran
    assert 0 < usage.completion_tokens <= MAX_TOKENS
    assert usage.cached_tokens >= 0
    assert timings.ttft_s is not None and 0 < timings.ttft_s <= timings.e2e_s
    assert len(timings.itl_s) == usage.completion_tokens - 1
    assert all(x >= 0 for x in timings.itl_s)


def whitespace_outside_strings(text: str) -> list[int]:
    """Offsets of whitespace between JSON tokens (inside string literals it is content)."""
    found, in_string, escaped = [], False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch.isspace():
            found.append(i)
    return found


async def test_answers_are_compact_json(inference: dict[str, Any]):
    # The pools' engine-wide structured_outputs_config (disable_any_whitespace): vLLM
    # 0.32's xgrammar backend ignores the same flag on a request.
    engine: ServeEngine = inference["engine"]
    completion = await engine.complete(SHORT, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=60)
    text = completion.text
    assert completion.finish_reason == "stop", text
    assert text == text.strip() and whitespace_outside_strings(text) == [], repr(text)
    jsonschema.validate(json.loads(text), SCHEMA)


async def test_long_prompt_runs_on_long_pool(inference: dict[str, Any]):
    engine: ServeEngine = inference["engine"]
    decision = await engine.route(LONG, MAX_TOKENS)
    assert decision.prompt_tokens + MAX_TOKENS > SHORT_LEN
    assert decision.pool == "long"
    completion = await engine.complete(LONG, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=90)
    assert completion.pool == "long"
    jsonschema.validate(completion.json(), SCHEMA)
    assert completion.usage.prompt_tokens == decision.prompt_tokens > SHORT_LEN - MAX_TOKENS


async def test_prompt_that_fits_no_pool_is_terminal_and_never_reaches_an_engine(
    inference: dict[str, Any],
):
    engine: ServeEngine = inference["engine"]
    before = {
        pool: await engine_handle(inference, pool).metrics_text.remote()
        for pool in ("short", "long")
    }
    started = time.monotonic()
    with pytest.raises(ContextTooLong) as info:
        await engine.complete(TOO_LONG, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=60)
    assert time.monotonic() - started < 10
    assert info.value.error_class == "context_too_long"
    assert f"max_model_len {LONG_LEN}" in str(info.value)
    for pool, text in before.items():
        after = await engine_handle(inference, pool).metrics_text.remote()
        assert counter(after, "fenceline_engine_prompt_tokens_total", pool=pool) == counter(
            text, "fenceline_engine_prompt_tokens_total", pool=pool
        )


async def test_concurrent_requests_batch_on_one_pool(inference: dict[str, Any]):
    engine: ServeEngine = inference["engine"]
    results = await asyncio.gather(
        *(
            engine.complete(invoice(1 + i), json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=90)
            for i in range(4)
        )
    )
    for completion in results:
        assert completion.pool == "short"
        jsonschema.validate(completion.json(), SCHEMA)


async def wait_idle(inference: dict[str, Any], pool: str) -> dict[str, Any]:
    """Poll the replica until vLLM holds no request (the abort reached the engine core)."""
    deadline = time.monotonic() + 15
    while True:
        stats: dict[str, Any] = await engine_handle(inference, pool).stats.remote()
        if stats["engine_unfinished"] == 0 and stats["in_flight"] == 0:
            return stats
        assert time.monotonic() < deadline, f"request not aborted: {stats}"
        await asyncio.sleep(0.1)


async def test_timeout_aborts_the_vllm_request(inference: dict[str, Any]):
    engine: ServeEngine = inference["engine"]
    handle = engine_handle(inference, "short")
    before = await handle.metrics_text.remote()
    with pytest.raises(ProviderTimeout) as info:
        await engine.complete(SHORT, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=0.2)
    # Our engine aborted it, so what it spent is known (not an uncertain charge).
    assert info.value.uncertain is False and info.value.engine == "vllm:short"
    assert info.value.usage is not None and info.value.usage.prompt_tokens > 0
    assert 0 <= info.value.usage.completion_tokens < MAX_TOKENS
    await wait_idle(inference, "short")
    after = await handle.metrics_text.remote()
    name = "fenceline_engine_requests_total"
    assert counter(after, name, pool="short", outcome="timeout") == (
        counter(before, name, pool="short", outcome="timeout") + 1
    )


async def test_caller_cancellation_propagates_to_vllm(inference: dict[str, Any]):
    engine: ServeEngine = inference["engine"]
    handle = engine_handle(inference, "short")
    before = await handle.metrics_text.remote()
    task = asyncio.create_task(
        engine.complete(SHORT, json_schema=SCHEMA, max_tokens=MAX_TOKENS, timeout=60)
    )
    deadline = time.monotonic() + 20
    while (await handle.stats.remote())["in_flight"] == 0:  # wait until the replica has it
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.02)
    task.cancel()  # a driver that lost its lease gives up
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_idle(inference, "short")
    after = await handle.metrics_text.remote()
    name = "fenceline_engine_requests_total"
    assert counter(after, name, pool="short", outcome="cancelled") == (
        counter(before, name, pool="short", outcome="cancelled") + 1
    )


async def test_engine_metrics_are_exported(inference: dict[str, Any]):
    text = await engine_handle(inference, "short").metrics_text.remote()
    for family in (
        "fenceline_engine_ttft_seconds_count",
        "fenceline_engine_itl_seconds_count",
        "fenceline_engine_prompt_tokens_total",
        "fenceline_engine_generation_tokens_total",
    ):
        assert counter(text, family, pool="short") > 0, family
    for gauge in (
        "fenceline_engine_kv_cache_usage_ratio",
        "fenceline_engine_requests_waiting",
        "fenceline_engine_preemptions_total",
    ):
        assert re.search(rf'^{gauge}\{{pool="short"\}} ', text, re.MULTILINE), gauge
    # The same registry is scrapeable over HTTP (pool metrics_port: 0 = a free port).
    stats = await engine_handle(inference, "short").stats.remote()
    scraped = httpx.get(f"http://127.0.0.1:{stats['metrics_port']}/metrics", timeout=5).text
    assert counter(scraped, "fenceline_engine_ttft_seconds_count", pool="short") > 0
    # And it is recorded into Ray's metrics agent, the port Prometheus scrapes
    # (the translation itself: tests/unit/test_ray_metrics.py, tests/integration/).
    assert stats["metrics_bridged"] is True
