"""Editing a stored result by a reviewer's values: header fields and rows, each
changed value grounded again where the document prints it.

Pure functions over the result's JSON form; :mod:`pipeline.api.corrections` runs them
inside its locked, audited transaction and validates what they produce.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import BaseModel, ValidationError

from pipeline.api.problems import ApiProblem
from pipeline.extraction import ROW_FIELDS, ground_correction, ground_row_correction, row_field
from pipeline.invoice import Evidence, LineItem, Reason, ReasonCode, TaxLine


class FieldChange(BaseModel):
    field: str
    before: str | None
    after: str | None
    grounded: bool


def scalar_value(result: dict[str, Any], path: str) -> str | None:
    """The stored value of header field ``path`` (``supplier.name``, ``gross_total``)."""
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        value = node.get("value")
        return None if value is None else str(value)
    return None


def evidenced(path: str, value: str, old: dict[str, Any] | None, ocr_text: str) -> Any:
    """``value`` with the span where the document prints it, or the old span (or an
    empty one) when it is printed nowhere; the second item says which."""
    found = ground_correction(ocr_text, path, value)
    if found is not None:
        return found.model_dump(mode="json"), True
    evidence = (
        old.get("evidence")
        if isinstance(old, dict) and isinstance(old.get("evidence"), dict)
        else Evidence(page=1, start=0, end=0, quote="").model_dump(mode="json")
    )
    return {"value": value, "evidence": evidence}, False


def with_node(result: dict[str, Any], path: str, node: dict[str, Any] | None) -> None:
    parts = path.split(".")
    target = result
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = node


def apply_rows(
    result: dict[str, Any], values: dict[str, str], ocr_text: str
) -> tuple[list[FieldChange], list[Reason]]:
    """Apply row corrections to ``result`` in place, each changed row grounded again.

    Raises:
        ApiProblem: 422 for a row the result does not have or a row value the
            contract does not accept.
    """
    edits: dict[tuple[str, int], dict[str, str]] = {}
    for path, value in values.items():
        named = row_field(path)
        if named is not None:
            group, index, name = named
            edits.setdefault((group, index), {})[name] = value.strip()
    changes: list[FieldChange] = []
    refused: list[Reason] = []
    for (group, index), fields in sorted(edits.items()):
        rows = result.get(group)
        if not isinstance(rows, list) or index >= len(rows) or not isinstance(rows[index], dict):
            raise ApiProblem(422, f"the result has no {group}[{index}]", reason="field")
        old = rows[index]
        new = {**old, **{k: v for k, v in fields.items() if not same_value(old.get(k), v)}}
        changed = [k for k in ROW_FIELDS[group] if new.get(k) != old.get(k)]
        if not changed:
            continue
        row = parsed_row(group, index, new)
        evidence = ground_row_correction(ocr_text, row, parsed_evidence(old.get("evidence")))
        path = f"{group}[{index}]"
        if evidence is not None:
            new["evidence"] = evidence.model_dump(mode="json")
        else:
            refused.append(
                Reason(
                    ReasonCode.UNGROUNDED_VALUE,
                    path,
                    "the corrected row is printed on no row of the document",
                    rule="correction.row_not_printed",
                )
            )
        rows[index] = new
        changes += [
            FieldChange(
                field=f"{path}.{k}",
                before=None if old.get(k) is None else str(old.get(k)),
                after=str(new[k]),
                grounded=evidence is not None,
            )
            for k in changed
        ]
    return changes, refused


def same_value(before: Any, after: str) -> bool:
    """Whether a typed row value equals the stored one (``2`` and ``2.00`` are equal
    quantities; a description compares as text)."""
    if before is None:
        return False
    try:
        return Decimal(str(before)) == Decimal(after)
    except InvalidOperation:
        return str(before).strip() == after


def parsed_row(group: str, index: int, row: dict[str, Any]) -> LineItem | TaxLine:
    model: type[LineItem] | type[TaxLine] = LineItem if group == "line_items" else TaxLine
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise ApiProblem(
            422,
            f"a corrected value of {group}[{index}] is not in canonical form: "
            + "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
            ),
            reason="invalid_value",
        ) from None


def parsed_evidence(evidence: Any) -> Evidence | None:
    try:
        return Evidence.model_validate(evidence)
    except ValidationError:
        return None


def node_at(result: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None
