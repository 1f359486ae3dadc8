"""The fenceline CLI against a real database (issue 2: safe migrations; explain)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid

import asyncpg
import pytest

from pipeline.jobs import JobStore
from pipeline.tenants import create_tenant, get_tenant_by_name
from tests.conftest import ADMIN_DSN, dsn_for
from tests.support.jobs import new_tenant, request

pytestmark = pytest.mark.integration


def fenceline(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FENCELINE_DATABASE_URL": dsn}
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_db_migrate_creates_database_and_is_idempotent() -> None:
    name = f"fl_cli_{uuid.uuid4().hex[:8]}"
    dsn = dsn_for(name)
    try:
        first = fenceline("db", "migrate", dsn=dsn)
        assert first.returncode == 0, first.stderr
        assert "migrations applied: [1" in first.stdout
        second = fenceline("db", "migrate", dsn=dsn)
        assert second.returncode == 0, second.stderr
        assert "none (up to date)" in second.stdout
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def test_explain_shows_every_attempt(pool: asyncpg.Pool, dsn: str) -> None:
    from pipeline.errors import ProviderTimeout

    store = JobStore(pool)
    tenant = await new_tenant(pool)
    job = await store.accept(request(tenant))
    first = (await store.claim("driver-a", lease_seconds=60))[0]
    await store.retry_or_fail(first, ProviderTimeout("attempt deadline"))
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE extraction_jobs SET available_at = now() WHERE id=$1", job.job_id
        )
    second = (await store.claim("driver-b"))[0]
    await store.succeed(second, result={"ok": True})
    out = fenceline("explain", str(job.job_id), dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert "worker driver-a: retry_scheduled timeout" in out.stdout
    assert "worker driver-b: succeeded" in out.stdout
    assert re.search(r"READY\s+->\s+RUNNING", out.stdout)
    assert re.search(r"RUNNING\s+->\s+RETRY_SCHEDULED", out.stdout)
    missing = fenceline("explain", str(uuid.uuid4()), dsn=dsn)
    assert missing.returncode == 1


async def test_tenant_and_key_commands_administer_through_tenant_admin(
    pool: asyncpg.Pool, dsn: str
) -> None:
    from decimal import Decimal

    from pipeline.tenants import SCOPES

    name = f"acme-{uuid.uuid4().hex[:6]}"
    created = fenceline("tenants", "create", name, dsn=dsn)
    assert created.returncode == 0, created.stderr
    first = json.loads(created.stdout)
    assert first["name"] == name and first["scopes"] == ["jobs"]
    assert first["api_key"].startswith("flk_")
    second_run = fenceline(
        "keys", "create", "--tenant", name, "--scope", "review", "--scope", "jobs", dsn=dsn
    )
    assert second_run.returncode == 0, second_run.stderr
    second = json.loads(second_run.stdout)
    assert second["scopes"] == ["jobs", "review"] and second["tenant_id"] == first["tenant_id"]

    listed = fenceline("keys", "list", "--tenant-id", first["tenant_id"], dsn=dsn)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [first["key_id"], second["key_id"]]
    assert lines[0].split()[1] == first["api_key"][:8] + "…"
    assert "scopes=jobs,review" in lines[1] and "revoked=-" in lines[1]
    for secret in (first["api_key"], second["api_key"]):  # neither secret nor hash
        assert secret not in listed.stdout
        assert hashlib.sha256(secret.encode()).hexdigest() not in listed.stdout

    revoked = fenceline("keys", "revoke", "--tenant", name, first["key_id"], dsn=dsn)
    again = fenceline("keys", "revoke", "--tenant", name, first["key_id"], dsn=dsn)
    assert (revoked.returncode, again.returncode) == (0, 1)
    after = fenceline("keys", "list", "--tenant", name, dsn=dsn).stdout.splitlines()
    assert "revoked=-" not in after[0] and "revoked=-" in after[1]

    quotas = fenceline(
        "tenants", "quotas", "--tenant", name, "--max-pending-jobs", "3",
        "--spend-budget", "12.345678", dsn=dsn,
    )  # fmt: skip
    assert quotas.returncode == 0, quotas.stderr
    assert json.loads(quotas.stdout)["spend_budget"] == "12.345678"
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT max_pending_jobs, max_pending_bytes, spend_budget FROM tenants WHERE name=$1",
            name,
        )
    assert row["max_pending_jobs"] == 3 and row["spend_budget"] == Decimal("12.345678")
    assert row["max_pending_bytes"] == 1 << 30  # an omitted quota keeps its value

    async with pool.acquire() as conn:
        tenant = await get_tenant_by_name(conn, name)
    assert tenant is not None
    await JobStore(pool).accept(request(tenant, text="INVOICE usage"))
    usage_run = fenceline("tenants", "usage", "--tenant", name, dsn=dsn)
    assert usage_run.returncode == 0, usage_run.stderr
    usage = json.loads(usage_run.stdout)
    assert usage["pending_jobs"] == {"used": 1, "limit": 3}
    assert usage["pending_bytes"]["used"] == len(b"INVOICE usage")
    assert usage["spend"]["limit"] == "12.345678"

    help_text = fenceline("keys", "create", "--help", dsn=dsn).stdout
    assert all(scope in help_text for scope in SCOPES)


async def test_tenant_and_key_commands_refuse_bad_input_clearly(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await new_tenant(pool)
    bad_scope = fenceline("keys", "create", "--tenant", tenant.name, "--scope", "admin", dsn=dsn)
    assert bad_scope.returncode == 2
    assert "admin" in bad_scope.stderr and "operator" in bad_scope.stderr
    assert "Traceback" not in bad_scope.stderr and "flk_" not in bad_scope.stdout
    never = f"never-{uuid.uuid4().hex[:6]}"
    bad_first_key = fenceline("tenants", "create", never, "--scope", "x", dsn=dsn)
    assert bad_first_key.returncode == 2 and "scopes" in bad_first_key.stderr
    unknown = fenceline("keys", "list", "--tenant", "no-such-tenant", dsn=dsn)
    assert unknown.returncode == 1 and "no tenant no-such-tenant" in unknown.stderr
    duplicate = fenceline("tenants", "create", tenant.name, dsn=dsn)
    assert duplicate.returncode == 1 and "already exists" in duplicate.stderr
    money = fenceline(
        "tenants", "quotas", "--tenant", tenant.name, "--spend-budget", "NaN", dsn=dsn
    )
    assert money.returncode == 2 and "--spend-budget" in money.stderr
    async with pool.acquire() as conn:
        keys = await conn.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id=$1", tenant.id)
        tenants = await conn.fetchval("SELECT count(*) FROM tenants WHERE name = $1", never)
    assert (keys, tenants) == (0, 0)  # a refused command wrote nothing


async def test_endpoints_register_list_rotate_disable_enable(pool: asyncpg.Pool, dsn: str) -> None:
    tenant = await new_tenant(pool)
    base = "https://93.184.216.34/hooks"  # a global literal: no DNS, allowed by the default policy

    def run(*args: str) -> object:
        out = fenceline("endpoints", *args, "--tenant", tenant.name, dsn=dsn)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    filtered = run(
        "register", "--url", f"{base}/a",
        "--event-types", "extraction.completed.v1, extraction.failed.v1",
        "--event-types", "extraction.completed.v1",
    )  # fmt: skip
    every = run("register", "--url", f"{base}/b", "--event-types", "")
    default = run("register", "--url", f"{base}/c", "--ack-window", "3600")
    assert isinstance(filtered, dict) and isinstance(every, dict) and isinstance(default, dict)
    assert filtered["event_types"] == ["extraction.completed.v1", "extraction.failed.v1"]
    assert every["event_types"] == []  # every event type
    assert default["event_types"] == ["extraction.completed.v1"]
    assert (default["ack_window_seconds"], filtered["ack_window_seconds"]) == (3600, None)
    assert filtered["key_id"] == "k1" and filtered["secret"].startswith("whsec_")
    endpoint = filtered["endpoint_id"]

    listed = fenceline("endpoints", "list", "--tenant", tenant.name, dsn=dsn)
    assert [e["id"] for e in json.loads(listed.stdout)] == [
        endpoint,
        every["endpoint_id"],
        default["endpoint_id"],
    ]
    assert "whsec_" not in listed.stdout  # secrets are shown once, at register / rotate

    rotated = run("rotate", "--endpoint", endpoint)
    assert isinstance(rotated, dict)
    assert (rotated["key_id"], rotated["previous_key_id"]) == ("k2", "k1")
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != filtered["secret"]
    disabled = run("disable", "--endpoint", endpoint, "--reason", "ERP maintenance")
    assert isinstance(disabled, dict)
    assert (disabled["state"], disabled["disabled_reason"]) == ("disabled", "ERP maintenance")
    enabled = run("enable", "--endpoint", endpoint)
    assert isinstance(enabled, dict)
    assert (enabled["state"], enabled["disabled_reason"]) == ("active", None)
    windowed = run("ack-window", "--endpoint", endpoint, "--seconds", "120")
    assert isinstance(windowed, dict) and windowed["ack_window_seconds"] == 120
    off = run("ack-window", "--endpoint", endpoint, "--seconds", "off")
    assert isinstance(off, dict) and off["ack_window_seconds"] is None
    short = fenceline(
        "endpoints", "ack-window", "--tenant", tenant.name, "--endpoint", endpoint,
        "--seconds", "10", dsn=dsn,
    )  # fmt: skip
    assert short.returncode == 1 and "acknowledgement window" in short.stderr

    bad = fenceline(
        "endpoints", "register", "--tenant", tenant.name, "--url", f"{base}/d",
        "--event-types", "Not An Event", dsn=dsn,
    )  # fmt: skip
    assert bad.returncode == 1 and "not event types" in bad.stderr
    async with pool.acquire() as conn:
        kinds = await conn.fetch(
            "SELECT kind, detail FROM endpoint_events WHERE endpoint_id = $1 ORDER BY seq",
            uuid.UUID(endpoint),
        )
        count = await conn.fetchval(
            "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", tenant.id
        )
    assert [k["kind"] for k in kinds] == [
        "registered", "rotated", "disabled", "enabled", "ack_window_changed",
        "ack_window_changed",
    ]  # fmt: skip
    assert kinds[2]["detail"].startswith("ERP maintenance")
    assert count == 3  # the refused registration wrote nothing


async def test_keys_create_expires_in_sets_an_expiry_and_refuses_bad_durations(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tenant = await new_tenant(pool)
    made = fenceline("keys", "create", "--tenant", tenant.name, "--expires-in", "90d", dsn=dsn)
    assert made.returncode == 0, made.stderr
    out = json.loads(made.stdout)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT created_at, expires_at FROM api_keys WHERE id = $1", uuid.UUID(out["key_id"])
        )
    assert (row["expires_at"] - row["created_at"]).total_seconds() == 90 * 86400
    assert out["expires_at"] == row["expires_at"].isoformat()
    listed = fenceline("keys", "list", "--tenant", tenant.name, dsn=dsn).stdout
    assert f"expires={row['expires_at'].isoformat()}" in listed
    for bad in ("0", "-1h", "soon", "infd"):
        refused = fenceline(
            "keys", "create", "--tenant", tenant.name, f"--expires-in={bad}", dsn=dsn
        )
        assert refused.returncode == 2 and "--expires-in" in refused.stderr, refused.stderr
        assert "flk_" not in refused.stdout
    async with pool.acquire() as conn:
        keys = await conn.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id=$1", tenant.id)
    assert keys == 1  # refused durations wrote nothing


async def test_keys_create_takes_a_name_or_an_id_never_one_for_the_other(
    pool: asyncpg.Pool, dsn: str
) -> None:
    async with pool.acquire() as conn:
        victim = await create_tenant(conn, f"victim-{uuid.uuid4().hex[:6]}")
    by_id = fenceline("keys", "create", "--tenant-id", str(victim.id), dsn=dsn)
    by_name = fenceline("keys", "create", "--tenant", victim.name, dsn=dsn)
    id_as_name = fenceline("keys", "create", "--tenant", str(victim.id), dsn=dsn)
    both = fenceline(
        "keys", "create", "--tenant", victim.name, "--tenant-id", str(victim.id), dsn=dsn
    )
    neither = fenceline("keys", "create", dsn=dsn)
    not_an_id = fenceline("keys", "create", "--tenant-id", victim.name, dsn=dsn)
    uuid_named = fenceline("tenants", "create", str(victim.id), dsn=dsn)
    assert by_id.returncode == 0 and by_name.returncode == 0, (by_id.stderr, by_name.stderr)
    assert id_as_name.returncode == 1 and "no tenant" in id_as_name.stderr
    for refused in (both, neither, not_an_id):
        assert refused.returncode == 2 and "--tenant" in refused.stderr, refused.stderr
    assert uuid_named.returncode == 2 and "UUID" in uuid_named.stderr
    async with pool.acquire() as conn:
        keys = await conn.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id=$1", victim.id)
        tenants = await conn.fetchval("SELECT count(*) FROM tenants WHERE name=$1", str(victim.id))
    assert (keys, tenants) == (2, 0)
