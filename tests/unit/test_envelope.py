"""The envelope primitives (pipeline/envelope.py): AES-256-GCM sealing bound to its
associated data, the armored form a text column keeps, and where the KEK comes from."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any, cast

import pytest

from pipeline.data_keys import PLAIN, DataKeys
from pipeline.envelope import (
    ARMOR,
    LocalKeyProvider,
    SealBroken,
    armor,
    is_armored,
    key_id_of,
    local_key_file,
    new_key_text,
    open_sealed,
    seal,
    unarmor,
    with_local_kek,
)
from pipeline.settings import Settings


@pytest.fixture(autouse=True)
def _no_kek_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests name every key they use; one the shell exports must not leak into
    ``Settings()`` (a run with ``FENCELINE_KEK`` set would read it as configured)."""
    for name in ("FENCELINE_KEK", "FENCELINE_KEK_FILE"):
        monkeypatch.delenv(name, raising=False)


KEY = bytes(range(32))


def test_a_sealed_value_opens_only_with_its_key_and_associated_data() -> None:
    blob = seal(KEY, b"BE60 4180 0686 7539", b"tenant-1:doc-1")
    assert b"BE60" not in blob
    assert open_sealed(KEY, blob, b"tenant-1:doc-1") == b"BE60 4180 0686 7539"
    with pytest.raises(SealBroken):
        open_sealed(KEY, blob, b"tenant-2:doc-1")
    with pytest.raises(SealBroken):
        open_sealed(bytes(32), blob, b"tenant-1:doc-1")
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(SealBroken):
        open_sealed(KEY, flipped, b"tenant-1:doc-1")
    # a fresh nonce each time: the same text seals to different bytes
    assert seal(KEY, b"x", b"a") != seal(KEY, b"x", b"a")


def test_the_armored_form_names_the_data_key_version() -> None:
    blob = seal(KEY, b"text", b"aad")
    value = armor(7, blob)
    assert value.startswith(ARMOR) and is_armored(value) and not is_armored("text")
    assert unarmor(value) == (7, blob)
    with pytest.raises(SealBroken):
        unarmor(f"{ARMOR}x:AAAA")
    with pytest.raises(SealBroken):
        unarmor(f"{ARMOR}3:not base64!")


def test_the_provider_wraps_under_the_first_kek_and_unwraps_under_any_it_holds() -> None:
    new, old = bytes(range(1, 33)), KEY
    before = LocalKeyProvider([old])
    kek_id, wrapped = before.wrap(b"d" * 32, b"ctx")
    assert kek_id == key_id_of(old)
    both = LocalKeyProvider([new, old])
    assert both.current_kek_id == key_id_of(new)
    assert both.unwrap(kek_id, wrapped, b"ctx") == b"d" * 32
    with pytest.raises(SealBroken):
        both.unwrap(kek_id, wrapped, b"another context")
    with pytest.raises(KeyError):
        LocalKeyProvider([new]).unwrap(kek_id, wrapped, b"ctx")


def test_the_kek_comes_from_the_environment_or_a_key_file(tmp_path: Path) -> None:
    a, b = new_key_text(), new_key_text()
    assert LocalKeyProvider.from_settings(Settings()) is None  # unsealed: development
    env = LocalKeyProvider.from_settings(Settings(kek=f"{a}, {b}"))
    assert env is not None and env.current_kek_id == key_id_of(base64.b64decode(a))
    assert env.kek_ids == (key_id_of(base64.b64decode(a)), key_id_of(base64.b64decode(b)))
    path = tmp_path / "kek"
    path.write_text(f"# current first\n{b}\n\n{a}\n")
    filed = LocalKeyProvider.from_settings(Settings(kek_file=path))
    assert filed is not None and filed.current_kek_id == key_id_of(base64.b64decode(b))
    with pytest.raises(ValueError, match="not both"):
        LocalKeyProvider.from_settings(Settings(kek=a, kek_file=path))
    with pytest.raises(ValueError, match="base64 of 32 bytes"):
        LocalKeyProvider.from_settings(Settings(kek=base64.b64encode(b"short").decode()))
    with pytest.raises(ValueError, match="base64"):
        LocalKeyProvider.from_settings(Settings(kek="not base64!"))
    path.write_text("# nothing\n")
    with pytest.raises(ValueError, match="no key-encryption key"):
        LocalKeyProvider.from_settings(Settings(kek_file=path))


def test_a_local_run_gets_a_key_file_of_its_own_once(tmp_path: Path) -> None:
    path = local_key_file(tmp_path / "state" / "kek")
    assert path.stat().st_mode & 0o777 == 0o600
    first = LocalKeyProvider.from_settings(Settings(kek_file=path))
    assert first is not None
    again = LocalKeyProvider.from_settings(Settings(kek_file=local_key_file(path)))
    assert again is not None and again.current_kek_id == first.current_kek_id  # kept


def test_a_local_run_without_a_kek_seals_under_the_state_folders_key(tmp_path: Path) -> None:
    local = with_local_kek(Settings(state_dir=tmp_path))
    assert local.kek_file == (tmp_path / "kek").resolve() and local.kek_file.exists()
    configured = Settings(state_dir=tmp_path, kek=new_key_text())
    assert with_local_kek(configured) is configured  # a configured KEK is never replaced


@pytest.mark.parametrize(
    "text",
    ["fenceline-sealed:v1:1:AAAA", "fenceline-plain:fenceline-sealed:v1:1:AAAA", "INVOICE 7"],
)
async def test_an_unsealed_text_that_looks_sealed_reads_back_as_written(text: str) -> None:
    keys = DataKeys(None)  # no KEK: texts are stored as they are, escaped where ambiguous
    tenant = uuid.uuid4()
    stored = await keys.seal_text(cast(Any, None), tenant, text, "document:x")
    assert stored == text or stored.startswith(PLAIN)
    assert (stored == text) is (text == "INVOICE 7")
    assert await keys.open_text(cast(Any, None), tenant, stored, "document:x") == text
