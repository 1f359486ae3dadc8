"""The reference ERP receiver's fault switch: the failures it can simulate.

Modes (``benchmarks.erp_receiver``, ``--fault`` or ``POST /_fault``): ``down`` 503
(with ``retry_after``), ``status`` any ``status``, ``redirect`` 302 to ``location``,
``drop_after_commit`` commit then close the connection mid-response,
``hang_after_commit`` commit then sleep ``hang_seconds``, ``status_after_commit``
commit then answer ``status``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

FAULT_MODES = (
    "none", "down", "status", "redirect", "drop_after_commit", "hang_after_commit",
    "status_after_commit",
)  # fmt: skip


@dataclass
class FaultSwitch:
    """A simulated ERP failure; ``remaining`` faults are served, then it heals (None: never).

    Modes: ``down`` 503 (with ``retry_after``), ``status`` any ``status``,
    ``redirect`` 302 to ``location``, ``drop_after_commit`` commit then close the
    connection mid-response, ``hang_after_commit`` commit then sleep ``hang_seconds``,
    ``status_after_commit`` commit then answer ``status`` (an acknowledgement lost
    behind a failing proxy: the sender must retry under the same delivery id).
    """

    mode: str = "none"
    remaining: int | None = None
    status: int = 503
    retry_after: str | None = None
    location: str = "http://169.254.169.254/latest/meta-data/"
    hang_seconds: float = 30.0

    def set(self, mode: str, **kw: Any) -> None:
        if mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}")
        self.mode = mode
        self.remaining = kw.pop("remaining", None)
        for k, v in kw.items():
            if not hasattr(self, k):
                raise ValueError(f"unknown fault field {k!r}")
            setattr(self, k, v)

    def take(self) -> str:
        """The fault to serve for this request (consuming one of ``remaining``)."""
        if self.mode == "none":
            return "none"
        mode = self.mode
        if self.remaining is not None:
            self.remaining -= 1
            if self.remaining <= 0:
                self.mode, self.remaining = "none", None
        return mode


class _ConnectionDropped(Exception):
    """Raised after the response started, so the server closes the connection."""


class _DropAfterHeaders(Response):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: ARG002
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]}
        )
        raise _ConnectionDropped("fault: connection dropped after the inbox commit")


def drop_after_headers() -> Response:
    """A response that sends its headers, then drops the connection."""
    return _DropAfterHeaders()
