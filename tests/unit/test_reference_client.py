"""The reference client (``fenceline submit``) backs off with full jitter and honours
``Retry-After`` (delta-seconds and HTTP-date) on 429 and 503 (issue 46, item 7).

The intake here is a real HTTP server on loopback (a thread speaking HTTP/1.1)
that answers from a script and records when each request arrived; the client is
the real command, run as a process.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from cluster.cli.polling import Backoff

JOB = str(uuid.uuid4())


class ScriptedIntake(ThreadingHTTPServer):
    """Answers POSTs and GETs from two scripts; records (wall time, method, status)."""

    def __init__(self, posts: list[Any], gets: list[Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.posts, self.gets = posts, gets
        self.log: list[tuple[float, str, int]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def times(self, method: str) -> list[float]:
        return [t for t, m, _ in self.log if m == method]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedIntake

    def log_message(self, *_: Any) -> None:
        pass

    def _answer(self, script: list[Any], method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        with self.server.lock:
            now = time.time()
            step = script.pop(0) if len(script) > 1 else script[0]
            status, headers, body = step(now) if callable(step) else step
            self.server.log.append((now, method, status))
        data = json.dumps(body).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self._answer(self.server.posts, "POST")

    def do_GET(self) -> None:
        self._answer(self.server.gets, "GET")


@contextmanager
def intake(posts: list[Any], gets: list[Any]) -> Iterator[ScriptedIntake]:
    server = ScriptedIntake(posts, gets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def submit(url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    doc = tmp_path / "invoice.txt"
    doc.write_text("INVOICE 1 total 10.00 EUR", encoding="utf-8")
    return subprocess.run(
        [
            *(sys.executable, "-m", "cluster.cli", "submit", str(doc)),
            *("--url", url, "--api-key", "flk_test", *extra),
        ],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def state(name: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    return 200, {}, {"job_id": JOB, "state": name}


ACCEPTED = (202, {}, {"job_id": JOB})


def test_backoff_is_full_jitter_under_a_capped_exponential_ceiling() -> None:
    b = Backoff(base_seconds=0.5, cap_seconds=4.0, rng=random.Random(46))
    assert [b.ceiling(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    for n in range(8):
        draws = [b.delay(n) for _ in range(400)]
        assert all(0.0 <= d <= b.ceiling(n) for d in draws)
        # Spread over the whole range, not a fixed interval with a little noise.
        assert min(draws) < 0.1 * b.ceiling(n) and max(draws) > 0.9 * b.ceiling(n)
    assert b.ceiling(10_000) == 4.0


def test_submit_waits_out_retry_after_in_seconds_and_as_an_http_date(tmp_path: Path) -> None:
    date_at: list[float] = []

    def unavailable_until_date(now: float) -> tuple[int, dict[str, str], dict[str, Any]]:
        when = int(now) + 3  # whole seconds: between 2 and 3 s from now
        date_at.append(when)
        return 503, {"Retry-After": formatdate(when, usegmt=True)}, {"title": "busy"}

    posts = [(429, {"Retry-After": "2"}, {"title": "quota"}), unavailable_until_date, ACCEPTED]
    gets = [(429, {"Retry-After": "1"}, {"title": "quota"}), state("SUCCEEDED")]
    with intake(posts, gets) as server:
        done = submit(server.url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"SUCCEEDED        {JOB}" in done.stdout
    p = server.times("POST")
    assert [s for _, m, s in server.log if m == "POST"] == [429, 503, 202]
    assert p[1] - p[0] >= 2.0  # Retry-After: 2
    assert p[2] >= date_at[0] - 0.01  # Retry-After: <HTTP-date>, never sooner
    g = server.times("GET")
    assert [s for _, m, s in server.log if m == "GET"] == [429, 200]
    assert g[1] - g[0] >= 1.0  # Retry-After: 1 on a poll


def test_a_503_without_retry_after_backs_off_and_a_long_hint_is_reported(
    tmp_path: Path,
) -> None:
    posts = [(503, {}, {"title": "busy"}), (503, {}, {"title": "busy"}), ACCEPTED]
    with intake(posts, [state("SUCCEEDED")]) as server:
        done = submit(server.url, tmp_path, "--poll-base", "0.2", "--poll-cap", "0.4")
    assert done.returncode == 0, done.stderr
    assert [s for _, m, s in server.log if m == "POST"] == [503, 503, 202]

    far = [(429, {"Retry-After": "3600"}, {"title": "quota"}), ACCEPTED]
    with intake(far, [state("SUCCEEDED")]) as server:
        started = time.monotonic()
        done = submit(server.url, tmp_path, "--max-retry-after", "60")
        took = time.monotonic() - started
    # Not retried sooner than told, and not waited for an hour: reported.
    assert [s for _, m, s in server.log if m == "POST"] == [429]
    assert "429" in done.stderr and took < 60


def test_polling_backs_off_with_jitter_instead_of_every_second(tmp_path: Path) -> None:
    running = [state("RUNNING")] * 12
    with intake([ACCEPTED], [*running, state("SUCCEEDED")]) as server:
        done = submit(server.url, tmp_path, "--poll-base", "0.05", "--poll-cap", "0.4")
    assert done.returncode == 0, done.stderr
    g = server.times("GET")
    assert len(g) == 13
    gaps = [b - a for a, b in pairwise(g)]
    # Each wait is under its ceiling (plus the time a request takes)...
    assert max(gaps) < 0.4 + 0.6
    # ...so twelve unchanged rounds take far less than twelve one-second sleeps,
    assert g[-1] - g[0] < 6.0
    # ...and they are jittered, not a fixed interval.
    assert max(gaps) - min(gaps) > 0.05


@pytest.mark.parametrize("base,cap", [(0.0, 1.0), (2.0, 1.0)])
def test_backoff_refuses_a_base_outside_the_cap(base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base_seconds=base, cap_seconds=cap)
