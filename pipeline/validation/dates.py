"""Date rule: issue and due dates plausible against ``today`` and the payment term.

Printed dates are read by :func:`pipeline.invoice.date_readings`; this module only
judges the extracted dates against the policy.
"""

from __future__ import annotations

from datetime import date, timedelta

from pipeline.invoice import Extraction, Reason, ReasonCode
from pipeline.validation.policy import DEFAULT_POLICY, ValidationPolicy


def check_dates(
    extraction: Extraction, today: date, policy: ValidationPolicy = DEFAULT_POLICY
) -> list[Reason]:
    """Issue date within [today - max age, today + max future]; due date within the term."""
    reasons = []
    issue = extraction.issue_date.value if extraction.issue_date else None
    due = extraction.due_date.value if extraction.due_date else None
    if issue is not None:
        if issue > today + timedelta(days=policy.max_future_days):
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "issue_date",
                    f"{issue} is after {today}",
                    rule="validation.issue_date_future",
                )
            )
        elif issue < today - timedelta(days=policy.max_invoice_age_days):
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "issue_date",
                    f"{issue} is more than {policy.max_invoice_age_days} days before {today}",
                    rule="validation.issue_date_old",
                )
            )
    if issue is not None and due is not None:
        if due < issue:
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "due_date",
                    f"{due} is before issue date {issue}",
                    rule="validation.due_before_issue",
                )
            )
        elif (due - issue).days > policy.max_payment_term_days:
            reasons.append(
                Reason(
                    ReasonCode.DATE_IMPLAUSIBLE,
                    "due_date",
                    f"payment term {(due - issue).days} days > {policy.max_payment_term_days}",
                    rule="validation.payment_term_long",
                )
            )
    return reasons
