"""Per-process start of tracing and structured logs for Ray actors and Serve replicas.

Each process that works on jobs (intake replica, task driver, delivery and
maintenance actors) exports its own spans (``Settings.otlp_endpoint``) and, inside
a Ray actor, writes JSON log lines with the job ids (``Settings.log_format``).
Outside an actor (a test running a driver in-process, a CLI) the caller's logging
is left alone. Lives in ``deployments/`` because the intake replica needs it and
``deployments`` never imports ``cluster``.
"""

from __future__ import annotations

import logging

from pipeline.logs import configure_logging
from pipeline.settings import Settings
from pipeline.tracing import configure_tracing

log = logging.getLogger(__name__)


def in_ray_actor() -> bool:
    """Whether this process is a Ray actor (or Serve replica)."""
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    return bool(ray.is_initialized() and ray.get_runtime_context().get_actor_id())


def start_observability(settings: Settings, service: str) -> None:
    """Spans over OTLP when configured; JSON logs when this is a Ray actor."""
    if in_ray_actor():
        configure_logging(settings.log_format)
    configure_tracing(settings, service)
