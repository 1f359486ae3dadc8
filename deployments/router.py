"""Context-length routing to engine pools, and the ``Engine`` that calls it through Serve.

:class:`ContextRouter` is the ingress of the inference app. For each request it
renders the chat messages with each pool model's own chat template, counts the
tokens, and sends the request to the **smallest pool whose** ``max_model_len``
**fits prompt + max_tokens**. A request that fits no pool fails at once with
:class:`~pipeline.errors.ContextTooLong` (terminal: a retry cannot make the
document shorter), naming the counts so the failure is explainable.

Why by length: a short invoice and an 80k-token one take one batch slot each
but very different KV cache (spec section 3). Pools sized per context keep
short requests from queueing behind long prefills and let each pool set
``max_num_seqs`` for its own KV budget.

Within a pool, Serve's default request router picks a replica by
power-of-two choices on queue length. To route by KV-cache/prefix affinity
instead (requests sharing the invoice system prompt land where it is cached),
set ``request_router_class`` on the pool in ``pools.yaml``; it becomes the
deployment's ``request_router_config``::

    pools:
      - name: short
        request_router_class: ray.serve.llm.request_router.PrefixCacheAffinityRouter

Any subclass of ``ray.serve.request_router.RequestRouter`` works: implement
``choose_replicas(candidate_replicas, pending_request)`` and read
``pending_request.args`` (the :class:`~deployments.engine.GenerateRequest`,
whose ``prompt_token_ids`` this router already computed) to hash a prefix.
The pool's replicas report per-replica stats through ``record_routing_stats``
if the router needs KV usage.

:class:`ServeEngine` is the :class:`pipeline.extraction.engines.Engine` the task drivers
hold: it calls the router's handle, bounds the wait, cancels on timeout or
cancellation (Serve propagates the cancel to the engine replica, which aborts
the vLLM request), and turns Ray/Serve failures into :mod:`pipeline.errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deployments.engine import GenerateRequest, render_prompt
from deployments.observability import start_observability
from deployments.pools import PoolConfig, PoolsConfig
from pipeline.errors import (
    ContextTooLong,
    FencelineError,
    ProviderTimeout,
    ProviderUnavailable,
    TerminalError,
)
from pipeline.extraction import Completion, JsonSchema, Messages
from pipeline.settings import Settings
from pipeline.tracing import SPAN_ROUTE, current_traceparent, job_span

if TYPE_CHECKING:
    from ray.serve.handle import DeploymentHandle

#: Extra seconds the caller waits beyond the engine's own timeout before it gives up:
#: the replica's ProviderTimeout (with its abort) should normally win the race.
HANDLE_GRACE_SECONDS = 5.0


#: The ``fenceline.route.reason`` of a decision: the rule :func:`choose_pool` applies.
ROUTE_REASON = "smallest pool whose max_model_len fits prompt + max_tokens"
#: The reason of a decision the job's ``model_policy`` made (it named the pool).
POLICY_REASON = "the job's model_policy names the pool"


@dataclass(frozen=True)
class RouteDecision:
    """Where a request goes and why: the counts that decided it."""

    pool: str
    prompt_tokens: int
    max_tokens: int
    max_model_len: int
    #: Smaller pools the request did not fit, in the order they were tried.
    skipped: tuple[str, ...] = ()
    #: The rule that chose: the context-length rule, or the job's model_policy.
    reason: str = ROUTE_REASON

    def span_attributes(self) -> dict[str, Any]:
        """What the ``router.choose`` span records about the choice."""
        return {
            "fenceline.pool": self.pool,
            "gen_ai.usage.input_tokens": self.prompt_tokens,
            "gen_ai.request.max_tokens": self.max_tokens,
            "fenceline.route.max_model_len": self.max_model_len,
            "fenceline.route.reason": self.reason,
            "fenceline.route.skipped": list(self.skipped),
        }


def choose_pool(
    pools: PoolsConfig,
    prompt_tokens: Mapping[str, int],
    max_tokens: int,
    named: str | None = None,
) -> str:
    """The smallest pool (by ``max_model_len``) that fits prompt + ``max_tokens``, or
    the pool ``named`` by the job's ``model_policy`` (``default``/None: the rule).

    ``prompt_tokens`` maps pool name → prompt length under that pool's tokenizer
    (pools may serve different models). Raises :class:`ContextTooLong` if no pool fits
    (or the named one does not), :class:`TerminalError` for a name of no pool: a named
    pool is kept to, never swapped for another.
    """
    if named not in (None, "default"):
        if named not in {p.name for p in pools.pools}:
            names = ", ".join(p.name for p in pools.pools)
            raise TerminalError(f"model_policy {named!r} names no pool of this app ({names})")
        pool = pools.pool(str(named))
        if prompt_tokens[pool.name] + max_tokens > pool.max_model_len:
            raise ContextTooLong(
                f"prompt of {prompt_tokens[pool.name]} tokens + max_tokens {max_tokens} "
                f"exceeds pool {pool.name!r} (max_model_len {pool.max_model_len}), which "
                "the job's model_policy names"
            )
        return pool.name
    for pool in pools.pools:  # sorted smallest context first
        if prompt_tokens[pool.name] + max_tokens <= pool.max_model_len:
            return pool.name
    largest = max(pools.pools, key=lambda p: p.max_model_len)
    raise ContextTooLong(
        f"prompt of {prompt_tokens[largest.name]} tokens + max_tokens {max_tokens} "
        f"exceeds the largest pool {largest.name!r} (max_model_len {largest.max_model_len}); "
        "split the document or configure a pool with a longer context"
    )


class ContextRouter:
    """Serve ingress: count tokens per pool model, pick a pool, call its engine.

    Each request's choice is a ``router.choose`` span in the job's trace: the caller
    (:class:`ServeEngine`, inside the driver's ``engine.call`` span) passes its W3C
    ``traceparent``, the span records pool, prompt tokens, the rule and the pools
    skipped, and the engine replica gets the same ``traceparent`` so vLLM's own
    request span joins the trace beside it.

    Args:
        pools: the validated pools file (or its ``model_dump()``).
        engines: pool name → handle of the engine deployment serving that pool (pools
            ``served_by`` another share its handle; see :func:`deployments.app.pool_engines`).
        tokenizer_factory: loads a pool model's tokenizer (default: ``transformers``'
            ``AutoTokenizer``; tests pass a stand-in).
    """

    def __init__(
        self,
        pools: PoolsConfig | Mapping[str, Any],
        engines: Mapping[str, DeploymentHandle[Any]],
        tokenizer_factory: Callable[[PoolConfig], Any] | None = None,
    ) -> None:
        self.pools = pools if isinstance(pools, PoolsConfig) else PoolsConfig.model_validate(pools)
        missing = {p.name for p in self.pools.pools} - set(engines)
        if missing:
            raise ValueError(f"no engine deployment for pools {sorted(missing)}")
        self._engines = dict(engines)
        start_observability(Settings(), "fenceline-router")  # OTLP export when configured
        self._tokenizers: dict[str, Any] = {}
        self._tokenizer_factory = tokenizer_factory or _auto_tokenizer
        for pool in self.pools.pools:
            self._tokenizer_for(pool)  # load at start: fail the replica, not a request

    def _tokenizer_for(self, pool: PoolConfig) -> Any:
        model = pool.resolved_model()
        if model not in self._tokenizers:
            self._tokenizers[model] = self._tokenizer_factory(pool)
        return self._tokenizers[model]

    def count(self, messages: Messages) -> dict[str, list[int]]:
        """Prompt token ids per pool, computed once per distinct model."""
        by_model: dict[str, list[int]] = {}
        out: dict[str, list[int]] = {}
        for pool in self.pools.pools:
            model = pool.resolved_model()
            if model not in by_model:
                by_model[model] = render_prompt(self._tokenizer_for(pool), messages)
            out[pool.name] = by_model[model]
        return out

    async def route(
        self, messages: Messages, max_tokens: int, pool: str | None = None
    ) -> RouteDecision:
        """Decide without calling an engine (for tests, the CLI and admission estimates)."""
        ids = await asyncio.to_thread(self.count, list(messages))
        return self._decide(ids, max_tokens, pool)

    def _decide(
        self, ids: Mapping[str, list[int]], max_tokens: int, named: str | None = None
    ) -> RouteDecision:
        counts = {name: len(v) for name, v in ids.items()}
        name = choose_pool(self.pools, counts, max_tokens, named)
        max_len = self.pools.pool(name).max_model_len
        if named not in (None, "default"):
            return RouteDecision(name, counts[name], max_tokens, max_len, (), POLICY_REASON)
        order = [p.name for p in self.pools.pools]  # smallest context first
        skipped = tuple(order[: order.index(name)])
        return RouteDecision(name, counts[name], max_tokens, max_len, skipped)

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
        traceparent: str | None = None,
        pool: str | None = None,
    ) -> Completion:
        """Route and run one request; the :class:`pipeline.extraction.engines.Engine` contract.

        ``traceparent`` is the caller's span (the driver's ``engine.call``): the choice
        is a ``router.choose`` span under it, and the engine replica continues it.
        ``pool``: the pool the job's ``model_policy`` names (None: the length rule).
        """
        with job_span(SPAN_ROUTE, traceparent, {"gen_ai.request.max_tokens": max_tokens}) as span:
            ids = await asyncio.to_thread(self.count, list(messages))
            decision = self._decide(ids, max_tokens, pool)  # ContextTooLong fails the span
            for key, value in decision.span_attributes().items():
                span.set_attribute(key, value)
        request = GenerateRequest(
            messages=list(messages),
            json_schema=dict(json_schema),
            max_tokens=max_tokens,
            timeout=timeout,
            prompt_token_ids=ids[decision.pool],
            pool=decision.pool,
            traceparent=traceparent,
        )
        response = self._engines[decision.pool].generate.remote(request)
        return await await_response(response, timeout + HANDLE_GRACE_SECONDS)

    async def pools_info(self) -> list[dict[str, Any]]:
        return [{"name": p.name, "max_model_len": p.max_model_len} for p in self.pools.pools]


def _auto_tokenizer(pool: PoolConfig) -> Any:
    import os

    os.environ.update({k: v for k, v in pool.engine_env().items() if k.startswith("HF_")})
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(pool.resolved_model())


async def await_response(response: Any, timeout: float) -> Completion:
    """Await a Serve response under ``timeout``; cancel it when we stop waiting.

    Cancelling the response makes Serve cancel the replica's task, and the
    engine replica aborts the vLLM request (see :mod:`deployments.engine`).
    """
    try:
        async with asyncio.timeout(timeout):
            result: Completion = await response
            return result
    except TimeoutError as exc:
        response.cancel()  # Serve propagates this to the replica
        raise ProviderTimeout(f"no answer from the inference app within {timeout:.1f} s") from exc
    except asyncio.CancelledError:
        response.cancel()
        raise
    except Exception as exc:
        raise unwrap_serve_error(exc) from exc


def unwrap_serve_error(exc: BaseException) -> FencelineError:
    """Turn what a handle call raised into a :mod:`pipeline.errors` error.

    A deployment's own error arrives wrapped in ``RayTaskError``; its ``cause``
    is the original (already classified) error. Replica death, an unavailable
    deployment or Serve back-pressure are retryable unavailability.
    """
    from ray.exceptions import RayTaskError

    seen: BaseException = exc
    # RayTaskError(X) also *is* an X; its cause is the real X with its attributes.
    while isinstance(seen, RayTaskError) and seen.cause is not None:
        seen = seen.cause
    if isinstance(seen, FencelineError):
        return seen
    return ProviderUnavailable(f"inference app: {type(exc).__name__}: {exc}", uncertain=True)


class ServeEngine:
    """The :class:`pipeline.extraction.engines.Engine` over the inference app's router handle.

    Build it from a handle (``serve.run`` returns one) or by app name inside a
    cluster::

        engine = ServeEngine.from_app("fenceline-inference")
        completion = await engine.complete(messages, json_schema=schema,
                                           max_tokens=512, timeout=45)
    """

    def __init__(self, handle: DeploymentHandle[Any], *, name: str = "serve") -> None:
        self._handle = handle
        self._name = name

    @classmethod
    def from_app(cls, app_name: str = "fenceline-inference") -> ServeEngine:
        from ray import serve

        return cls(serve.get_app_handle(app_name), name=f"serve:{app_name}")

    @property
    def name(self) -> str:
        return self._name

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
        pool: str | None = None,
    ) -> Completion:
        response = self._handle.complete.remote(
            list(messages),
            json_schema=dict(json_schema),
            max_tokens=max_tokens,
            timeout=timeout,
            pool=pool,
            # The driver's engine.call span: the router's choice and vLLM's span join it.
            traceparent=current_traceparent(),
        )
        return await await_response(response, timeout + 2 * HANDLE_GRACE_SECONDS)

    async def route(self, messages: Messages, max_tokens: int) -> RouteDecision:
        try:
            decision: RouteDecision = await self._handle.route.remote(list(messages), max_tokens)
        except Exception as exc:
            raise unwrap_serve_error(exc) from exc
        return decision
