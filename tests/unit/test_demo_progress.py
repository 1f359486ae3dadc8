"""The demo's progress lines: formatting, token rate, engine counter parsing, TTY redraw."""

from __future__ import annotations

import io

from prometheus_client import CollectorRegistry, Counter, generate_latest

from benchmarks.demo.progress import (
    ProgressPrinter,
    TokenRate,
    engine_tokens,
    format_change,
    format_progress,
)


def test_progress_line_has_elapsed_every_state_and_tokens() -> None:
    counts = {"RUNNING": 5, "READY": 1, "SUCCEEDED": 1, "FAILED_TERMINAL": 1}
    line = format_progress(42.3, counts, 8, 1234.0, 28.14, "engine", delivered=1)
    assert line == (
        "[   42s] READY 1  RUNNING 5  RETRY 0  SUCCEEDED 1  REVIEW 0  FAILED 1"
        " | settled 2/8 | delivered 1 | out   1234 tok  28.1 tok/s (engine)"
    )


def test_progress_line_without_a_rate_or_tokens() -> None:
    counts = {"RETRY_SCHEDULED": 2, "REVIEW_REQUIRED": 6}
    line = format_progress(3, counts, 8, 0.0, None, "finished attempts")
    assert "RETRY 2" in line and "REVIEW 6" in line and "settled 6/8" in line
    assert line.endswith("out      0 tok  -- tok/s (finished attempts)")
    assert format_progress(3, counts, 8, None, None, "engine").endswith("out tokens n/a")


def test_progress_line_shows_the_prompt_tokens_prefilled() -> None:
    """On CPU a batch's prefill takes minutes before the first answer token."""
    line = format_progress(60, {"RUNNING": 8}, 8, 4.0, 0.0, "engine", prefilled=6144.0)
    assert line.endswith("| in   6144 out      4 tok   0.0 tok/s (engine)")


def test_state_change_line() -> None:
    job = "3f2a91c0-1111-4000-8000-000000000000"
    line = format_change(61.6, job, 2029, "arithmetic_off_by_cent", "RUNNING", "REVIEW_REQUIRED")
    assert (
        line == "[   62s] job 3f2a91c0 seed 2029 arithmetic_off_by_cent: RUNNING → REVIEW_REQUIRED"
    )
    assert format_change(0, job, 2026, "clean", None, "READY").endswith("clean: new → READY")


def test_token_rate_over_a_sliding_window() -> None:
    rate = TokenRate(window=10.0)
    assert rate.add(0.0, 0.0) is None
    assert rate.add(2.0, 60.0) == 30.0
    assert rate.add(4.0, 100.0) == 25.0
    for t in range(6, 30, 2):  # 10 tok/s from t=4 on
        r = rate.add(float(t), 100.0 + 10 * (t - 4))
    assert r is not None and abs(r - 10.0) < 1e-9  # the burst at the start fell out
    assert rate.add(30.0, 5.0) is None  # counter went back (engine restarted): start over


def test_engine_tokens_sums_every_pool() -> None:
    texts = []
    for pool, n in (("short", 700), ("long", 34)):
        registry = CollectorRegistry()
        c = Counter("fenceline_engine_generation_tokens", "Tokens generated.", ["pool"],
                    registry=registry)  # fmt: skip
        Counter("fenceline_engine_prompt_tokens", "Prompt.", ["pool"], registry=registry).labels(
            pool
        ).inc(9999)
        c.labels(pool).inc(n)
        texts.append(generate_latest(registry).decode())
    assert engine_tokens(texts) == (2 * 9999.0, 734.0)
    assert engine_tokens([]) == (0.0, 0.0)


def test_printer_writes_plain_lines_when_not_a_tty() -> None:
    out = io.StringIO()
    p = ProgressPrinter(out, tty=False)
    p.progress("[    2s] a")
    p.change("[    3s] job x: READY → RUNNING")
    p.progress("[    5s] b")
    p.close()
    assert out.getvalue() == "[    2s] a\n[    3s] job x: READY → RUNNING\n[    5s] b\n"


def test_printer_redraws_one_line_on_a_tty() -> None:
    out = io.StringIO()
    p = ProgressPrinter(out, tty=True)
    p.progress("a")
    p.progress("b")
    p.change("job x: READY → RUNNING")
    p.progress("c")
    p.close()
    clear = "\r\x1b[2K"
    assert out.getvalue() == f"a{clear}b{clear}job x: READY → RUNNING\nc\n"
