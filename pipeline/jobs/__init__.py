"""The job store (the only writer of job rows), its records, the reaper, operator explain.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.jobs.acceptance import replay_of, request_hash_of
from pipeline.jobs.admin import DatabaseSetup, admin_dsn, explain_job, setup_database
from pipeline.jobs.cancellation import (
    CancelFilter,
    Cancelled,
    CancelReport,
    CancelRequest,
    cancel_job,
    cancel_matching,
    cancellations_for_job,
)
from pipeline.jobs.erasure import (
    ErasableStore,
    Erased,
    EraseReport,
    EraseRequest,
    erase_job,
    erase_tenant,
    erasures_for_job,
)
from pipeline.jobs.explain import SECTIONS, render_explain
from pipeline.jobs.explain_result import evidenced_fields, read_from_xml
from pipeline.jobs.group_commit import GroupCommit
from pipeline.jobs.reaper import Reaper
from pipeline.jobs.records import (
    EVENT_CANCELLED,
    EVENT_COMPLETED,
    EVENT_DEAD_LETTERED,
    EVENT_FAILED,
    EVENT_REQUESTED,
    Accepted,
    AcceptRequest,
    AdmissionCheck,
    BatchSettled,
    BatchSettleHook,
    DocumentIn,
    Lease,
    ObjectReference,
    Settled,
    SettleHook,
    SettleHooks,
    Success,
    accepted_from_row,
    settled_from_row,
)
from pipeline.jobs.redrive import (
    RedriveFilter,
    Redriven,
    RedriveReport,
    RedriveRequest,
    redrive_job,
    redrive_matching,
    redrives_for_job,
)
from pipeline.jobs.slis import JobMetrics, default_job_metrics
from pipeline.jobs.store import JobStore

__all__ = [
    "EVENT_CANCELLED",
    "EVENT_COMPLETED",
    "EVENT_DEAD_LETTERED",
    "EVENT_FAILED",
    "EVENT_REQUESTED",
    "SECTIONS",
    "AcceptRequest",
    "Accepted",
    "AdmissionCheck",
    "BatchSettleHook",
    "BatchSettled",
    "CancelFilter",
    "CancelReport",
    "CancelRequest",
    "Cancelled",
    "DatabaseSetup",
    "DocumentIn",
    "ErasableStore",
    "EraseReport",
    "EraseRequest",
    "Erased",
    "GroupCommit",
    "JobMetrics",
    "JobStore",
    "Lease",
    "ObjectReference",
    "Reaper",
    "RedriveFilter",
    "RedriveReport",
    "RedriveRequest",
    "Redriven",
    "SettleHook",
    "SettleHooks",
    "Settled",
    "Success",
    "accepted_from_row",
    "admin_dsn",
    "cancel_job",
    "cancel_matching",
    "cancellations_for_job",
    "default_job_metrics",
    "erase_job",
    "erase_tenant",
    "erasures_for_job",
    "evidenced_fields",
    "explain_job",
    "read_from_xml",
    "redrive_job",
    "redrive_matching",
    "redrives_for_job",
    "render_explain",
    "replay_of",
    "request_hash_of",
    "settled_from_row",
    "setup_database",
]
