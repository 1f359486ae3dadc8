"""An OpenAI-compatible fake provider: a real HTTP server on loopback with injectable faults.

It stands in for the one third party Fenceline cannot run locally, the hosted
model provider, so tests exercise the real HTTP client
(:class:`pipeline.extraction.engines.OpenAICompatibleEngine`) over a real socket.

Endpoints:

* ``POST /v1/chat/completions``: an OpenAI ``chat.completion`` whose message
  content is the canned JSON answer (or what the ``answer`` callable computes
  from the request body), with ``usage`` filled in. Tokens are estimated as
  ``ceil(chars / 4)``: the fake needs stable counts, not a tokenizer.
* ``POST /admin/faults``: replace the fault plan (:class:`FaultPlan`):
  a *script* of steps consumed in order (``{"kind": "429", "count": 3,
  "retry_after": "2"}``), then steady behaviour: a latency distribution,
  random fault rates (a 429 storm is ``{"rates": {"429": 1.0}}``), and RPM/TPM
  enforcement over a sliding window. ``DELETE /admin/faults`` resets it.
* ``GET /admin/calls``: what the provider observed, one record per call
  (arrival time, tokens, outcome, latency); ``DELETE /admin/calls`` clears it.
* ``PUT /admin/answer``: the canned JSON answer (any JSON value).

Step kinds: ``ok``, ``429``, ``5xx`` (``status``, default 503), ``hang`` (never
answers until the client disconnects or ``hang_seconds`` pass), ``malformed``
(``malformed``: ``not_json`` | ``no_choices`` | ``bad_content`` |
``truncated``). ``retry_after`` is sent verbatim, so it may be delta-seconds
or an HTTP-date; ``"+N"`` is turned into the HTTP-date N seconds from now.

Run it::

    python -m benchmarks.fake_provider --port 8900
    curl -XPOST localhost:8900/admin/faults -d '{"rates": {"429": 0.5}, "retry_after": "1"}'

or in a test::

    with FakeProvider() as fake:   # uvicorn on 127.0.0.1, a free port, in a thread
        engine = OpenAICompatibleEngine(fake.base_url, "fake-model")
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

DEFAULT_ANSWER: dict[str, Any] = {
    "invoice_number": "INV-1001",
    "currency": "EUR",
    "total": 123.45,
    "paid": False,
}

Kind = Literal["ok", "429", "5xx", "hang", "malformed"]


class Step(BaseModel):
    """``count`` consecutive calls answered with ``kind``."""

    kind: Kind
    count: int = Field(1, ge=1)
    status: int = 503
    retry_after: str | None = None
    malformed: Literal["not_json", "no_choices", "bad_content", "truncated"] = "not_json"


class Latency(BaseModel):
    """Added service time per call, in seconds."""

    dist: Literal["none", "fixed", "uniform", "lognormal"] = "none"
    #: fixed: a; uniform: [a, b]; lognormal: median a, sigma b.
    a: float = 0.0
    b: float = 0.0

    def sample(self, rng: random.Random) -> float:
        if self.dist == "fixed":
            return self.a
        if self.dist == "uniform":
            return rng.uniform(self.a, self.b)
        if self.dist == "lognormal":
            return rng.lognormvariate(math.log(max(self.a, 1e-6)), self.b)
        return 0.0


class FaultPlan(BaseModel):
    """The whole fault configuration; POST it to ``/admin/faults``."""

    script: list[Step] = Field(default_factory=list)
    latency: Latency = Field(default_factory=Latency)
    #: Probability per call of each fault kind once the script is used up.
    rates: dict[Literal["429", "5xx", "hang", "malformed"], float] = Field(default_factory=dict)
    #: Retry-After for random 429/5xx faults (verbatim, or "+N" for an HTTP-date).
    retry_after: str | None = None
    status: int = 503
    hang_seconds: float = 3600.0
    #: Requests / tokens per window; over either the call gets 429 with the wait time.
    rpm: int | None = None
    tpm: int | None = None
    window_s: float = 60.0
    seed: int | None = None
    #: Draw each call's latency from a stream seeded by (seed, prompt): the same
    #: prompt always takes the same time, so two runs over the same prompts (a
    #: pipeline vs direct baseline) see identical service times.
    latency_by_prompt: bool = False


class CallRecord(BaseModel):
    seq: int
    at: float
    path: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    outcome: str
    status: int
    latency_s: float


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _retry_after_header(value: str | None) -> dict[str, str]:
    if value is None:
        return {}
    if value.startswith("+"):
        when = datetime.now(UTC) + timedelta(seconds=float(value[1:]))
        return {"Retry-After": format_datetime(when, usegmt=True)}
    return {"Retry-After": value}


class FakeProvider:
    """The fake provider service: ``start()``/``stop()``, or use it as a context manager.

    Args:
        host / port: where to listen; port 0 picks a free one (see :attr:`port`).
        answer: computes the message content from the request body; returns a
            JSON-able value (serialised) or a string (sent verbatim).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        answer: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        self._answer_fn = answer
        self._answer: Any = DEFAULT_ANSWER
        self._plan = FaultPlan()
        self._script: deque[Step] = deque()
        self._rng = random.Random()
        self._calls: list[CallRecord] = []
        self._window: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = self._build_app()

    # -- service shape -------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("fake provider not started")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``)."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 10.0) -> FakeProvider:
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self._requested_port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-provider", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake provider did not start")
            time.sleep(0.01)
        self.port = int(self._server.servers[0].sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- in-process admin (same effect as the HTTP admin API) ----------------

    def set_faults(self, plan: FaultPlan | dict[str, Any]) -> None:
        plan = plan if isinstance(plan, FaultPlan) else FaultPlan.model_validate(plan)
        with self._lock:
            self._plan = plan
            self._script = deque(s.model_copy() for s in plan.script)
            self._rng = random.Random(plan.seed)
            self._window.clear()

    def reset(self) -> None:
        self.set_faults(FaultPlan())
        with self._lock:
            self._calls.clear()
            self._answer = DEFAULT_ANSWER

    def set_answer(self, answer: Any) -> None:
        with self._lock:
            self._answer = answer

    def calls(self) -> list[CallRecord]:
        with self._lock:
            return list(self._calls)

    # -- behaviour -----------------------------------------------------------

    def _next_kind(self) -> tuple[Kind, Step | None]:
        with self._lock:
            if self._script:
                step = self._script[0]
                step.count -= 1
                if step.count <= 0:
                    self._script.popleft()
                return step.kind, step
            roll = self._rng.random()
            acc = 0.0
            for kind, rate in self._plan.rates.items():
                acc += rate
                if roll < acc:
                    return kind, None
            return "ok", None

    def _admit(self, tokens: int, now: float) -> float | None:
        """Sliding-window RPM/TPM: None if admitted, else seconds until it would be."""
        plan = self._plan
        if plan.rpm is None and plan.tpm is None:
            return None
        with self._lock:
            while self._window and self._window[0][0] <= now - plan.window_s:
                self._window.popleft()
            used_requests = len(self._window)
            used_tokens = sum(t for _, t in self._window)
            over_rpm = plan.rpm is not None and used_requests + 1 > plan.rpm
            over_tpm = plan.tpm is not None and used_tokens + tokens > plan.tpm
            if over_rpm or over_tpm:
                oldest = self._window[0][0] if self._window else now
                return max(0.0, oldest + plan.window_s - now)
            self._window.append((now, tokens))
            return None

    def _record(self, **fields: Any) -> None:
        with self._lock:
            self._calls.append(CallRecord(seq=len(self._calls) + 1, **fields))

    def _content(self, body: dict[str, Any]) -> str:
        answer = self._answer_fn(body) if self._answer_fn is not None else self._answer
        return answer if isinstance(answer, str) else json.dumps(answer)

    async def _chat(self, request: Request) -> Response:
        arrived = time.time()
        started = time.monotonic()
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": {"message": "body is not JSON"}}, status_code=400)
        messages = body.get("messages") or []
        prompt_text = "".join(str(m.get("content", "")) for m in messages)
        prompt_tokens = estimate_tokens(prompt_text)
        model = body.get("model")
        plan = self._plan

        def record(outcome: str, status: int, completion_tokens: int = 0) -> None:
            self._record(
                at=arrived,
                path=request.url.path,
                model=model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                outcome=outcome,
                status=status,
                latency_s=time.monotonic() - started,
            )

        kind, step = self._next_kind()
        retry_after = step.retry_after if step is not None else plan.retry_after
        if kind == "ok":
            wait = self._admit(prompt_tokens + int(body.get("max_tokens") or 0), time.monotonic())
            if wait is not None:
                record("rate_limited_quota", 429)
                return JSONResponse(
                    {"error": {"message": "rate limit reached", "code": "rate_limit_exceeded"}},
                    status_code=429,
                    headers={"Retry-After": str(math.ceil(wait))},
                )
        if plan.latency_by_prompt:
            digest = hashlib.sha256(f"{plan.seed}:{prompt_text}".encode()).hexdigest()
            delay = plan.latency.sample(random.Random(digest))
        else:
            delay = plan.latency.sample(self._rng)
        if delay > 0:
            await asyncio.sleep(delay)
        if kind == "429":
            record("rate_limited", 429)
            return JSONResponse(
                {"error": {"message": "rate limited", "code": "rate_limit_exceeded"}},
                status_code=429,
                headers=_retry_after_header(retry_after),
            )
        if kind == "5xx":
            status = step.status if step is not None else plan.status
            record("server_error", status)
            return JSONResponse(
                {"error": {"message": "upstream overloaded", "code": "server_error"}},
                status_code=status,
                headers=_retry_after_header(retry_after),
            )
        if kind == "hang":
            deadline = time.monotonic() + plan.hang_seconds
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.05)
            record("hang", 0)
            return Response(status_code=504)
        content = self._content(body)
        completion_tokens = estimate_tokens(content)
        finish_reason = "stop"
        if kind == "malformed":
            variant = step.malformed if step is not None else "not_json"
            record(f"malformed:{variant}", 200, completion_tokens)
            if variant == "not_json":
                return PlainTextResponse('{"id": "chatcmpl-broken", "choices": [', 200)
            if variant == "no_choices":
                return JSONResponse({"id": "chatcmpl-x", "object": "chat.completion"})
            if variant == "truncated":
                content, finish_reason = content[: max(1, len(content) // 2)], "length"
            else:
                content = "Sure! Here is the invoice: " + content[:10]
        else:
            record("ok", 200, completion_tokens)
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self._calls)}",
                "object": "chat.completion",
                "created": int(arrived),
                "model": model or "fake-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": 0},
                },
            }
        )

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fenceline fake provider")
        app.add_api_route("/v1/chat/completions", self._chat, methods=["POST"])

        @app.post("/admin/faults")
        async def set_faults(plan: FaultPlan) -> dict[str, Any]:
            self.set_faults(plan)
            return plan.model_dump()

        @app.delete("/admin/faults")
        async def reset_faults() -> dict[str, str]:
            self.set_faults(FaultPlan())
            return {"status": "reset"}

        @app.get("/admin/calls")
        async def get_calls() -> list[dict[str, Any]]:
            return [c.model_dump() for c in self.calls()]

        @app.delete("/admin/calls")
        async def clear_calls() -> dict[str, str]:
            with self._lock:
                self._calls.clear()
            return {"status": "cleared"}

        @app.put("/admin/answer")
        async def put_answer(request: Request) -> dict[str, str]:
            self.set_answer(await request.json())
            return {"status": "ok"}

        @app.get("/healthz")
        async def healthz() -> dict[str, str]:
            return {"status": "ok"}

        return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="OpenAI-compatible fake provider with faults.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8900)
    parser.add_argument("--answer", default=None, help="canned JSON answer")
    parser.add_argument("--faults", default=None, help="initial fault plan (JSON)")
    args = parser.parse_args(argv)
    fake = FakeProvider(args.host, args.port)
    if args.answer:
        fake.set_answer(json.loads(args.answer))
    if args.faults:
        fake.set_faults(json.loads(args.faults))
    uvicorn.run(fake.app, host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
