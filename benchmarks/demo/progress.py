"""The demo's live progress: job states, state changes and tokens while the engine works.

Every poll (1 s) reads each job's state; a change prints at once
(``job 3f2a91c0 seed 2026 clean: RUNNING → REVIEW_REQUIRED``). A progress line
prints every :data:`PRINT_EVERY_S` seconds whether or not anything settled,
with elapsed time, the state counts, and the output tokens generated so far
with the recent tokens per second, and the prompt tokens prefilled so far (on
CPU the prefill of a batch of prompts takes minutes before the first answer
token: the ``in`` figure is what moves then). On a terminal the progress line is redrawn
in place; otherwise (a log, CI, ``| tee``) each is its own line.

Tokens come from the engines' own counters when reachable: every pool's
``fenceline_engine_generation_tokens_total`` (and ``..._prompt_tokens_total``,
counted per prefill chunk) read through a Serve handle
(``PoolEngine.metrics_text``), which moves while answers are being written. If
that read fails or takes longer than :data:`ENGINE_READ_TIMEOUT_S` the line
falls back to the ``completion_tokens`` of the finished attempts in PostgreSQL
(which only move when an attempt ends) and says so.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple, TextIO

from pipeline.database import connect
from pipeline.queries import q
from pipeline.states import SETTLED, JobState

PRINT_EVERY_S = 2.0
POLL_S = 1.0
ENGINE_READ_TIMEOUT_S = 2.0
RATE_WINDOW_S = 10.0
GENERATED = "fenceline_engine_generation_tokens_total"
PREFILLED = "fenceline_engine_prompt_tokens_total"

#: Progress-line names of the job states, in the order they are shown.
SHORT_STATES: tuple[tuple[str, str], ...] = (
    (JobState.READY.value, "READY"),
    (JobState.RUNNING.value, "RUNNING"),
    (JobState.RETRY_SCHEDULED.value, "RETRY"),
    (JobState.SUCCEEDED.value, "SUCCEEDED"),
    (JobState.REVIEW_REQUIRED.value, "REVIEW"),
    (JobState.FAILED_TERMINAL.value, "FAILED"),
)
_SETTLED = frozenset(s.value for s in SETTLED)


def format_progress(
    elapsed: float,
    counts: Mapping[str, int],
    total: int,
    tokens: float | None,
    rate: float | None,
    source: str,
    delivered: int = 0,
    prefilled: float | None = None,
) -> str:
    """``[  42s] READY 0 RUNNING 8 ... | settled 0/8 | delivered 0 | out 1234 tok, 28.1 tok/s``;
    with ``prefilled``, ``in 7541 out 1234 tok ...``."""
    settled = sum(n for s, n in counts.items() if s in _SETTLED)
    states = "  ".join(f"{short} {counts.get(state, 0)}" for state, short in SHORT_STATES)
    if tokens is None:
        tok = "out tokens n/a"
    else:
        speed = "  -- tok/s" if rate is None else f" {rate:5.1f} tok/s"
        tok = f"out {int(tokens):6d} tok{speed} ({source})"
        if prefilled is not None:
            tok = f"in {int(prefilled):6d} {tok}"
    return f"[{elapsed:5.0f}s] {states} | settled {settled}/{total} | delivered {delivered} | {tok}"


def format_change(
    elapsed: float, job_id: str, seed: int | str, variant: str, old: str | None, new: str
) -> str:
    """``[  42s] job 3f2a91c0 seed 2026 clean: RUNNING → REVIEW_REQUIRED``."""
    return f"[{elapsed:5.0f}s] job {job_id[:8]} seed {seed} {variant}: {old or 'new'} → {new}"


class TokenRate:
    """Tokens per second over the last ``window`` seconds of samples."""

    def __init__(self, window: float = RATE_WINDOW_S) -> None:
        self.window = window
        self._samples: deque[tuple[float, float]] = deque()

    def add(self, t: float, tokens: float) -> float | None:
        """Record ``tokens`` (a running total) at time ``t``; the rate, None until two samples."""
        if self._samples and tokens < self._samples[-1][1]:
            self._samples.clear()  # a counter that went back: an engine restarted
        self._samples.append((t, tokens))
        while len(self._samples) > 2 and t - self._samples[1][0] >= self.window:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        if t <= t0:
            return None
        return (tokens - n0) / (t - t0)


class EngineTokens(NamedTuple):
    """Running totals over every pool's engine."""

    prefilled: float
    generated: float


def engine_tokens(texts: Sequence[str]) -> EngineTokens:
    """The sums of the prompt and generated token counters over Prometheus texts."""
    from prometheus_client.parser import text_string_to_metric_families

    sums = {PREFILLED: 0.0, GENERATED: 0.0}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in sums:
                    sums[s.name] += s.value
    return EngineTokens(sums[PREFILLED], sums[GENERATED])


def engine_token_reader(
    app_name: str, deployments: Sequence[str]
) -> Callable[[], Awaitable[EngineTokens]]:
    """Read every engine's token counters through Serve (one replica per deployment).

    ``deployments`` are the engine deployments (:meth:`PoolsConfig.engine_deployments`),
    once each: pools sharing an engine must not count its tokens twice.
    """
    from ray import serve

    handles: list[Any] = []

    async def one(h: Any) -> str:
        return str(await h.metrics_text.remote())

    async def read() -> EngineTokens:
        if not handles:  # created on first use, inside the loop that awaits them
            handles.extend(serve.get_deployment_handle(d, app_name) for d in deployments)
        return engine_tokens(await asyncio.gather(*(one(h) for h in handles)))

    return read


class ProgressPrinter:
    """Writes change lines and progress lines; on a TTY the progress line is redrawn."""

    def __init__(self, out: TextIO | None = None, tty: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self._drawn = False

    def change(self, line: str) -> None:
        self._clear()
        self.out.write(line + "\n")
        self.out.flush()

    def progress(self, line: str) -> None:
        if self.tty:
            self._clear()
            self.out.write(line)
            self._drawn = True
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def close(self) -> None:
        if self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False

    def _clear(self) -> None:
        if self._drawn:
            self.out.write("\r\x1b[2K")
            self._drawn = False


async def watch(
    dsn: str,
    jobs: Sequence[Mapping[str, Any]],
    timeout: float,
    started: float,
    read_engine: Callable[[], Awaitable[EngineTokens]] | None = None,
    printer: ProgressPrinter | None = None,
) -> dict[str, int]:
    """Poll until every job in ``jobs`` settled (or ``timeout``); the final state counts.

    ``jobs`` are the demo's submissions (``job_id``, ``seed``, ``variant``, ``document``).
    """
    printer = printer or ProgressPrinter()
    meta = {str(j["job_id"]): j for j in jobs}
    known: dict[str, str] = {}
    rate = TokenRate()
    use_engine = read_engine is not None
    engine_failures = 0
    last_source = ""
    last_print = -PRINT_EVERY_S
    conn = await connect(dsn)
    try:
        while True:
            now = time.monotonic()
            elapsed = now - started
            states = {str(r["id"]): r["state"] for r in await conn.fetch(q("report_job_states"))}
            for job_id, state in states.items():
                if job_id in meta and known.get(job_id) != state:
                    m = meta[job_id]
                    sent = m.get("document", "text")
                    variant = m["variant"] + ("" if sent == "text" else f" ({sent})")
                    printer.change(
                        format_change(elapsed, job_id, m["seed"], variant, known.get(job_id), state)
                    )
                    known[job_id] = state
            counts: dict[str, int] = {}
            for job_id in meta:
                s = states.get(job_id, "?")
                counts[s] = counts.get(s, 0) + 1
            done = sum(n for s, n in counts.items() if s in _SETTLED)
            finished = done >= len(meta) or elapsed > timeout
            if printer.tty or now - last_print >= PRINT_EVERY_S - 0.05 or finished:
                tokens: float | None = None
                prefilled: float | None = None
                source = "engine"
                if use_engine and read_engine is not None:
                    try:
                        read = await asyncio.wait_for(read_engine(), ENGINE_READ_TIMEOUT_S)
                        prefilled, tokens = read.prefilled, read.generated
                        engine_failures = 0
                    except Exception:  # unreachable or slow: fall back, try again later
                        engine_failures += 1
                        use_engine = engine_failures < 5
                if tokens is None:
                    usage = await conn.fetchrow(q("report_attempt_usage"))
                    tokens, source = float(usage["completion"]), "finished attempts"
                if source != last_source:  # two counters: a rate across them means nothing
                    rate, last_source = TokenRate(), source
                deliveries = {
                    r["state"]: r["n"] for r in await conn.fetch(q("report_delivery_counts"))
                }
                line = format_progress(
                    time.monotonic() - started,
                    counts,
                    len(meta),
                    tokens,
                    rate.add(time.monotonic(), tokens),
                    source,
                    deliveries.get("delivered", 0),
                    prefilled,
                )
                printer.progress(line)
                last_print = now
            if done >= len(meta):
                printer.close()
                return counts
            if elapsed > timeout:
                printer.close()
                print(f"timeout after {timeout:.0f} s; stopping with {done}/{len(meta)} settled")
                return counts
            await asyncio.sleep(POLL_S)
    finally:
        printer.close()
        await conn.close()
