"""The engines ``fenceline eval`` can call: one async function, :data:`ExtractFn`.

An :data:`ExtractFn` takes what :func:`pipeline.extraction.extractor.prepare_call` built
(messages, JSON schema, output bound) and returns an :class:`EngineAnswer`: the
raw text and the completion tokens the engine reported (``None`` when it
reported none), so the evaluation can show output tokens per invoice and
tokens per second. It knows nothing about the answer's format.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.eval.dataset import Case
from pipeline.errors import FencelineError, MalformedOutput
from pipeline.extraction import ChatMessage, Engine, document_in_prompt, shown_document

if TYPE_CHECKING:
    from deployments.pools import PoolsConfig


@dataclass(frozen=True)
class EngineAnswer:
    """One engine reply: the raw text and its completion tokens (None: not reported)."""

    text: str
    completion_tokens: int | None = None


#: ``(messages, json_schema, max_tokens) -> EngineAnswer``.
ExtractFn = Callable[[list[dict[str, str]], dict[str, Any], int], Awaitable[EngineAnswer]]


class ReplayedFailure(FencelineError):
    """The engine failed on this invoice in the replayed run (its recorded error)."""

    error_class = "replayed"


def _completion_tokens(payload: dict[str, Any]) -> int | None:
    usage = payload.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def openai_extract(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 600.0,
    client: httpx.AsyncClient | None = None,
) -> ExtractFn:
    """An :data:`ExtractFn` for an OpenAI-compatible ``/chat/completions`` endpoint.

    Greedy decoding (temperature 0) so a run is repeatable on engines that are;
    completion tokens come from the response's ``usage`` when the server sends it.
    """
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> EngineAnswer:
        body = {
            "model": model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "invoice", "schema": schema, "strict": True},
            },
        }
        own = client is None
        http = client or httpx.AsyncClient(timeout=timeout)
        try:
            response = await http.post(url, json=body, headers=headers, timeout=timeout)
            response.raise_for_status()
            payload = response.json()
            content = payload["choices"][0]["message"]["content"]
        finally:
            if own:
                await http.aclose()
        if not isinstance(content, str):
            raise MalformedOutput(f"message content is {type(content).__name__}, not text")
        return EngineAnswer(content, _completion_tokens(payload))

    return extract


def engine_extract(engine: Engine, *, timeout: float = 600.0) -> ExtractFn:
    """An :data:`ExtractFn` over a :class:`pipeline.extraction.engines.Engine` (text and usage)."""

    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> EngineAnswer:
        chat = [ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        completion = await engine.complete(
            chat, json_schema=schema, max_tokens=max_tokens, timeout=timeout
        )
        return EngineAnswer(completion.text, completion.usage.completion_tokens)

    return extract


def replay_extract(report: dict[str, Any], cases: Sequence[Case]) -> ExtractFn:
    """An :data:`ExtractFn` that answers each invoice with the raw answer an earlier
    ``report.json`` recorded for its id: grounding and validation changes are measured
    on the same answers without generating them again (a grammar change is not: the
    answers were generated under the old one).

    An invoice the report recorded no answer for (the engine failed on it: a timeout,
    a prompt longer than the context) fails again with the recorded error, so the
    replay counts what the run counted.

    Raises:
        ValueError: the report holds no row for one of ``cases``.
    """
    recorded = {str(r["id"]): r for r in report.get("rows", []) if isinstance(r, dict)}
    by_text: dict[str, dict[str, Any]] = {}
    for case in cases:
        row = recorded.get(str(case.record.id))
        if row is None or not (isinstance(row.get("answer"), str) or row.get("error")):
            raise ValueError(f"the report has no answer for invoice {case.record.id!r}")
        by_text[shown_document(case.record.text)] = row

    async def extract(
        messages: list[dict[str, str]],
        schema: dict[str, Any],  # noqa: ARG001 (the answer was generated under its own)
        max_tokens: int,  # noqa: ARG001
    ) -> EngineAnswer:
        text = document_in_prompt(messages)
        row = by_text.get(text) if text is not None else None
        if row is None:
            raise MalformedOutput("replay: the prompt shows no invoice of the report")
        if not isinstance(row.get("answer"), str):
            if row.get("outcome") == "MALFORMED":
                raise MalformedOutput(f"recorded: {row['error']}")
            raise ReplayedFailure(f"recorded: {row['error']}")
        return EngineAnswer(row["answer"], row.get("completion_tokens"))

    return extract


def with_adapter(pools: PoolsConfig, path: Path) -> PoolsConfig:
    """The same pools serving the LoRA adapter in folder ``path`` instead of the one the
    pools file names (``fenceline eval --adapter``: compare adapters on the same invoices).

    Raises:
        ValueError: no pool runs an adapter (a pool without ``lora:`` has no rank to keep).
    """
    if not any(p.lora is not None for p in pools.pools):
        raise ValueError("no pool in the pools file runs a LoRA adapter to replace")
    folder = str(path.expanduser().resolve())
    return pools.model_copy(
        update={
            "pools": [
                p.model_copy(update={"lora": p.lora.model_copy(update={"path": folder})})
                if p.lora is not None
                else p
                for p in pools.pools
            ]
        }
    )
