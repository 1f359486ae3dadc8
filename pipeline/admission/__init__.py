"""Admission: one typed seam (the request, the gate protocol, the one waiting
loop), the policy (one atomic grant of request, tokens and permit per
scope), its limits, grants and their settlement, and the ledger that persists them.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.admission.gate import (
    AdmissionGate,
    AdmissionRequest,
    GateUsage,
    acquire_within,
    counted_usage,
)
from pipeline.admission.grants import (
    Grant,
    PriorityClass,
    Reconciliation,
    UnknownGrant,
    Wait,
    WaitReason,
    priority_class_for,
    reconcile,
)
from pipeline.admission.ledger import AdmissionLedger
from pipeline.admission.limits import (
    AdmissionConfig,
    attempt_capacity,
    drain_seconds,
    job_capacity,
    littles_law_concurrency,
)
from pipeline.admission.local_gate import LocalGate
from pipeline.admission.metrics import AdmissionUsageCollector, admission_registry
from pipeline.admission.policy import AdmissionPolicy
from pipeline.usage import ReportedUsage

__all__ = [
    "AdmissionConfig",
    "AdmissionGate",
    "AdmissionLedger",
    "AdmissionPolicy",
    "AdmissionRequest",
    "AdmissionUsageCollector",
    "GateUsage",
    "Grant",
    "LocalGate",
    "PriorityClass",
    "Reconciliation",
    "ReportedUsage",
    "UnknownGrant",
    "Wait",
    "WaitReason",
    "acquire_within",
    "admission_registry",
    "attempt_capacity",
    "counted_usage",
    "drain_seconds",
    "job_capacity",
    "littles_law_concurrency",
    "priority_class_for",
    "reconcile",
]
