"""How long an attempt's engine call may take, and which bound decides it.

The attempt timeout, bounded by the job's deadline (less a commit margin) and, only
when heartbeats cannot renew it in time, by the lease — the lease as its heartbeats
last renewed it. A :class:`~pipeline.jobs.Lease` is frozen at the claim: bounding a
call by that first ``lease_until`` after a long admission wait gave it a one-second
timeout (seen in a chaos run on vLLM CPU), so the renewals are kept here.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from pipeline.jobs import Lease
from pipeline.worker.contracts import WorkerConfig


class CallBounds:
    """Timeouts for the calls of one driver's running attempts."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self._renewed: dict[tuple[uuid.UUID, int], datetime] = {}

    def renewed(self, lease: Lease, until: datetime) -> None:
        """A heartbeat extended ``lease`` to ``until``."""
        self._renewed[(lease.job_id, lease.fence)] = until

    def forget(self, lease: Lease) -> None:
        """The attempt under ``lease`` ended."""
        self._renewed.pop((lease.job_id, lease.fence), None)

    def time_left(self, lease: Lease) -> float:
        """Seconds the engine call may take (see the module docstring)."""
        return self.bound(lease)[0]

    def bound(self, lease: Lease) -> tuple[float, str]:
        """:meth:`time_left` and which bound sets it (``attempt``, ``deadline``,
        ``lease``): the timeout that fires first if the engine does not answer."""
        cfg = self.config
        now = datetime.now(UTC)
        to_deadline = (lease.deadline_at - now).total_seconds() - cfg.commit_margin_seconds
        until = self._renewed.get((lease.job_id, lease.fence), lease.lease_until)
        lease_left = (until - now).total_seconds()
        to_lease = (
            lease_left - cfg.commit_margin_seconds
            if cfg.heartbeat_seconds >= lease_left
            else float("inf")
        )
        return min(
            (cfg.attempt_timeout_seconds, "attempt"),
            (to_deadline, "deadline"),
            (to_lease, "lease"),
        )
