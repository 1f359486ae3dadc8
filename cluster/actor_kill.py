"""Ending a supervised actor for good: the one way the supervisor and the driver
fleet take an actor down (no restart, an actor already gone is no error)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def kill_actor(handle: Any) -> None:
    """``ray.kill(handle, no_restart=True)``; an actor already gone is only logged."""
    import ray

    try:
        ray.kill(handle, no_restart=True)
    except Exception as exc:  # already gone
        log.debug("kill failed: %r", exc)
