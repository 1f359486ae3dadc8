"""The load generator's HTTP client in a process of its own.

The intake's clients are outside the system. In the drivers' process, a burst's
client work (httpx: about 13 ms of CPU per POST on a 2-core machine, profiled
with py-spy in ``benchmarks.load.overhead_bench``) ran on the drivers' event loop,
and the measured drain included that contention; intake and the fake provider
run in their own processes for the same reason (:mod:`benchmarks.infra`).

The parent hands the child a :class:`ClientPlan` on stdin; the child fires it
open loop (:class:`benchmarks.load.generator.OpenLoopGenerator`, the same schedule and
semantics as in process) and writes one JSON line per event to stdout: ``start``
with its wall clock as the schedule starts (the run's time zero: the child's own
start-up is not the pipeline's), ``sent`` when a request leaves, ``done`` with its
outcome when it ends. The parent's
:class:`ClientProcess` mirrors them into its own generator's sends, so reports
read the same fields as before, and hands each answer to a callback as it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from benchmarks.load.generator import OpenLoopGenerator


@dataclass(frozen=True)
class Post:
    """One request of the plan: when it is due, whose key, which idempotency key, which text."""

    offset: float
    bearer: str
    idempotency_key: str
    text: int


@dataclass
class ClientPlan:
    """What the child sends: ``posts`` to ``url`` with at most ``connections`` on the wire."""

    url: str
    connections: int
    wait_timeout_s: float
    texts: list[str]
    posts: list[Post]
    path: str = "/v1/extraction-jobs"
    #: Fetched once before the schedule starts: a fresh process's first request pays
    #: for httpx's lazy set-up (about 50 ms here), which the in-process client had
    #: paid before the run; None to skip.
    warm_up_path: str | None = "/healthz"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(raw: str) -> ClientPlan:
        data = json.loads(raw)
        data["posts"] = [Post(**p) for p in data["posts"]]
        return ClientPlan(**data)


@dataclass(frozen=True)
class Answer:
    """One finished request, as the child saw it."""

    index: int
    outcome: str
    status: int | None
    detail: Any
    job_id: str | None
    latency_s: float | None
    wall: float


@dataclass
class ClientProcess:
    """Runs a :class:`ClientPlan` in a child process.

    ``gen`` mirrors the child's sends (``sent``, ``done``, ``outcome``, ``status``,
    ``detail``: times relative to the child's start); ``on_answer`` is called with
    each :class:`Answer` as it arrives.
    """

    plan: ClientPlan
    on_answer: Callable[[Answer], None]
    #: Called with the child's wall-clock time as its schedule starts (offset 0).
    on_start: Callable[[float], None] = lambda _wall: None
    gen: OpenLoopGenerator = field(init=False)
    _proc: asyncio.subprocess.Process | None = None

    def __post_init__(self) -> None:
        self.gen = OpenLoopGenerator([p.offset for p in self.plan.posts], _not_here)

    async def run(self) -> None:
        """Start the child, send the plan, mirror its events until it exits."""
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.load.client_process",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 20,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(self.plan.to_json().encode())
        await self._proc.stdin.drain()
        self._proc.stdin.close()
        async for raw in self._proc.stdout:
            self._mirror(json.loads(raw))
        code = await self._proc.wait()
        if code != 0:
            raise RuntimeError(f"the load generator's client process exited with {code}")

    def _mirror(self, event: dict[str, Any]) -> None:
        if event["event"] == "start":
            self.on_start(event["wall"])
            return
        send = self.gen.sends[event["i"]]
        if event["event"] == "sent":
            send.sent = event["t"]
            return
        send.done, send.outcome = event["t"], event["outcome"]
        send.status, send.detail = event["status"], event["detail"]
        self.on_answer(
            Answer(
                index=event["i"],
                outcome=event["outcome"],
                status=event["status"],
                detail=event["detail"],
                job_id=event.get("job_id"),
                latency_s=event.get("latency"),
                wall=event["wall"],
            )
        )

    async def cancel(self) -> None:
        """Stop the child (requests still waiting are abandoned, as ``gen.cancel`` did)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            with contextlib.suppress(ProcessLookupError):
                await self._proc.wait()


async def _not_here(_index: int) -> tuple[str, int | None, Any]:
    raise RuntimeError("the parent's generator only mirrors the client process")


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


async def fire_plan(plan: ClientPlan) -> None:
    """The child: fire ``plan`` open loop, reporting each event on stdout."""
    limits = httpx.Limits(
        max_connections=plan.connections, max_keepalive_connections=plan.connections
    )
    # At most ``connections`` requests on the wire, like a real client's limit; later
    # arrivals queue in a FIFO semaphore (cheap) rather than in httpx's pool, whose
    # waiter scan is O(waiters) per event. Queueing counts into acceptance latency.
    wire = asyncio.Semaphore(plan.connections)
    async with httpx.AsyncClient(base_url=plan.url, limits=limits, timeout=120) as client:

        async def fire(i: int) -> tuple[str, int | None, Any]:
            post = plan.posts[i]
            _emit({"event": "sent", "i": i, "t": time.monotonic() - gen.start})
            started = time.monotonic()
            job_id: str | None = None
            try:
                async with wire:
                    r = await client.post(
                        plan.path,
                        json={"document": {"text": plan.texts[post.text]}},
                        headers={
                            "Authorization": f"Bearer {post.bearer}",
                            "Idempotency-Key": post.idempotency_key,
                        },
                    )
                latency = time.monotonic() - started
                if r.status_code == 202:
                    job_id = r.json()["job_id"]
                    result: tuple[str, int | None, Any] = ("accepted", r.status_code, None)
                else:
                    result = ("rejected", r.status_code, r.text[:200])
            except Exception as exc:  # a failed request is a result, not a crash
                latency = None
                result = ("error", None, f"{type(exc).__name__}: {exc}")
            _emit(
                {
                    "event": "done",
                    "i": i,
                    "t": time.monotonic() - gen.start,
                    "outcome": result[0],
                    "status": result[1],
                    "detail": result[2],
                    "job_id": job_id,
                    "latency": latency,
                    "wall": time.time(),
                }
            )
            return result

        gen = OpenLoopGenerator([p.offset for p in plan.posts], fire)
        if plan.warm_up_path is not None:
            await client.get(plan.warm_up_path)
        _emit({"event": "start", "wall": time.time()})
        await gen.run(wait=True, timeout=plan.wait_timeout_s)
        await gen.cancel()


def main() -> None:
    asyncio.run(fire_plan(ClientPlan.from_json(sys.stdin.read())))


if __name__ == "__main__":
    main()
