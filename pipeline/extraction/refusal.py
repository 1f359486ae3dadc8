"""How a stage of grounding records a refusal (one signature for every stage)."""

from __future__ import annotations

from typing import Protocol

from pipeline.invoice import ReasonCode


class Refuse(Protocol):
    """How grounding records a refusal: field path, detail, reason code and the id of the
    rule that refused (:data:`pipeline.invoice.rules.RULES`)."""

    def __call__(self, path: str, detail: str, code: ReasonCode, *, rule: str) -> None: ...
