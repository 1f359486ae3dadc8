"""Standard Webhooks signing and verification vectors (no network, no database)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.delivery import VerificationKey, Verifier
from pipeline.delivery.signing import (
    Verification,
    decode_secret,
    generate_secret,
    sign,
    signed_content,
    webhook_headers,
)

NOW = 1_800_000_000
BODY = json.dumps(
    {"type": "extraction.completed.v1", "data": {"job_id": "j1", "total": "1210.00"}},
    separators=(", ", ": "),
).encode()


def verifier(*keys: str | VerificationKey, now: float = NOW) -> Verifier:
    return Verifier(keys, now=lambda: now)


def headers(secret: str | list[str], msg_id: str = "msg_1", ts: int = NOW, body: bytes = BODY):
    return webhook_headers([secret] if isinstance(secret, str) else secret, msg_id, ts, body)


def test_standard_webhooks_reference_vector() -> None:
    # The published example of the Standard Webhooks specification.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    got = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert signed_content("m", 5, b"{}") == b"m.5.{}"


def test_secrets_without_the_whsec_prefix_sign_and_verify_the_same() -> None:
    # As the Standard Webhooks reference libraries do: the prefix is optional.
    prefixed = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    bare = prefixed.removeprefix("whsec_")
    assert decode_secret(bare) == decode_secret(prefixed)
    got = sign(bare, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert got == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    s = generate_secret()
    assert verifier(s.removeprefix("whsec_")).verify(headers(s), BODY).ok
    assert verifier(s).verify(headers(s.removeprefix("whsec_")), BODY).ok


def test_generated_secrets_are_prefixed_base64_of_32_bytes() -> None:
    a, b = generate_secret(), generate_secret()
    assert a != b and a.startswith("whsec_")
    assert len(decode_secret(a)) == 32
    for bad in (
        "MfKQ9r8GKYqrTwjUPD8ILPZI",  # base64 of 18 bytes: too short, prefix or not
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZI",
        "whsec_***",
        "***",
        "whsec_" + base64.b64encode(b"x").decode(),
        "whsec_whsec_" + base64.b64encode(bytes(32)).decode(),
    ):
        with pytest.raises(ValueError):
            decode_secret(bad)
    with pytest.raises(ValueError):
        Verifier(["whsec_not base64"])


def flip(body: bytes, i: int) -> bytes:
    out = bytearray(body)
    out[i] ^= 0x01
    return bytes(out)


def test_vectors_accept_and_reject_exactly() -> None:
    s, other = generate_secret(), generate_secret()
    v = verifier(s)
    good = headers(s)
    sig = good["webhook-signature"]
    reserialised = json.dumps(json.loads(BODY), separators=(",", ":")).encode()
    cases: dict[str, tuple[dict[str, str], bytes, str]] = {
        "valid": (good, BODY, "ok"),
        "flipped first byte": (good, flip(BODY, 0), "no_matching_signature"),
        "flipped last byte": (good, flip(BODY, len(BODY) - 1), "no_matching_signature"),
        "re-serialised JSON": (good, reserialised, "no_matching_signature"),
        "changed id": ({**good, "webhook-id": "msg_2"}, BODY, "no_matching_signature"),
        "ts -301": (headers(s, ts=NOW - 301), BODY, "timestamp_too_old"),
        "ts +301": (headers(s, ts=NOW + 301), BODY, "timestamp_in_future"),
        "ts -300": (headers(s, ts=NOW - 300), BODY, "ok"),
        "ts +300": (headers(s, ts=NOW + 300), BODY, "ok"),
        "v1 without comma": (
            {**good, "webhook-signature": sig.replace(",", "")},
            BODY,
            "malformed_signature",
        ),
        "bad base64": ({**good, "webhook-signature": "v1,@@@@"}, BODY, "malformed_signature"),
        "short digest": ({**good, "webhook-signature": "v1,AAAA"}, BODY, "malformed_signature"),
        "only another scheme": (
            {**good, "webhook-signature": "v1a," + sig[3:]},
            BODY,
            "no_supported_signature",
        ),
        "other key": (headers(other), BODY, "no_matching_signature"),
        "both keys": (headers([other, s]), BODY, "ok"),
        "bad then good": ({**good, "webhook-signature": "v1,@@@ " + sig}, BODY, "ok"),
        "timestamp with sign": (
            {**good, "webhook-timestamp": "+" + str(NOW)},
            BODY,
            "malformed_timestamp",
        ),
        "timestamp float": ({**good, "webhook-timestamp": f"{NOW}.0"}, BODY, "malformed_timestamp"),
        "no id": ({k: v for k, v in good.items() if k != "webhook-id"}, BODY, "missing_headers"),
        "no headers": ({}, BODY, "missing_headers"),
        "id with newline": ({**good, "webhook-id": "msg\n1"}, BODY, "malformed_id"),
        "huge header": (
            {**good, "webhook-signature": sig + " " * 5000},
            BODY,
            "malformed_signature",
        ),
    }
    got = {name: v.verify(h, b).reason for name, (h, b, _) in cases.items()}
    assert got == {name: expected for name, (_, _, expected) in cases.items()}


def test_header_names_are_case_insensitive() -> None:
    s = generate_secret()
    upper = {k.upper(): v for k, v in headers(s).items()}
    assert verifier(s).verify(upper, BODY).ok


def test_rotation_both_signatures_then_old_key_after_grace() -> None:
    old, new = generate_secret(), generate_secret()
    grace_end = NOW + 3600
    keys = (VerificationKey(new, "k2"), VerificationKey(old, "k1", not_after=grace_end))
    during = verifier(*keys, now=NOW)
    after = verifier(*keys, now=grace_end + 1)
    both = headers([new, old])
    assert during.verify(both, BODY) == Verification(True, "ok", "msg_1", NOW, "k2")
    assert during.verify(headers(old), BODY).key_id == "k1"
    # After the grace period the old key alone no longer verifies; the new one does.
    late_old = headers(old, ts=grace_end + 1)
    late_both = headers([new, old], ts=grace_end + 1)
    assert after.verify(late_old, BODY).reason == "no_matching_signature"
    assert after.verify(late_both, BODY).key_id == "k2"
    # A receiver that only knows the old key rejects once the sender stops using it.
    assert not verifier(old, now=grace_end + 1).verify(headers(new, ts=grace_end + 1), BODY)


@settings(max_examples=200, deadline=None)
@given(
    headers_=st.dictionaries(
        st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature", "x"]),
        st.text(max_size=300),
    ),
    body=st.binary(max_size=300),
)
def test_arbitrary_headers_never_raise(headers_: dict[str, str], body: bytes) -> None:
    result = verifier(generate_secret()).verify(headers_, body)
    assert result.ok is False and result.reason
