"""What counts as echoing a verification challenge (issue 47, item 4)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from pipeline.delivery.egress_client import HttpOutcome
from pipeline.delivery.verification import EVENT_VERIFICATION, challenge_body, echoed

TOKEN = "tok_abc-123"


def answer(status: int | None, body: bytes = b"", error_class: str | None = None) -> HttpOutcome:
    return HttpOutcome(status, 1.0, error_class=error_class, body_excerpt=body)


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (answer(200, b'{"challenge":"tok_abc-123"}'), (True, "verified")),
        (answer(204, b'{"challenge": "tok_abc-123", "extra": 1}'), (True, "verified")),
        (answer(200, b'{"challenge":"tok_abc-124"}'), (False, "wrong_echo")),
        (answer(200, b'{"challenge":"TOK_ABC-123"}'), (False, "wrong_echo")),
        (answer(200, b'"tok_abc-123"'), (False, "wrong_echo")),
        (answer(200, b"tok_abc-123"), (False, "wrong_echo")),
        (answer(200, b'{"token":"tok_abc-123"}'), (False, "wrong_echo")),
        (answer(200, b'{"challenge":"t\\u00f6k"}'), (False, "wrong_echo")),
        (answer(200, b"\xff\xfe"), (False, "wrong_echo")),
        (answer(302, b'{"challenge":"tok_abc-123"}'), (False, "http_302")),
        (answer(500, b'{"challenge":"tok_abc-123"}'), (False, "http_500")),
        (answer(None, error_class="egress_blocked"), (False, "egress_blocked")),
        (answer(None, error_class="timeout"), (False, "timeout")),
    ],
)
def test_only_a_2xx_with_the_same_token_echoes(
    outcome: HttpOutcome, expected: tuple[bool, str]
) -> None:
    assert echoed(outcome, TOKEN) == expected


def test_the_challenge_body_carries_the_token_and_the_endpoint() -> None:
    endpoint = uuid.uuid4()
    body = json.loads(challenge_body(endpoint, TOKEN, datetime(2026, 12, 7, tzinfo=UTC)))
    assert body == {
        "type": EVENT_VERIFICATION,
        "timestamp": "2026-12-07T00:00:00+00:00",
        "data": {"endpoint_id": str(endpoint), "challenge": TOKEN},
    }
