"""benchmarks.load.client_process: the load generator's client in its own process."""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchmarks.load.client_process import Answer, ClientPlan, ClientProcess, Post
from tests.support.delivery import ServerThread


def intake_double() -> Starlette:
    """A stand-in intake: 202 with a job id, 429 for the key "full"; records what came."""
    seen: list[tuple[str, str, str]] = []

    async def accept(request: Request) -> JSONResponse:
        body = await request.json()
        key = request.headers["Idempotency-Key"]
        seen.append((request.headers["Authorization"], key, body["document"]["text"]))
        if request.headers["Authorization"] == "Bearer full":
            return JSONResponse({"title": "quota"}, status_code=429)
        return JSONResponse({"job_id": f"job-{key}"}, status_code=202)

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[
            Route("/v1/extraction-jobs", accept, methods=["POST"]),
            Route("/healthz", healthz),
        ]
    )
    app.state.seen = seen
    return app


async def test_the_child_fires_the_plan_and_the_parent_mirrors_every_answer() -> None:
    app = intake_double()
    server = ServerThread(app).start()
    try:
        posts = [
            Post(offset=0.0, bearer="a", idempotency_key="k0", text=0),
            Post(offset=0.05, bearer="full", idempotency_key="k1", text=1),
            Post(offset=0.1, bearer="a", idempotency_key="k2", text=1),
        ]
        plan = ClientPlan(
            url=f"http://127.0.0.1:{server.port}",
            connections=2,
            wait_timeout_s=30,
            texts=["first invoice", "second invoice"],
            posts=posts,
        )
        answers: list[Answer] = []
        starts: list[float] = []
        before = time.time()
        client = ClientProcess(plan, answers.append, on_start=starts.append)
        await client.run()
    finally:
        server.stop()
    assert len(starts) == 1 and before <= starts[0] <= time.time()
    by_index = {a.index: a for a in answers}
    assert [(by_index[i].outcome, by_index[i].status) for i in range(3)] == [
        ("accepted", 202),
        ("rejected", 429),
        ("accepted", 202),
    ]
    assert by_index[0].job_id == "job-k0" and by_index[1].job_id is None
    assert all(a.latency_s is not None and a.latency_s > 0 for a in answers)
    # What the server received is the plan: key, idempotency key and text per post.
    assert sorted(app.state.seen) == sorted(
        [("Bearer a", "k0", "first invoice"), ("Bearer full", "k1", "second invoice"),
         ("Bearer a", "k2", "second invoice")]
    )  # fmt: skip
    # The parent's generator holds the child's sends, in schedule order, on schedule.
    sends = client.gen.sends
    assert [s.status for s in sends] == [202, 429, 202]
    assert all(s.sent is not None and s.done is not None and s.done >= s.sent for s in sends)
    assert sends[2].sent is not None and sends[2].sent >= 0.1 - 0.01
