"""Tenant names (issue 45, defect 3): one validated form, and names and ids never
share one lookup, so a tenant named with another tenant's id cannot stand for it
(the CLI's ``--tenant`` / ``--tenant-id``: ``tests/integration/test_cli.py``)."""

from __future__ import annotations

import re
import uuid

import asyncpg
import pytest

from pipeline.errors import NotFound
from pipeline.tenants import create_tenant, resolve_tenant

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("\t", "blank"),
        ("acme\u202egnp", "U+202E"),
        ("acme\u2066x\u2069", "U+2066"),
        ("zero\u200bwidth", "U+200B"),
        ("line\nbreak", "U+000A"),
        ("nul\x00", "U+0000"),
        ("no\u00a0break", "U+00A0"),
        ("x" * 101, "at most 100"),
        ("3f1c2a4e-0b7d-4c1e-9a53-2d6f0e8b9c11", "UUID"),
        ("3F1C2A4E0B7D4C1E9A532D6F0E8B9C11", "UUID"),
        ("{3f1c2a4e-0b7d-4c1e-9a53-2d6f0e8b9c11}", "UUID"),
        ("urn:uuid:3f1c2a4e-0b7d-4c1e-9a53-2d6f0e8b9c11", "UUID"),
    ],
)
async def test_a_name_outside_the_one_form_is_refused_and_nothing_is_stored(
    pool: asyncpg.Pool, name: str, why: str
) -> None:
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM tenants")
        with pytest.raises(ValueError, match=re.escape(why)):
            await create_tenant(conn, name)
        assert await conn.fetchval("SELECT count(*) FROM tenants") == before


async def test_names_are_stored_trimmed_nfc_and_unique_case_insensitively(
    pool: asyncpg.Pool,
) -> None:
    base = f"Müller-{uuid.uuid4().hex[:6]}"
    async with pool.acquire() as conn:
        made = await create_tenant(conn, "  Mu\u0308ller" + base.removeprefix("Müller") + " ")
        assert made.name == base  # decomposed ü composed, edges trimmed
        for again in (base.upper(), base.lower(), f" {base}"):
            with pytest.raises(asyncpg.UniqueViolationError):
                await create_tenant(conn, again)
        assert (await create_tenant(conn, f"{base} GmbH & Co. KG")).name == f"{base} GmbH & Co. KG"


async def test_a_string_is_a_name_and_a_uuid_is_an_id(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        victim = await create_tenant(conn, f"victim-{uuid.uuid4().hex[:6]}")
        assert (await resolve_tenant(conn, victim.id)).id == victim.id
        assert (await resolve_tenant(conn, victim.name)).id == victim.id
        with pytest.raises(NotFound):
            await resolve_tenant(conn, str(victim.id))  # a name, and no tenant has it
