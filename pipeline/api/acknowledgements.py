"""ERP acknowledgements over HTTP: ``POST /v1/deliveries/{delivery_id}/acknowledgement``.

The HTTP face of :class:`pipeline.delivery.AcknowledgementInbox`, an ``APIRouter`` that
:func:`pipeline.api.app.create_app` includes. Invariants:

* **No API key**: the caller is the tenant's ERP, authenticated by a Standard
  Webhooks signature made with the endpoint's signing secret (the one that signs
  the deliveries it receives), within the replay window. The tenant is the
  delivery's; nothing in the body chooses it.
* **No oracle**: an unknown delivery id is answered exactly like a bad signature
  (401 ``no_matching_signature``).
* **Idempotent**: the same message (``webhook-id``) again is answered as the first
  time; the answers are in :mod:`pipeline.delivery.acknowledgements`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from pipeline.api.context import ApiContext
from pipeline.api.problems import ApiProblem, problem_responses
from pipeline.delivery import (
    EVENT_ACKNOWLEDGEMENT,
    MAX_ACK_BODY_BYTES,
    AckMetrics,
    AcknowledgementInbox,
    SecretBox,
)
from pipeline.errors import AcknowledgementRefused

router = APIRouter(tags=["deliveries"])


class AcknowledgementOut(BaseModel):
    """What the delivery's acknowledgement is now, and what this message did."""

    delivery_id: uuid.UUID
    outcome: Literal["accepted", "rejected", "duplicate"] = Field(
        description="The recorded outcome: the first acknowledgement's."
    )
    reason: str | None
    acknowledged_at: datetime
    late: bool = Field(description="It came after the window (the delivery was overdue).")
    effect: Literal["recorded", "repeated"] = Field(
        description="`recorded`: this message settled the delivery; `repeated`: another "
        "message had recorded the same outcome (a repeat changes nothing)."
    )


def inbox(request: Request) -> AcknowledgementInbox:
    """The app's inbox, rebuilt only when the app's pool changes."""
    ctx: ApiContext = request.app.state.fenceline
    pool = ctx.services.pool
    cached: AcknowledgementInbox | None = getattr(request.app.state, "ack_inbox", None)
    if cached is None or cached.pool is not pool:
        # Counted on the app's own registry (its /metrics), once per app.
        metrics: AckMetrics | None = getattr(request.app.state, "ack_metrics", None)
        if metrics is None:
            metrics = request.app.state.ack_metrics = AckMetrics(ctx.metrics.registry)
        cached = AcknowledgementInbox(
            pool,
            SecretBox.from_settings(ctx.settings),
            clock=ctx.clock,
            tolerance_seconds=ctx.settings.delivery_ack_tolerance_seconds,
            metrics=metrics,
        )
        request.app.state.ack_inbox = cached
    return cached


@router.post(
    "/v1/deliveries/{delivery_id}/acknowledgement",
    summary="The ERP's signed acknowledgement of a delivery: accepted, rejected or duplicate",
    response_model=AcknowledgementOut,
    responses=problem_responses(400, 401, 409, 413, 422, 503),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["type", "data"],
                        "properties": {
                            "type": {"const": EVENT_ACKNOWLEDGEMENT},
                            "timestamp": {"type": "string"},
                            "data": {
                                "type": "object",
                                "required": ["delivery_id", "outcome"],
                                "properties": {
                                    "delivery_id": {"type": "string", "format": "uuid"},
                                    "outcome": {"enum": ["accepted", "rejected", "duplicate"]},
                                    "reason": {"type": "string", "maxLength": 1000},
                                },
                            },
                        },
                    }
                }
            },
            "description": "Signed with the endpoint's secret (Standard Webhooks headers "
            f"`webhook-id`, `webhook-timestamp`, `webhook-signature`); at most "
            f"{MAX_ACK_BODY_BYTES} bytes. See docs/delivery.md, Acknowledgements.",
        }
    },
)
async def acknowledge_delivery(request: Request, delivery_id: uuid.UUID) -> AcknowledgementOut:
    body = await request.body()
    try:
        receipt = await inbox(request).receive(delivery_id, request.headers, body)
    except AcknowledgementRefused as exc:
        raise ApiProblem(exc.status, str(exc), reason=exc.reason) from None
    return AcknowledgementOut(
        delivery_id=receipt.delivery_id,
        outcome=receipt.outcome,
        reason=receipt.reason,
        acknowledged_at=receipt.acknowledged_at,
        late=receipt.late,
        effect=receipt.effect,
    )
