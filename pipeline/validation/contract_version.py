"""Contract version rule: a v1 job never gets a result it would misread as a v1 result.

A job asks for a contract by its ``schema_version``; only an e-invoice reader writes
contract v3's values, and some of them change what is payable or who is paid (an amount
due other than the gross total, allowances and charges, a credit note, a supplier known
by its tax number alone: :func:`pipeline.invoice.binding_v3_fields`). A v1 client reads
none of them, so such a result of a v1 job goes to review with ``contract_v3_required``
naming each one, never delivered as a v1 result. A v3 job's result holds them as read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.invoice import SCHEMA_V3, Extraction, Reason, ReasonCode, binding_v3_fields


def contract_version_reasons(extraction: Extraction, schema_version: int) -> tuple[Reason, ...]:
    """One ``contract_v3_required`` per binding v3 value of ``extraction`` when the job
    asked for a ``schema_version`` below 3; none for a v3 job."""
    if schema_version >= SCHEMA_V3:
        return ()
    return tuple(
        Reason(
            ReasonCode.CONTRACT_V3_REQUIRED,
            path,
            f"the job asked for schema_version {schema_version}, which has no place for "
            f"{path}: it changes what is payable or who is paid (ask for schema_version "
            f"{SCHEMA_V3})",
            rule="validation.contract_v3_required",
        )
        for path in binding_v3_fields(extraction)
    )


def needs_contract_v3(validation: Mapping[str, Any]) -> bool:
    """Whether a stored validation report holds ``contract_v3_required``: its result
    may be rejected, never corrected or approved into a v1 delivery (the review SQL
    refuses such an approval too)."""
    return any(
        r.get("code") == ReasonCode.CONTRACT_V3_REQUIRED.value
        for r in validation.get("reasons") or ()
    )
