"""The job store (the only writer of job rows), its records, admission (tenant quotas
and capacity), the reaper, operator explain.

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
    Erased,
    EraseReport,
    EraseRequest,
    erasable_jobs,
    erase_job,
    erase_tenant,
    erasures_for_job,
)
from pipeline.jobs.explain import SECTIONS, render_explain
from pipeline.jobs.explain_result import evidenced_fields, read_from_xml
from pipeline.jobs.group_commit import GroupCommit
from pipeline.jobs.legal_holds import (
    RetentionPolicy,
    clear_legal_hold,
    held_jobs,
    retention_policy,
    set_legal_hold,
    set_retention_policy,
)
from pipeline.jobs.object_removal import ErasableStore
from pipeline.jobs.quotas import ADMISSION_LOCK_NAMESPACE, Demand, TenantQuota, demand_for
from pipeline.jobs.reaper import Reaper
from pipeline.jobs.records import (
    EVENT_CANCELLED,
    EVENT_COMPLETED,
    EVENT_CREDIT_NOTE_CREATED,
    EVENT_DEAD_LETTERED,
    EVENT_FAILED,
    EVENT_REQUESTED,
    EVENT_SUPERSEDED,
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
from pipeline.jobs.retention import (
    RetentionBatchMismatch,
    RetentionConfig,
    RetentionPass,
    RetentionReport,
    retention_due,
    run_retention,
)
from pipeline.jobs.slis import JobMetrics, default_job_metrics
from pipeline.jobs.store import JobStore
from pipeline.jobs.versions import VERSION_POLICIES, set_version_policy

__all__ = [
    "ADMISSION_LOCK_NAMESPACE",
    "EVENT_CANCELLED",
    "EVENT_COMPLETED",
    "EVENT_CREDIT_NOTE_CREATED",
    "EVENT_DEAD_LETTERED",
    "EVENT_FAILED",
    "EVENT_REQUESTED",
    "EVENT_SUPERSEDED",
    "SECTIONS",
    "VERSION_POLICIES",
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
    "Demand",
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
    "RetentionBatchMismatch",
    "RetentionConfig",
    "RetentionPass",
    "RetentionPolicy",
    "RetentionReport",
    "SettleHook",
    "SettleHooks",
    "Settled",
    "Success",
    "TenantQuota",
    "accepted_from_row",
    "admin_dsn",
    "cancel_job",
    "cancel_matching",
    "cancellations_for_job",
    "clear_legal_hold",
    "default_job_metrics",
    "demand_for",
    "erasable_jobs",
    "erase_job",
    "erase_tenant",
    "erasures_for_job",
    "evidenced_fields",
    "explain_job",
    "held_jobs",
    "read_from_xml",
    "redrive_job",
    "redrive_matching",
    "redrives_for_job",
    "render_explain",
    "replay_of",
    "request_hash_of",
    "retention_due",
    "retention_policy",
    "run_retention",
    "set_legal_hold",
    "set_retention_policy",
    "set_version_policy",
    "settled_from_row",
    "setup_database",
]
