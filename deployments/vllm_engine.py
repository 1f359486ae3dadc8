"""vLLM behind a pool replica: engine start, adapter, sampling, streaming, error mapping.

:class:`VLLMEngine` is the :class:`deployments.engine.PoolBackend` every
:class:`deployments.engine.PoolEngine` runs unless given another. The CPU
environment (thread binding, KV-cache size, allocator preload) is set here
before vLLM starts its engine core.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployments.engine_metrics import EngineMetrics, stat_logger_factory
from deployments.pools import PoolConfig
from pipeline.errors import (
    ContextTooLong,
    FencelineError,
    ProviderUnavailable,
    TerminalError,
)
from pipeline.extraction import JsonSchema, prompt_version
from pipeline.settings import Settings

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.lora.request import LoRARequest
    from vllm.v1.engine.async_llm import AsyncLLM

log = logging.getLogger(__name__)


def apply_cpu_environment(pool: PoolConfig) -> dict[str, str]:
    """Set the pool's engine environment in this process before vLLM starts its core.

    The engine core is a child process, so variables set here (thread binding,
    KV-cache size, LD_PRELOAD of an allocator) take effect there. Returns what
    was set, for logging and the benchmark report.
    """
    env = pool.engine_env()
    if pool.device == "cpu":
        preload = _allocator_library(pool.cpu.allocator)
        if preload and preload not in os.environ.get("LD_PRELOAD", ""):
            current = os.environ.get("LD_PRELOAD", "")
            env["LD_PRELOAD"] = f"{preload}:{current}" if current else preload
    os.environ.update(env)
    return env


_ALLOCATOR_CANDIDATES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4"),
    "jemalloc": ("libjemalloc.so.2",),
}
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


def _allocator_library(choice: str) -> str | None:
    """The allocator library to preload, or None (``auto`` prefers tcmalloc, then nothing)."""
    if choice == "none":
        return None
    names = _ALLOCATOR_CANDIDATES.get("tcmalloc" if choice == "auto" else choice, ())
    for directory in _LIB_DIRS:
        for name in names:
            candidate = Path(directory) / name
            if candidate.exists():
                return str(candidate)
    if choice != "auto":
        log.warning("allocator %s requested but not found; using the default", choice)
    return None


def engine_tracing(settings: Settings) -> tuple[dict[str, str], dict[str, str]]:
    """vLLM's own OTLP export, pointed where Fenceline's spans go: (engine args, env).

    vLLM 0.32 exports a span per request (``llm_request``: queue, prefill, decode
    times, token counts) when the engine has ``otlp_traces_endpoint``, parented by
    the ``trace_headers`` of :meth:`AsyncLLM.generate`; without an endpoint it drops
    the headers with a warning. Its exporter reads the protocol from
    ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (gRPC by default) and, over HTTP, needs
    the full ``/v1/traces`` URL, so both are derived from Fenceline's settings.
    Empty when ``settings.otlp_endpoint`` is unset: no export, no headers.
    """
    if not settings.otlp_endpoint:
        return {}, {}
    if settings.otlp_protocol == "grpc":
        return {"otlp_traces_endpoint": settings.otlp_endpoint}, {
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"
        }
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    return {"otlp_traces_endpoint": endpoint}, {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"
    }


def build_engine(
    pool: PoolConfig, metrics: EngineMetrics | None = None, settings: Settings | None = None
) -> AsyncLLM:
    """Start a vLLM ``AsyncLLM`` for ``pool`` (blocks until weights and KV cache are ready).

    With ``settings.otlp_endpoint`` set the engine exports its own request spans
    (:func:`engine_tracing`).
    """
    apply_cpu_environment(pool)
    tracing_args, tracing_env = engine_tracing(settings or Settings())
    os.environ.update(tracing_env)
    from vllm import AsyncEngineArgs
    from vllm.config import StructuredOutputsConfig
    from vllm.v1.engine.async_llm import AsyncLLM

    kwargs = pool.engine_kwargs()
    kwargs.update(tracing_args)
    # AsyncEngineArgs keeps a dict as given (unlike vllm.LLM); the engine needs the object.
    kwargs["structured_outputs_config"] = StructuredOutputsConfig(
        **kwargs["structured_outputs_config"]
    )
    args = AsyncEngineArgs(**kwargs, disable_log_stats=True)
    loggers = [stat_logger_factory(metrics)] if metrics is not None else None
    return AsyncLLM.from_engine_args(args, stat_loggers=loggers)


def lora_request(pool: PoolConfig) -> LoRARequest | None:
    """The adapter every request of ``pool`` runs with (None: the base model).

    Checked at engine start, so a replica whose adapter folder is missing fails
    at once with the path and the command that trains it, not on first request.
    """
    if pool.lora is None:
        return None
    from vllm.lora.request import LoRARequest

    path = pool.lora.checked_path(pool.name)
    stale = stale_adapter(pool)
    if stale:
        log.warning(stale)
    return LoRARequest(pool.lora.name, 1, str(path))


def stale_adapter(pool: PoolConfig) -> str | None:
    """Why ``pool``'s adapter may not fit the prompt it is served (None: it was trained
    on this prompt). An adapter still runs on another prompt, only less well: the one
    trained on ``fenceline.prompt/2`` decided 19 of 20 of ``fenceline eval``'s defaults
    as expected on prompt/3, the one retrained on prompt/3 20 of 20
    (docs/history/benchmarks-passes.md, sixteenth pass)."""
    if pool.lora is None:
        return None
    served = prompt_version()
    trained = pool.lora.trained_prompt()
    if trained == served:
        return None
    return (
        f"pool {pool.name}: LoRA adapter {pool.lora.resolved_path()} was trained on "
        f"{trained or 'a prompt its manifest.json does not name'}, and the extraction "
        f"prompt is {served}; it runs, but retrain it (`make adapter`) to fit the prompt"
    )


def sampling_params(json_schema: JsonSchema, max_tokens: int) -> SamplingParams:
    """Greedy, schema-constrained, streamed as deltas (for TTFT/ITL).

    Whether the JSON is compact is not decided here: vLLM 0.32's xgrammar backend
    ignores a request's ``disable_any_whitespace`` and reads the engine's
    ``structured_outputs_config`` (:class:`deployments.pools.StructuredOutputsConfig`,
    compact by default).
    """
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

    return SamplingParams(
        max_tokens=max_tokens,
        temperature=0.0,
        structured_outputs=StructuredOutputsParams(json=dict(json_schema)),
        output_kind=RequestOutputKind.DELTA,
    )


@dataclass
class Stream:
    """Everything observed while a request's deltas arrive."""

    text: list[str] = field(default_factory=list)
    token_count: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    finish_reason: str | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    queue_s: float | None = None
    last_at: float = 0.0


async def stream_request(
    engine: AsyncLLM,
    prompt_token_ids: list[int],
    params: SamplingParams,
    request_id: str,
    started: float,
    into: Stream | None = None,
    lora: LoRARequest | None = None,
    trace_headers: Mapping[str, str] | None = None,
) -> Stream:
    """Consume one request's deltas, timing each token as it reaches this process.

    A chunk of ``k`` tokens arriving ``gap`` after the previous one yields ``k``
    ITL entries of ``gap / k`` (vLLM streams one token per step unless
    ``stream_interval`` batches them). ``into`` receives the observations as
    they arrive, so a caller that gives up early still knows what was spent;
    ``lora`` is the pool's adapter (:func:`lora_request`); ``trace_headers``
    parent vLLM's request span (only pass them to an engine that exports spans).
    """
    from vllm import TokensPrompt

    s = into if into is not None else Stream(last_at=started)
    # Rendered input (vLLM's non-deprecated path); it also validates the length.
    (prompt,) = await engine.renderer.render_cmpl_async(
        [TokensPrompt(prompt_token_ids=prompt_token_ids)]
    )
    async for out in engine.generate(
        prompt, params, request_id, lora_request=lora, trace_headers=trace_headers
    ):
        now = time.perf_counter()
        if out.prompt_token_ids is not None:
            s.prompt_tokens = len(out.prompt_token_ids)
        if out.num_cached_tokens is not None:
            s.cached_tokens = out.num_cached_tokens
        for completion in out.outputs[:1]:
            k = len(completion.token_ids)
            s.text.append(completion.text)
            if k:
                if s.ttft_s is None:
                    s.ttft_s = now - started
                    s.itl_s.extend([0.0] * (k - 1))
                else:
                    s.itl_s.extend([(now - s.last_at) / k] * k)
                s.token_count += k
                s.last_at = now
            if completion.finish_reason is not None:
                s.finish_reason = completion.finish_reason
        if out.finished and out.metrics is not None:
            queued, scheduled = out.metrics.queued_ts, out.metrics.scheduled_ts
            if queued and scheduled >= queued:
                s.queue_s = scheduled - queued
    return s


class VLLMEngine:
    """:class:`PoolBackend` over a vLLM ``AsyncLLM`` started for the pool (blocks until ready)."""

    def __init__(self, pool: PoolConfig, metrics: EngineMetrics | None = None) -> None:
        self.pool = pool
        self.lora = lora_request(pool)  # before the engine: a missing adapter fails fast
        self.llm: AsyncLLM = build_engine(pool, metrics)
        #: Whether vLLM exports spans: only then do requests carry trace headers.
        self.traced = self.llm.observability_config.otlp_traces_endpoint is not None

    def tokenizer(self) -> Any:
        return self.llm.get_tokenizer()

    async def stream(
        self,
        prompt_token_ids: list[int],
        json_schema: JsonSchema,
        max_tokens: int,
        request_id: str,
        started: float,
        into: Stream,
        trace_headers: Mapping[str, str] | None = None,
    ) -> Stream:
        params = sampling_params(json_schema, max_tokens)
        return await stream_request(
            self.llm,
            prompt_token_ids,
            params,
            request_id,
            started,
            into=into,
            lora=self.lora,
            trace_headers=trace_headers if self.traced else None,
        )

    async def abort(self, request_id: str) -> None:
        await self.llm.abort(request_id)

    async def check_health(self) -> None:
        await self.llm.check_health()

    def unfinished(self) -> int:
        return int(self.llm.get_num_unfinished_requests())

    def classify(self, exc: Exception) -> FencelineError:
        return _classify(exc, self.pool.name)

    def shutdown(self) -> None:
        self.llm.shutdown()
        # AsyncLLM.__del__ shuts down again when the object is collected; at interpreter
        # exit its module's globals are gone and that second call raises ("Exception
        # ignored in AsyncLLM.__del__ ... TypeError" after `fenceline eval`).
        setattr(self.llm, "shutdown", _shut_down_already)  # noqa: B010


def _shut_down_already(*_args: object, **_kwargs: object) -> None:
    """An engine's ``shutdown`` once it has shut down: nothing left to do."""


def _classify(exc: Exception, pool: str) -> FencelineError:
    """Map a vLLM exception onto the retryable / terminal split."""
    from vllm.exceptions import VLLMClientError
    from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

    message = f"pool {pool}: {type(exc).__name__}: {exc}"
    if isinstance(exc, VLLMClientError):
        text = str(exc).lower()
        if "maximum model length" in text or "max_model_len" in text or "too long" in text:
            return ContextTooLong(message)
        return TerminalError(message)
    if isinstance(exc, EngineDeadError | EngineGenerateError):
        return ProviderUnavailable(message, uncertain=True)
    return ProviderUnavailable(message, uncertain=True)
