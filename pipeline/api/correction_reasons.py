"""Which of a job's reasons a reviewer's correction resolves, and which stay with it.

A correction validates the corrected result again (:func:`pipeline.validation.validate`),
so only validation's own reasons are recomputed; every other stage's reasons were found
once, by reading the document, and no correction reads it again. The rule
(docs/console.md "What a correction resolves"), by the rule id each reason names:

* **Recomputed** (``validation.*``, and a reason stored before rules had ids whose code is
  not one of :data:`KEPT_CODES`): the stored one goes; the new report gives it again
  where it still holds. A text job whose reasons all come from validation is decided by
  the new report alone, as before.
* **Resolved by correcting its value** (grounding's ``grounding.*``, ``label.*``,
  ``terms.*``, ``items.*``, ``roles.*``, ``tax_lines.*``, a former correction's
  ``correction.*``, OCR's ``documents.*`` on a value; rule-less ``ungrounded_value``,
  ``ambiguous_role``, ``ocr_unverified``): such a reason says one value was not proven
  where it is printed; a correction of that value (its path, or any value of the row
  the reason names) is grounded again, and a corrected value printed nowhere gets its
  own ``ungrounded_value``. Uncorrected, the reason stays.
* **Kept until overridden** (everything else: the e-invoice reader's ``einvoice.*`` --
  ``einvoice_invalid``, ``einvoice_not_holdable``, ``payee_account_not_iban``,
  ``xml_text_mismatch`` -- the contract version check, OCR's reasons about the whole
  ``document``, the page's ``totals.amount_due_differs``, the job store's duplicate,
  amendment and credit-note reasons, and any rule this module does not know): they say
  what the document states or what other jobs hold, which no value typed into the
  result changes. ``xml_text_mismatch`` on a corrected field stays too: the page and the
  XML still disagree, and only the reviewer's override (with its note) says which one
  was paid. Such a reason leaves only by an override naming its code and field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.invoice import ReasonCode

#: Validation's rule ids: the reasons a correction's new report recomputes.
RECOMPUTED_RULE_PREFIX = "validation."
#: Named ``validation.*`` but not :func:`~pipeline.validation.validate`'s: the check of
#: the job's schema_version, run when the document was read.
NOT_RECOMPUTED_RULES = frozenset({"validation.contract_v3_required"})
#: Rule ids of reasons about one value's reading, which a correction of it resolves.
VALUE_RULE_PREFIXES = (
    "grounding.",
    "label.",
    "terms.",
    "items.",
    "roles.",
    "tax_lines.",
    "correction.",
    "documents.",
)
#: The field of a reason about the whole document (OCR kept no words...).
DOCUMENT_FIELD = "document"
#: Rule-less codes about one value's reading (stored before rules had ids).
VALUE_CODES = frozenset(
    {
        ReasonCode.UNGROUNDED_VALUE.value,
        ReasonCode.AMBIGUOUS_ROLE.value,
        ReasonCode.OCR_UNVERIFIED.value,
    }
)
#: Rule-less codes no correction recomputes: the reader's, the contract check's, the
#: job store's (duplicates, amendments and credit notes carry no rule id).
KEPT_CODES = frozenset(
    {
        ReasonCode.EINVOICE_NOT_HOLDABLE.value,
        ReasonCode.EINVOICE_INVALID.value,
        ReasonCode.XML_TEXT_MISMATCH.value,
        ReasonCode.CONTRACT_V3_REQUIRED.value,
        ReasonCode.AMOUNT_DUE_DIFFERS.value,
        ReasonCode.DUPLICATE_INVOICE.value,
        ReasonCode.POSSIBLE_DUPLICATE.value,
        ReasonCode.CREDIT_NOTE_REFERENCE_UNKNOWN.value,
        ReasonCode.CREDIT_NOTE_REFERENCE_AMBIGUOUS.value,
        "possible_amendment",
    }
)


def recomputed(reason: Mapping[str, Any]) -> bool:
    """Whether the correction's new validation report stands in for ``reason``."""
    rule = reason.get("rule")
    if not isinstance(rule, str) or not rule:
        code = str(reason.get("code", ""))
        return code not in VALUE_CODES and code not in KEPT_CODES
    return rule.startswith(RECOMPUTED_RULE_PREFIX) and rule not in NOT_RECOMPUTED_RULES


def value_level(reason: Mapping[str, Any]) -> bool:
    """Whether ``reason`` is about one value's reading, so that correcting it resolves it."""
    if str(reason.get("field", "")) in ("", DOCUMENT_FIELD):
        return False
    rule = reason.get("rule")
    if not isinstance(rule, str) or not rule:
        return str(reason.get("code", "")) in VALUE_CODES
    return rule.startswith(VALUE_RULE_PREFIXES)


def _corrected(field: str, changed: frozenset[str]) -> bool:
    """``field`` was corrected: named itself, or a row any of whose values was."""
    return field in changed or any(path.startswith(field + ".") for path in changed)


def kept_reasons(
    before: Iterable[Mapping[str, Any]], changed: Iterable[str]
) -> list[dict[str, Any]]:
    """The stored reasons a correction of the paths ``changed`` leaves with the job (see
    the module docstring), in their stored order and shape."""
    paths = frozenset(changed)
    kept: list[dict[str, Any]] = []
    for reason in before:
        if recomputed(reason):
            continue
        if value_level(reason) and _corrected(str(reason.get("field", "")), paths):
            continue
        kept.append(dict(reason))
    return kept


def merged(*groups: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reasons of ``groups`` in order, each (code, field, rule) once."""
    seen: set[tuple[str, str, str]] = set()
    out: list[dict[str, Any]] = []
    for group in groups:
        for reason in group:
            key = (
                str(reason.get("code", "")),
                str(reason.get("field", "")),
                str(reason.get("rule", "")),
            )
            if key not in seen:
                seen.add(key)
                out.append(reason)
    return out
