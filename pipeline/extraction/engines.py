"""The ``Engine`` edge: one model call for one attempt, and what it cost.

Drivers hold an :class:`Engine` and never know which kind it is. Two real
implementations exist:

* :class:`OpenAICompatibleEngine` (here): an external provider over HTTP.
* ``deployments.router.ServeEngine``: the local vLLM pools behind Ray Serve.
  It lives in ``deployments/`` because ``pipeline/`` never imports ``ray``.

Invariants every implementation keeps:

* **One call per attempt.** An engine never retries; the job's persisted retry
  policy (:mod:`pipeline.retry`) is the only retry layer, so one attempt is at
  most one billable call.
* **Errors are classified** into :mod:`pipeline.errors`: 429 →
  :class:`~pipeline.errors.ProviderRateLimited`, 5xx and connection failures →
  :class:`~pipeline.errors.ProviderUnavailable`, the attempt deadline →
  :class:`~pipeline.errors.ProviderTimeout` (outcome uncertain: possibly
  billed), unparseable output → :class:`~pipeline.errors.MalformedOutput`, a
  prompt that fits no context window → :class:`~pipeline.errors.ContextTooLong`.
  The provider's ``Retry-After`` (seconds or HTTP-date) travels on the error.
* **Usage is reported, not estimated**: token counts come from the engine's
  response so admission can reconcile its reservation against them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypedDict, runtime_checkable

import httpx

from pipeline.errors import (
    ContextTooLong,
    MalformedOutput,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    TerminalError,
)
from pipeline.retry import parse_retry_after
from pipeline.usage import Usage


class ChatMessage(TypedDict):
    role: str
    content: str


Messages = Sequence[ChatMessage]
JsonSchema = Mapping[str, Any]


@dataclass(frozen=True)
class Timings:
    """Latency of one call, in seconds, named as ``vllm bench serve`` names them.

    Attributes:
        e2e_s: end-to-end latency (E2EL) seen by the engine implementation.
        ttft_s: time to first token; None when the transport does not stream.
        itl_s: inter-token latencies, one per generated token after the first.
        queue_s: time the request waited in the engine's scheduler, if known.
    """

    e2e_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    queue_s: float | None = None

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first (TPOT)."""
        if not self.itl_s:
            return None
        return sum(self.itl_s) / len(self.itl_s)


@dataclass(frozen=True)
class Completion:
    """The result of one successful engine call.

    ``text`` is the raw model output; it parsed as JSON (engines check that) but
    schema, arithmetic and evidence checks belong to :mod:`pipeline.validation.decide`.
    ``engine`` names the implementation and ``pool`` the engine pool (local
    vLLM) that served it; ``model`` is the model the engine reported.
    """

    text: str
    usage: Usage
    timings: Timings
    engine: str
    model: str
    pool: str | None = None
    finish_reason: str | None = None
    request_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.text)


@runtime_checkable
class Engine(Protocol):
    """One model call per attempt; see the module docstring for the invariants."""

    @property
    def name(self) -> str: ...

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
        pool: str | None = None,
    ) -> Completion:
        """Run one call constrained to ``json_schema``.

        Args:
            messages: chat messages, rendered with the model's chat template.
            json_schema: the JSON schema the output must follow (structured output).
            max_tokens: the most tokens the model may generate.
            timeout: seconds for the whole call; past it the call is abandoned
                (and, where the engine supports it, aborted) and
                :class:`~pipeline.errors.ProviderTimeout` is raised.
            pool: the pool the job's ``model_policy`` names (None: the engine's own
                choice). An engine that cannot run it raises
                :class:`~pipeline.errors.TerminalError`, never runs it elsewhere.
        """
        ...


def parse_json_output(
    text: str, *, finish_reason: str | None, engine: str, usage: Usage | None = None
) -> None:
    """Raise :class:`MalformedOutput` unless ``text`` is one complete JSON value.

    A ``length`` finish means the output was cut at ``max_tokens``: even if a
    prefix happened to parse, the answer is incomplete. ``usage`` (what the
    engine reported for the call) rides on the error: the tokens were spent.
    """
    error: MalformedOutput | None = None
    if finish_reason == "length":
        error = MalformedOutput(f"{engine}: output truncated at max_tokens ({len(text)} chars)")
    else:
        try:
            json.loads(text)
        except (TypeError, ValueError) as exc:
            error = MalformedOutput(f"{engine}: output is not JSON: {exc}")
            error.__cause__ = exc
    if error is not None:
        error.usage, error.engine, error.text = usage, engine, text
        raise error


#: Error codes providers use for a prompt beyond the context window.
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


class OpenAICompatibleEngine:
    """An OpenAI-compatible ``/chat/completions`` provider, one HTTP call per attempt.

    The client never retries: the transport has ``retries=0`` and nothing here
    loops. The whole call runs under one deadline (``timeout``), enforced with
    ``asyncio.timeout`` because httpx timeouts bound each socket operation, not
    the total.

    Args:
        base_url: e.g. ``https://api.example.com/v1`` (``/chat/completions`` is appended).
        model: the provider's model name.
        api_key: sent as a Bearer token when given.
        client: an ``httpx.AsyncClient`` to share; one with no retries is made if None.
        now: wall clock for ``Retry-After`` HTTP-dates (injectable for tests).
        schema_name: the ``json_schema.name`` sent in ``response_format``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        now: Callable[[], datetime] | None = None,
        schema_name: str = "extraction",
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(retries=0), follow_redirects=False
        )
        self._now = now or (lambda: datetime.now(UTC))
        self._schema_name = schema_name

    @property
    def name(self) -> str:
        return f"openai-compatible:{self._model}"

    async def aclose(self) -> None:
        if self._own_client:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAICompatibleEngine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _body(
        self, messages: Messages, json_schema: JsonSchema, max_tokens: int, model: str
    ) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": self._schema_name,
                    "schema": dict(json_schema),
                    "strict": True,
                },
            },
        }

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
        pool: str | None = None,
    ) -> Completion:
        # A hosted provider's pools are its models: a named pool is the model asked for
        # (the intake admitted only the configured ones, Settings.model_pools).
        model = self._model if pool in (None, "default") else str(pool)
        body = self._body(messages, json_schema, max_tokens, model)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                response = await self._client.post(
                    self._url,
                    json=body,
                    headers=self._headers,
                    timeout=httpx.Timeout(timeout),
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise ProviderTimeout(f"{self.name}: no response within {timeout:.1f} s") from exc
        except httpx.ConnectError as exc:
            # Nothing reached the provider: certain not to be billed.
            raise ProviderUnavailable(f"{self.name}: connection failed: {exc}") from exc
        except httpx.TransportError as exc:
            raise ProviderUnavailable(
                f"{self.name}: transport error after sending: {exc!r}", uncertain=True
            ) from exc
        elapsed = time.perf_counter() - started
        self._raise_for_status(response)
        return self._parse(response, elapsed, model)

    def _raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        retry_after = parse_retry_after(response.headers.get("retry-after"), self._now())
        detail = _error_detail(response)
        message = f"{self.name}: HTTP {status}: {detail.get('message', '')}".rstrip(": ")
        if status == 429:
            raise ProviderRateLimited(message, retry_after=retry_after)
        if status == 408:
            raise ProviderTimeout(message, retry_after=retry_after)
        if status >= 500:
            raise ProviderUnavailable(message, retry_after=retry_after, uncertain=True)
        if detail.get("code") in _CONTEXT_CODES:
            raise ContextTooLong(message)
        # 400/401/403/404/422: the same request cannot succeed on another attempt.
        raise TerminalError(message)

    def _parse(self, response: httpx.Response, elapsed: float, model: str) -> Completion:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            text = choice["message"]["content"]
            finish_reason = choice.get("finish_reason")
            raw_usage = payload.get("usage") or {}
            details = raw_usage.get("prompt_tokens_details") or {}
            usage = Usage(
                prompt_tokens=int(raw_usage.get("prompt_tokens", 0)),
                completion_tokens=int(raw_usage.get("completion_tokens", 0)),
                cached_tokens=int(details.get("cached_tokens") or 0),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedOutput(
                f"{self.name}: malformed response body: {exc!r}", uncertain=True
            ) from exc
        if not isinstance(text, str):
            raise MalformedOutput(f"{self.name}: message content is not text", uncertain=True)
        parse_json_output(text, finish_reason=finish_reason, engine=self.name, usage=usage)
        return Completion(
            text=text,
            usage=usage,
            timings=Timings(e2e_s=elapsed),
            engine=self.name,
            model=str(payload.get("model") or model),
            finish_reason=finish_reason,
            request_id=payload.get("id"),
        )


def _error_detail(response: httpx.Response) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-style error body, or {} if there is none."""
    try:
        payload = response.json()
    except ValueError:
        return {"message": response.text[:200]}
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else {}
