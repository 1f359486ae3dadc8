"""Standard Webhooks signing and verification.

Wire contract (https://www.standardwebhooks.com, ``docs/delivery.md``)::

    webhook-id:        the delivery id, identical on every retry of one delivery
    webhook-timestamp: Unix seconds of *this* attempt (fresh on every retry)
    webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
                       [space-separated, one per valid key while a rotation is in grace]

Invariants:

* The signature covers the exact raw bytes sent. The sender stores the body bytes
  once (``deliveries.body``) and signs those, its sealed result text opened in place
  (:func:`pipeline.sealed_results.open_body`, the same bytes on every attempt); a
  receiver must verify the bytes it read off the wire, never JSON it parsed and
  serialised again.
* :meth:`Verifier.verify` never raises: every malformed header, secret or
  signature becomes a rejected :class:`Verification` with a reason, so a
  receiver answers 4xx, never 500.
* Every comparison of a computed signature against a presented one uses
  :func:`hmac.compare_digest`, and every candidate is compared (no early exit on
  the first byte that differs, no early exit on the first key).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"
#: Default replay window: a timestamp more than this far from the receiver's clock,
#: in either direction, is rejected.
DEFAULT_TOLERANCE_SECONDS = 300
#: Standard Webhooks secrets carry 24 to 64 random bytes.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
#: Bounds that keep a hostile header from costing more than a few HMACs.
_MAX_ID_LENGTH = 256
_MAX_SIGNATURES = 8
_MAX_SIGNATURE_HEADER = 2048


def generate_secret(nbytes: int = 32) -> str:
    """A new endpoint secret: ``whsec_`` + base64 of ``nbytes`` random bytes."""
    if not MIN_SECRET_BYTES <= nbytes <= MAX_SECRET_BYTES:
        raise ValueError(f"secret length must be {MIN_SECRET_BYTES}..{MAX_SECRET_BYTES} bytes")
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(nbytes)).decode("ascii")


def decode_secret(secret: str) -> bytes:
    """The HMAC key bytes of a Standard Webhooks secret, ``whsec_`` prefix optional.

    The reference libraries strip the prefix when present and decode the rest
    as base64, so a receiver configured with the bare base64 secret (as some
    dashboards show it) verifies the same signatures; so does this one.

    Raises:
        ValueError: bad base64, or a key outside 24..64 bytes.
    """
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("webhook secret is not valid base64") from exc
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise ValueError(f"webhook secret must hold {MIN_SECRET_BYTES}..{MAX_SECRET_BYTES} bytes")
    return key


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    """The bytes the HMAC covers: ``id.timestamp.body`` (body untouched)."""
    return msg_id.encode("utf-8") + b"." + str(int(timestamp)).encode("ascii") + b"." + body


def _mac(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    return hmac.new(key, signed_content(msg_id, timestamp, body), hashlib.sha256).digest()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` under ``secret``."""
    digest = _mac(decode_secret(secret), msg_id, timestamp, body)
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signature_header(secrets_: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """Space-separated signatures, one per secret (current key first during rotation)."""
    if not secrets_:
        raise ValueError("at least one signing secret is required")
    return " ".join(sign(s, msg_id, timestamp, body) for s in secrets_)


def webhook_headers(
    secrets_: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt."""
    return {
        HEADER_ID: msg_id,
        HEADER_TIMESTAMP: str(int(timestamp)),
        HEADER_SIGNATURE: signature_header(secrets_, msg_id, timestamp, body),
    }


@dataclass(frozen=True)
class VerificationKey:
    """A secret the receiver accepts, optionally only until ``not_after`` (Unix seconds).

    ``not_after`` is how a receiver ends a rotation's grace period: a message signed
    only with the old key is rejected once the receiver's clock passes it.
    """

    secret: str
    key_id: str = ""
    not_after: float | None = None


@dataclass(frozen=True)
class Verification:
    """The outcome of one verification; ``ok`` False always carries a ``reason``."""

    ok: bool
    reason: str
    msg_id: str | None = None
    timestamp: int | None = None
    key_id: str | None = None

    def __bool__(self) -> bool:
        return self.ok


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for k, v in headers.items():
        if k.lower() == lowered:
            return v
    return None


def _parse_signatures(header: str) -> tuple[list[bytes], bool]:
    """Decoded v1 signatures, and whether anything in the header was malformed."""
    found: list[bytes] = []
    malformed = False
    for item in header.split(" ")[: _MAX_SIGNATURES * 2]:
        if not item:
            continue
        version, comma, encoded = item.partition(",")
        if not comma or not version:
            malformed = True
            continue
        if version != SIGNATURE_VERSION:
            continue  # another scheme (e.g. v1a): not ours to judge
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            malformed = True
            continue
        if len(raw) != hashlib.sha256().digest_size:
            malformed = True
            continue
        found.append(raw)
    return found[:_MAX_SIGNATURES], malformed


class Verifier:
    """Verify Standard Webhooks requests against a set of keys.

    Args:
        keys: the secrets this receiver accepts (strings, or :class:`VerificationKey`
            with a ``not_after`` to end a rotation's grace period).
        tolerance_seconds: the replay window, applied in both directions.
        now: the receiver's clock in Unix seconds (injectable for tests).

    Raises:
        ValueError: at construction, for a malformed configured secret — a
            configuration error should stop the receiver from starting, not turn
            every request into a rejection.
    """

    def __init__(
        self,
        keys: Iterable[str | VerificationKey],
        *,
        tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._keys: list[tuple[VerificationKey, bytes]] = []
        for k in keys:
            vk = k if isinstance(k, VerificationKey) else VerificationKey(secret=k)
            self._keys.append((vk, decode_secret(vk.secret)))
        if not self._keys:
            raise ValueError("a verifier needs at least one key")
        self.tolerance_seconds = tolerance_seconds
        self._now = now

    def verify(self, headers: Mapping[str, str], body: bytes) -> Verification:
        """Check id, timestamp window and signature of one request; never raises."""
        try:
            return self._verify(headers, body)
        except Exception as exc:  # pragma: no cover - defensive: a verifier must not 500
            return Verification(False, f"verification_error:{type(exc).__name__}")

    def _verify(self, headers: Mapping[str, str], body: bytes) -> Verification:
        msg_id = _header(headers, HEADER_ID)
        ts_raw = _header(headers, HEADER_TIMESTAMP)
        sig_raw = _header(headers, HEADER_SIGNATURE)
        if not msg_id or ts_raw is None or sig_raw is None:
            return Verification(False, "missing_headers")
        if len(msg_id) > _MAX_ID_LENGTH or not msg_id.isascii() or not msg_id.isprintable():
            return Verification(False, "malformed_id")
        ts_text = ts_raw.strip()
        if not (ts_text.isascii() and ts_text.isdigit()) or len(ts_text) > 12:
            return Verification(False, "malformed_timestamp", msg_id)
        timestamp = int(ts_text)
        now = self._now()
        if abs(now - timestamp) > self.tolerance_seconds:
            reason = "timestamp_too_old" if timestamp < now else "timestamp_in_future"
            return Verification(False, reason, msg_id, timestamp)
        if len(sig_raw) > _MAX_SIGNATURE_HEADER:
            return Verification(False, "malformed_signature", msg_id, timestamp)
        presented, malformed = _parse_signatures(sig_raw)
        if not presented:
            reason = "malformed_signature" if malformed else "no_supported_signature"
            return Verification(False, reason, msg_id, timestamp)
        matched: VerificationKey | None = None
        for vk, key in self._keys:
            expected = _mac(key, msg_id, timestamp, body)
            hit = False
            for candidate in presented:
                # Compare every candidate: no data-dependent early exit.
                hit = hmac.compare_digest(expected, candidate) or hit
            usable = vk.not_after is None or now <= vk.not_after
            if hit and usable and matched is None:
                matched = vk
        if matched is None:
            return Verification(False, "no_matching_signature", msg_id, timestamp)
        return Verification(True, "ok", msg_id, timestamp, matched.key_id or None)
