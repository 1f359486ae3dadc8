"""The validation policy: arithmetic, currency, dates, evidence and supplier rules
that decide SUCCEEDED or REVIEW_REQUIRED for one extraction (the invoice model they
check is :mod:`pipeline.invoice`).

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.validation.contract_version import contract_version_reasons, needs_contract_v3
from pipeline.validation.decide import validate
from pipeline.validation.policy import (
    DEFAULT_POLICY,
    VALIDATION_POLICY_VERSION,
    Decision,
    ValidationPolicy,
    ValidationReport,
    ValueProof,
    policy_for,
    unvalidated_outcome,
)

__all__ = [
    "DEFAULT_POLICY",
    "VALIDATION_POLICY_VERSION",
    "Decision",
    "ValidationPolicy",
    "ValidationReport",
    "ValueProof",
    "contract_version_reasons",
    "needs_contract_v3",
    "policy_for",
    "unvalidated_outcome",
    "validate",
]
