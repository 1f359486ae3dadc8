"""The processes a benchmark run stands up on loopback, and their teardown.

* :func:`fresh_database`: a new migrated PostgreSQL database, dropped afterwards;
* :func:`intake_server`: the intake API under uvicorn in its own process;
* :class:`FakeProcess`: the fake OpenAI-compatible provider in its own process;
* :class:`ErpProcess`: the reference ERP receiver (``benchmarks.erp_receiver``).

``python -m benchmarks.infra intake|fake-provider ...`` are the child entries.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import uvicorn

from benchmarks.erp_receiver import migrate_erp
from benchmarks.fake_provider import CallRecord, FakeProvider, FaultPlan
from benchmarks.invoices.derived import derived_answers
from benchmarks.invoices.generator import GeneratedInvoice
from benchmarks.scenario import Scenario, scenario_corpus
from benchmarks.settings import admin_dsn
from pipeline.api import create_app
from pipeline.database import connect, scratch_database
from pipeline.extraction import answer_for, document_in_prompt, shown_document
from pipeline.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def fresh_database(admin: str | None = None) -> AsyncIterator[str]:
    """A new migrated database for one run on the server of ``admin`` (default: the
    benchmarks' admin DSN); dropped (forcibly) afterwards."""
    async with scratch_database(admin or admin_dsn(), "fl_bench") as dsn:
        conn = await connect(dsn)
        try:
            await migrate_erp(conn)  # the runs' reference ERP receiver reads its tables
        finally:
            await conn.close()
        yield dsn


async def _wait_healthy(url: str, proc: asyncio.subprocess.Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            if proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the process behind {url} did not start")
            await asyncio.sleep(0.2)


async def terminate(proc: asyncio.subprocess.Process | None, grace: float = 15.0) -> None:
    """Stop ``proc`` (SIGTERM, then SIGKILL after ``grace`` seconds); None or exited: nothing."""
    if proc is None or proc.returncode is not None:
        return
    proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def intake_server(overrides: dict[str, Any], timeout: float = 60.0) -> AsyncIterator[str]:
    """The intake API (:func:`pipeline.api.app.create_app`) under uvicorn in its own process.

    Intake runs apart from the drivers, as in a deployment; in one process a
    burst's HTTP handling would steal the drivers' event loop and the measured
    drain would include that contention. ``overrides`` are Settings fields.
    """
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.infra", "intake", str(port), json.dumps(overrides)
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(f"{url}/healthz", proc, timeout)
        yield url
    finally:
        await terminate(proc)


def serve_intake(port: int, overrides_json: str) -> None:
    """Entry of the intake process (see :func:`intake_server`)."""
    settings = Settings(**json.loads(overrides_json))
    uvicorn.run(
        create_app(settings),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        backlog=4096,
    )


class FakeProcess:
    """The fake provider in its own process, answering with the scenario corpus.

    In-process (a uvicorn thread) it shares the GIL with intake and drivers,
    and on a loaded machine its responses queue behind them, which would add
    Python scheduling delay to every provider call; a separate process keeps
    the provider's latency what the scenario configures.
    """

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, timeout: float | None = None) -> None:
        """Start the process; ``timeout`` defaults to 60 s plus 0.2 s per corpus invoice
        (it generates the corpus first: 2,100 took over 60 s on a loaded 2-core machine)."""
        if timeout is None:
            timeout = 60.0 + 0.2 * self.scenario.documents.corpus
        self.port = free_port()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.infra",
            "fake-provider",
            str(self.port),
            self.scenario.model_dump_json(),
        )
        await _wait_healthy(f"http://127.0.0.1:{self.port}/healthz", self._proc, timeout)

    async def calls(self) -> list[CallRecord]:
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.get(f"http://127.0.0.1:{self.port}/admin/calls")
            r.raise_for_status()
        return [CallRecord.model_validate(c) for c in r.json()]

    async def stop(self) -> None:
        await terminate(self._proc, 10)
        self._proc = None


def serve_fake_provider(port: int, scenario_json: str) -> None:
    """Entry of the fake-provider process (see :class:`FakeProcess`)."""
    scenario = Scenario.model_validate_json(scenario_json)
    corpus = scenario_corpus(scenario)
    planted = derived_answers(corpus) if scenario.documents.plants else []
    fake = FakeProvider(port=port, answer=corpus_answer(corpus, planted))
    fake.set_faults(
        FaultPlan(
            latency=scenario.engine.latency,
            rpm=scenario.engine.rpm,
            tpm=scenario.engine.tpm,
            seed=scenario.seed,
            latency_by_prompt=True,
        )
    )
    uvicorn.run(fake.app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def corpus_answer(corpus: list[GeneratedInvoice], planted: Sequence[tuple[str, str]] = ()) -> Any:
    """Fake-provider answer: the candidate extraction of the invoice in the prompt, in the
    contract the prompt asks for (a v2 prompt numbers the lines; v1 shows the text as is).
    ``planted``: (OCR text, v2 answer) of documents derived from corpus invoices."""
    by_text = {shown_document(inv.ocr_text): inv for inv in corpus}
    planted_by_text = {shown_document(text): answer for text, answer in planted}
    markers = [(inv.ocr_text[:160], inv.candidate.model_dump_json()) for inv in corpus]

    def answer(body: dict[str, Any]) -> Any:
        messages = body.get("messages", [])
        shown = document_in_prompt(messages)
        if shown is not None:
            if shown in planted_by_text:
                return planted_by_text[shown]
            inv = by_text.get(shown)
            return answer_for(inv.candidate, inv.ocr_text) if inv is not None else "{}"
        user = "\n".join(str(m.get("content", "")) for m in messages)
        for marker, candidate in markers:
            if marker in user:
                return candidate
        return "{}"

    return answer


class ErpProcess:
    """The reference ERP receiver on loopback, verifying every tenant's endpoint secret."""

    def __init__(self, database_url: str, port: int, *, fault_api: bool = False) -> None:
        self.database_url = database_url
        self.port = port
        #: Serve ``POST /_fault`` (the chaos scenario switches ERP faults on and off).
        self.fault_api = fault_api
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/webhooks/fenceline"

    async def start(self, secrets: list[str], timeout: float = 30.0) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.erp_receiver",
            "--port",
            str(self.port),
            "--database-url",
            self.database_url,
            # The load model replays one corpus: the same supplier invoice is many jobs.
            "--allow-duplicate-invoices",
            *(["--enable-fault-api"] if self.fault_api else []),
            env={**os.environ, "FENCELINE_ERP_SECRETS": " ".join(secrets)},
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = await asyncio.wait_for(self._proc.stdout.readline(), timeout)
        if not line.startswith(b"listening"):
            raise RuntimeError(f"the ERP receiver did not start: {line!r}")

    async def stop(self) -> None:
        await terminate(self._proc, 10)
        self._proc = None


if __name__ == "__main__" and sys.argv[1:2] == ["fake-provider"]:
    serve_fake_provider(int(sys.argv[2]), sys.argv[3])
elif __name__ == "__main__" and sys.argv[1:2] == ["intake"]:
    serve_intake(int(sys.argv[2]), sys.argv[3])
