"""The review page's view of a result read from an e-invoice's XML (issue 44).

Such a result's evidence is no span of the page: each value's quote is the XML path it
was read from (``/rsm:CrossIndustryInvoice/.../ram:GrandTotalAmount``), with ``start``
and ``end`` 0, so nothing is marked on the page and no box drawn on its image. The
review page shows them as a table instead, field → value → XML path, each row carrying
the field's evidence anchor so that the values table's evidence link leads to it. The
page itself (a Factur-X PDF's image and text) is shown as for any file, and the XML's
own reasons (``einvoice_invalid`` with the schema validator's messages,
``einvoice_not_holdable``, ``xml_text_mismatch`` naming what the page does not print,
``contract_v3_required`` naming the v3 values a v1 job's contract has no place for) are
listed beside the paths.
"""

from __future__ import annotations

from typing import Any

from pipeline.api.evidence_marks import anchor_id
from pipeline.jobs import evidenced_fields, read_from_xml

#: The reasons an e-invoice's XML itself gives (beside validation's), and
#: ``contract_v3_required``: the XML states what the job's contract has no place for.
XML_REASONS = frozenset(
    {"einvoice_invalid", "einvoice_not_holdable", "xml_text_mismatch", "contract_v3_required"}
)


def xml_evidence(
    result: dict[str, Any] | None, validation: dict[str, Any], has_page: bool
) -> dict[str, Any] | None:
    """The XML view of a stored result, ``None`` unless it was read from XML.

    ``has_page``: the job's document is a file with pages (a PDF that embeds the XML),
    not the XML alone, whose text is the XML itself.
    """
    if not result or not read_from_xml(result):
        return None
    fields = [
        {
            "field": field,
            "anchor": anchor_id(field),
            "value": "" if value is None else str(value),
            "path": str(evidence.get("quote") or ""),
        }
        for field, value, evidence in evidenced_fields(result)
        if isinstance(evidence, dict)
    ]
    reasons = [
        {"code": str(r.get("code")), "field": str(r.get("field")), "detail": str(r.get("detail"))}
        for r in validation.get("reasons") or []
        if isinstance(r, dict) and r.get("code") in XML_REASONS
    ]
    return {"fields": fields, "reasons": reasons, "has_page": has_page}
