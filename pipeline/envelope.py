"""Envelope encryption: AES-256-GCM under data keys, data keys wrapped by a key-encryption key.

The key hierarchy (docs/data-lifecycle.md, "Encryption at rest"):

* a **key-encryption key** (KEK) lives outside the database, with a
  :class:`KeyProvider`: :class:`LocalKeyProvider` reads it from the environment
  (``FENCELINE_KEK``) or a key file (``FENCELINE_KEK_FILE``); a KMS implements the same
  protocol for production (its ``wrap``/``unwrap`` are the KMS's encrypt/decrypt);
* a **data key** (DEK) per tenant and version, 32 random bytes, stored only wrapped by
  the KEK (``tenant_data_keys``, migration 039; :mod:`pipeline.data_keys`);
* **content** sealed under a DEK with associated data that names the tenant and the
  row the value belongs to, so sealed bytes moved to another tenant's row, or another
  row, fail authentication instead of decrypting.

Invariants: every sealed value names the DEK version it was sealed under (the
:data:`ARMOR` prefix), every wrapped DEK names its KEK (``kek_id``), so a KEK rotation
re-wraps the DEKs and rewrites no data; a value never opens under a key or associated
data other than its own (:class:`~cryptography.exceptions.InvalidTag` becomes
:class:`SealBroken`). The webhook secrets' :class:`~pipeline.delivery.SecretBox`
seals with :func:`seal` and :func:`open_sealed` too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from pipeline.settings import Settings

#: AES-256 keys, 96-bit nonces (GCM's own size: a random nonce per seal).
KEY_BYTES = 32
NONCE_BYTES = 12
#: The prefix of a sealed text value: ``fenceline-sealed:v1:<dek version>:<base64>``,
#: the base64 of nonce + ciphertext + tag. A text column keeps its type, and a value
#: written before sealing (or with sealing off) reads as plain text.
ARMOR = "fenceline-sealed:v1:"


class SealBroken(ValueError):
    """A sealed value failed authentication: another key, other associated data, or
    tampered bytes. Never answered with garbage."""


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """``nonce || AES-256-GCM(key, plaintext, aad)`` (ciphertext with its 16-byte tag)."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, blob: bytes, aad: bytes) -> bytes:
    """The plaintext :func:`seal` sealed into ``blob``.

    Raises:
        SealBroken: wrong key, wrong ``aad`` or altered bytes.
    """
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except (InvalidTag, ValueError) as exc:
        raise SealBroken("sealed value failed authentication") from exc


def key_id_of(key: bytes) -> str:
    """A key's public name: the first 8 hex digits of its SHA-256 (as SecretBox names its key)."""
    return hashlib.sha256(key).hexdigest()[:8]


def armor(version: int, blob: bytes) -> str:
    """A sealed blob as text for a text column, naming the DEK version it needs."""
    return f"{ARMOR}{version}:{base64.b64encode(blob).decode()}"


def is_armored(value: str) -> bool:
    return value.startswith(ARMOR)


def unarmor(value: str) -> tuple[int, bytes]:
    """The DEK version and blob of an :func:`armor`-ed value.

    Raises:
        SealBroken: not a well-formed sealed value.
    """
    version, _, b64 = value[len(ARMOR) :].partition(":")
    try:
        return int(version), base64.b64decode(b64, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise SealBroken("not a sealed value") from exc


@runtime_checkable
class KeyProvider(Protocol):
    """Where the key-encryption key lives: wraps and unwraps data keys, never hands
    the KEK out. A KMS implements it with its encrypt and decrypt calls (the
    ``context`` as its encryption context)."""

    @property
    def current_kek_id(self) -> str:
        """The KEK new wraps use."""
        ...

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        """``(kek_id, wrapped)``: ``data_key`` wrapped by the current KEK, bound to ``context``."""
        ...

    def unwrap(self, kek_id: str, wrapped: bytes, context: bytes) -> bytes:
        """The data key ``wrapped`` by KEK ``kek_id`` under ``context``.

        Raises:
            KeyError: ``kek_id`` is not a KEK this provider holds.
            SealBroken: the wrapped key or its context does not authenticate.
        """
        ...


class LocalKeyProvider:
    """KEKs held in this process (from the environment or a key file): the first is
    current, the others still unwrap what they wrapped until a rotation re-wrapped it.

    Args:
        keys: 32-byte KEKs, the current one first.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("at least one key-encryption key is needed")
        if any(len(k) != KEY_BYTES for k in keys):
            raise ValueError("a key-encryption key must be 32 bytes (base64 of 32 bytes)")
        self._keys = {key_id_of(k): k for k in keys}
        self._current = key_id_of(keys[0])

    @property
    def current_kek_id(self) -> str:
        return self._current

    @property
    def kek_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        return self._current, seal(self._keys[self._current], data_key, context)

    def unwrap(self, kek_id: str, wrapped: bytes, context: bytes) -> bytes:
        return open_sealed(self._keys[kek_id], wrapped, context)

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalKeyProvider | None:
        """The KEKs ``FENCELINE_KEK`` (comma-separated base64, current first) or
        ``FENCELINE_KEK_FILE`` (one base64 key a line, current first; ``#`` comments)
        name; None when neither is set (content is then stored unsealed).

        Raises:
            ValueError: both set, a key that is not base64 of 32 bytes, or no key in the file.
        """
        if settings.kek is not None and settings.kek_file is not None:
            raise ValueError("set FENCELINE_KEK or FENCELINE_KEK_FILE, not both")
        if settings.kek is not None:
            return cls(parse_keys(settings.kek.get_secret_value().split(",")))
        if settings.kek_file is not None:
            return cls(parse_keys(read_key_file(settings.kek_file)))
        return None


def read_key_file(path: Path) -> list[str]:
    """The key lines of a KEK file (blank lines and ``#`` comments dropped)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def parse_keys(values: Sequence[str]) -> list[bytes]:
    """32-byte keys from their base64, in order."""
    out = []
    for value in (v.strip() for v in values):
        if not value:
            continue
        try:
            out.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ValueError("a key-encryption key must be base64 of 32 bytes") from exc
    if not out:
        raise ValueError("no key-encryption key given")
    return out


def new_key_text() -> str:
    """A fresh 32-byte key as base64 (what ``FENCELINE_KEK`` holds)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def local_key_file(path: Path) -> Path:
    """A KEK file for a local run (``fenceline up`` with no KEK configured): ``path``
    as it is, or a new one with a fresh key, readable by its owner only. A key beside
    the database protects a dump or a backup that leaves the machine, not the machine."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"# Fenceline key-encryption key, current first\n{new_key_text()}\n")
    return path


def with_local_kek(settings: Settings) -> Settings:
    """``settings`` as they are when they name a KEK, else with ``kek_file`` the local
    key file in the state folder (:func:`local_key_file`): what ``fenceline up`` and
    the demo run with, so invoice text is sealed at rest there too."""
    if settings.kek is not None or settings.kek_file is not None:
        return settings
    path = local_key_file(settings.state_dir / "kek").resolve()
    return settings.model_copy(update={"kek_file": path})
