"""Instruments that prove no outbound request was made.

:class:`Listener` is a real TCP server on 127.0.0.1 that only counts the
connections it accepts: its URL is what injected text asks a model to fetch.
:func:`outbound` records, through an audit hook (PEP 578), every socket, HTTP
and subprocess event raised in this process while its block runs, wherever it
would have gone. Both are used by the unit prompt-injection tests and by the
driver-level one in ``tests/integration/test_worker.py``.
"""

from __future__ import annotations

import select
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_WATCHED = (
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "urllib.Request",
    "http.client.connect",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "webbrowser.open",
)
_recording: list[tuple[str, Any]] | None = None


def _audit(event: str, args: Any) -> None:
    if _recording is not None and event.startswith(_WATCHED):
        _recording.append((event, args))


sys.addaudithook(_audit)  # audit hooks cannot be removed; it only records inside `outbound()`


@contextmanager
def outbound() -> Iterator[list[tuple[str, Any]]]:
    """Collect network and process events raised inside the block."""
    global _recording
    events: list[tuple[str, Any]] = []
    _recording = events
    try:
        yield events
    finally:
        _recording = None


def connects_to(events: list[tuple[str, Any]], port: int) -> list[tuple[str, Any]]:
    """The ``socket.connect`` events among ``events`` aimed at loopback ``port``."""
    return [
        (event, args)
        for event, args in events
        if event == "socket.connect"
        and isinstance(args[1], tuple)
        and len(args[1]) >= 2
        and args[1][1] == port
    ]


class Listener:
    """A loopback TCP server that only counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.count = 0

    @property
    def port(self) -> int:
        port: int = self.sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/collect"

    def accepted(self) -> int:
        while select.select([self.sock], [], [], 0.2)[0]:
            conn, _ = self.sock.accept()
            conn.close()
            self.count += 1
        return self.count

    def close(self) -> None:
        self.sock.close()
