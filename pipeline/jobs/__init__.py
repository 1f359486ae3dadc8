"""The job store (the only writer of job rows), its records, the reaper, operator explain.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.jobs.admin import admin_dsn, explain_job, render_explain, setup_database
from pipeline.jobs.group_commit import GroupCommit
from pipeline.jobs.reaper import Reaper
from pipeline.jobs.records import (
    EVENT_COMPLETED,
    EVENT_DEAD_LETTERED,
    EVENT_FAILED,
    EVENT_REQUESTED,
    Accepted,
    AcceptRequest,
    BatchSettled,
    DocumentIn,
    Lease,
    Settled,
    SettleHook,
    Success,
    settled_from_row,
)
from pipeline.jobs.slis import JobMetrics, default_job_metrics
from pipeline.jobs.store import JobStore

__all__ = [
    "EVENT_COMPLETED",
    "EVENT_DEAD_LETTERED",
    "EVENT_FAILED",
    "EVENT_REQUESTED",
    "AcceptRequest",
    "Accepted",
    "BatchSettled",
    "DocumentIn",
    "GroupCommit",
    "JobMetrics",
    "JobStore",
    "Lease",
    "Reaper",
    "SettleHook",
    "Settled",
    "Success",
    "admin_dsn",
    "default_job_metrics",
    "explain_job",
    "render_explain",
    "settled_from_row",
    "setup_database",
]
