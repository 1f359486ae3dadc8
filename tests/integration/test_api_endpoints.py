"""``/v1/webhook-endpoints``: registration, reads, rotation, disable / enable over HTTP.

Real PostgreSQL; the app is :func:`pipeline.api.app.create_app` as deployed, with the
development egress switch where a test registers a loopback URL (nothing is ever
called here: these routes only validate and store).
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.clock import ManualClock
from pipeline.delivery import SecretBox
from pipeline.delivery.endpoints import signing_keys
from pipeline.settings import Settings
from tests.support.api import TenantKey, add_key, asgi_client, settings_for, tenant_with_key
from tests.support.delivery import fetch, fetchval, job_store, succeed_jobs

pytestmark = pytest.mark.integration

BASE = "/v1/webhook-endpoints"
GRACE = 3600
KEK = base64.b64encode(bytes(range(32))).decode()


def dev_settings(dsn: str, **kw: Any) -> Settings:
    return settings_for(
        dsn,
        delivery_allow_loopback_http=True,
        webhook_secret_key=KEK,
        webhook_rotation_grace_seconds=GRACE,
        **kw,
    )


async def operator(pool: asyncpg.Pool) -> TenantKey:
    return await tenant_with_key(pool, scopes=("jobs", "operator"))


async def register(client: httpx.AsyncClient, tk: TenantKey, **body: Any) -> dict[str, Any]:
    r = await client.post(BASE, json={"url": "http://127.0.0.1:9/hook", **body}, headers=tk.headers)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


async def keys_signing_now(pool: asyncpg.Pool, endpoint_id: str, now: Any) -> list[tuple[str, str]]:
    """(key id, secret) the dispatcher would sign with at ``now``."""
    box = SecretBox.from_settings(Settings(webhook_secret_key=KEK))
    async with pool.acquire() as conn:
        keys = await signing_keys(conn, box, uuid.UUID(endpoint_id), now)
    return [(k.key_id, k.secret) for k in keys]


async def test_registration_shows_the_secret_once_and_reads_never(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    app = create_app(dev_settings(dsn), pool=pool)
    async with asgi_client(app) as client:
        r = await client.post(
            BASE,
            json={
                "url": "http://127.0.0.1:9/hook",
                "description": "ledger A",
                "event_types": ["extraction.completed.v1", "extraction.completed.v1"],
            },
            headers=tk.headers,
        )
        every = await register(client, tk, event_types=[])
        default = await register(client, tk)
        created = r.json()
        endpoint_id = created["endpoint"]["id"]
        listed = await client.get(BASE, headers=tk.headers)
        one = await client.get(f"{BASE}/{endpoint_id}", headers=tk.headers)
    assert r.status_code == 201
    assert r.headers["location"] == f"{BASE}/{endpoint_id}"
    assert created["key_id"] == "k1" and created["secret"].startswith("whsec_")
    assert created["endpoint"]["event_types"] == ["extraction.completed.v1"]  # deduplicated
    assert created["endpoint"]["state"] == "active"
    assert every["endpoint"]["event_types"] == []  # every event type
    assert default["endpoint"]["event_types"] == ["extraction.completed.v1"]
    # The secret shown is the one the dispatcher signs with, and it was stored sealed.
    assert await keys_signing_now(pool, endpoint_id, None) == [("k1", created["secret"])]
    sealed = await fetchval(
        pool,
        "SELECT sealed_secret FROM webhook_endpoint_keys WHERE endpoint_id = $1",
        uuid.UUID(endpoint_id),
    )
    assert sealed.startswith("v1:") and created["secret"] not in sealed
    # Reads never carry a secret.
    secrets = [created["secret"], every["secret"], default["secret"]]
    for read in (listed, one):
        assert read.status_code == 200
        assert not any(s in read.text for s in secrets)
        assert "secret" not in read.text
    assert [e["id"] for e in listed.json()["items"]] == [
        endpoint_id,
        every["endpoint"]["id"],
        default["endpoint"]["id"],
    ]
    detail = one.json()
    assert (detail["url"], detail["description"]) == ("http://127.0.0.1:9/hook", "ledger A")
    assert [(k["key_id"], k["retired_at"]) for k in detail["keys"]] == [("k1", None)]


async def test_rotation_returns_a_new_secret_once_and_the_old_one_signs_through_the_grace(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    clock = ManualClock()
    app = create_app(dev_settings(dsn), pool=pool, clock=clock)
    async with asgi_client(app) as client:
        created = await register(client, tk)
        endpoint_id = created["endpoint"]["id"]
        rotated = await client.post(f"{BASE}/{endpoint_id}/rotate", headers=tk.headers)
        detail = await client.get(f"{BASE}/{endpoint_id}", headers=tk.headers)
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()
    assert (new["key_id"], new["previous_key_id"]) == ("k2", "k1")
    assert new["secret"].startswith("whsec_") and new["secret"] != created["secret"]
    grace_end = clock.now() + timedelta(seconds=GRACE)
    assert datetime.fromisoformat(new["previous_expires_at"]) == grace_end
    assert new["secret"] not in detail.text and created["secret"] not in detail.text
    keys = {k["key_id"]: k for k in detail.json()["keys"]}
    assert keys["k1"]["retired_at"] is not None and keys["k2"]["retired_at"] is None
    # Both sign during the grace period (new first), only the new one after it.
    both = [("k2", new["secret"]), ("k1", created["secret"])]
    assert await keys_signing_now(pool, endpoint_id, clock.now()) == both
    assert await keys_signing_now(pool, endpoint_id, grace_end - timedelta(seconds=1)) == both
    assert await keys_signing_now(pool, endpoint_id, grace_end) == [("k2", new["secret"])]


async def test_disable_keeps_the_reason_abandons_waiting_deliveries_and_enable_reactivates(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    app = create_app(dev_settings(dsn), pool=pool)
    async with asgi_client(app) as client:
        endpoint_id = (await register(client, tk))["endpoint"]["id"]
        [job] = await succeed_jobs(job_store(pool), tk.tenant, 1)
        disabled = await client.post(
            f"{BASE}/{endpoint_id}/disable",
            json={"reason": "ERP migration weekend"},
            headers=tk.headers,
        )
        again = await client.post(
            f"{BASE}/{endpoint_id}/disable", json={"reason": "twice"}, headers=tk.headers
        )
        [waiting] = await fetch(pool, "SELECT * FROM deliveries WHERE job_id = $1", job)
        enabled = await client.post(f"{BASE}/{endpoint_id}/enable", headers=tk.headers)
        no_reason = await client.post(
            f"{BASE}/{endpoint_id}/disable", json={"reason": ""}, headers=tk.headers
        )
    assert disabled.status_code == 200, disabled.text
    assert (disabled.json()["state"], disabled.json()["disabled_reason"]) == (
        "disabled",
        "ERP migration weekend",
    )
    assert again.json()["disabled_reason"] == "ERP migration weekend"  # already disabled
    assert (waiting["state"], waiting["final_reason"]) == ("abandoned", "endpoint_disabled")
    assert enabled.status_code == 200
    assert (enabled.json()["state"], enabled.json()["disabled_reason"]) == ("active", None)
    assert enabled.json()["breaker_state"] == "closed"
    assert no_reason.status_code == 422
    kinds = await fetch(
        pool,
        "SELECT kind FROM endpoint_events WHERE endpoint_id = $1 ORDER BY seq",
        uuid.UUID(endpoint_id),
    )
    assert [k["kind"] for k in kinds] == ["registered", "disabled", "enabled"]


BLOCKED = [
    ("https://127.1/hook", "numeric_host"),
    ("https://169.254.169.254/latest/meta-data/", "metadata"),
    ("https://[::ffff:7f00:1]/hook", "ipv4_mapped_loopback"),
    ("https://10.0.0.1/hook", "private"),
    ("https://a.com@127.0.0.1/hook", "userinfo"),
    ("file:///etc/passwd", "scheme"),
    ("http://93.184.216.34/hook", "scheme"),  # plain http to a global address
    ("https://93.184.216.34:8443/hook", "port"),
    ("https://erp.invalid/hook", "unresolvable"),
]


async def test_urls_the_egress_guard_refuses_are_422_problems_and_write_nothing(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    app = create_app(settings_for(dsn, webhook_secret_key=KEK), pool=pool)  # production policy
    async with asgi_client(app) as client:
        answers = [
            await client.post(BASE, json={"url": url}, headers=tk.headers) for url, _ in BLOCKED
        ]
        ok = await client.post(BASE, json={"url": "https://93.184.216.34/hook"}, headers=tk.headers)
    for (url, reason), r in zip(BLOCKED, answers, strict=True):
        assert r.status_code == 422, (url, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        problem = r.json()
        # The guard's rule, never an address the host resolved to (no DNS oracle).
        assert problem["reason"] == "egress_blocked", url
        assert problem["detail"] == f"the URL is refused by the egress policy ({reason})"
    assert ok.status_code == 201, ok.text  # a global literal address on 443 is fine
    count = "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1"
    assert await fetchval(pool, count, tk.tenant.id) == 1


async def test_enable_rechecks_the_url_under_the_current_policy(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        endpoint_id = (await register(client, tk))["endpoint"]["id"]
        disable = await client.post(
            f"{BASE}/{endpoint_id}/disable", json={"reason": "x"}, headers=tk.headers
        )
        assert disable.status_code == 200
    # Production policy now: the loopback URL stored under the development switch is refused.
    async with asgi_client(create_app(settings_for(dsn, webhook_secret_key=KEK), pool=pool)) as c:
        refused = await c.post(f"{BASE}/{endpoint_id}/enable", headers=tk.headers)
        still = await c.get(f"{BASE}/{endpoint_id}", headers=tk.headers)
    assert refused.status_code == 422 and refused.json()["reason"] == "egress_blocked"
    assert still.json()["state"] == "disabled"


async def test_reads_need_any_key_of_the_tenant_and_changes_need_the_operator_scope(
    pool: asyncpg.Pool, dsn: str
) -> None:
    tk = await operator(pool)
    jobs_key = await add_key(pool, tk, ("jobs",))
    reviewer = await add_key(pool, tk, ("review",))
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        endpoint_id = (await register(client, tk))["endpoint"]["id"]
        reads = [
            await client.get(url, headers=k.headers)
            for k in (jobs_key, reviewer)
            for url in (BASE, f"{BASE}/{endpoint_id}")
        ]
        writes = []
        for k in (jobs_key, reviewer):
            for target in (endpoint_id, str(uuid.uuid4())):  # own and unknown: both 403
                writes += [
                    await client.post(f"{BASE}/{target}/rotate", headers=k.headers),
                    await client.post(
                        f"{BASE}/{target}/disable", json={"reason": "x"}, headers=k.headers
                    ),
                    await client.post(f"{BASE}/{target}/enable", headers=k.headers),
                ]
            writes.append(
                await client.post(BASE, json={"url": "http://127.0.0.1:9/x"}, headers=k.headers)
            )
        anonymous = [
            await client.get(BASE),
            await client.post(BASE, json={"url": "http://127.0.0.1:9/x"}),
        ]
        [current] = (await client.get(f"{BASE}/{endpoint_id}", headers=tk.headers)).json()["keys"]
    assert [r.status_code for r in reads] == [200] * 4
    assert [r.status_code for r in writes] == [403] * len(writes)
    assert {r.json()["reason"] for r in writes} == {"scope"}
    assert [r.status_code for r in anonymous] == [401, 401]
    count = "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1"
    assert await fetchval(pool, count, tk.tenant.id) == 1
    assert current["key_id"] == "k1"  # nothing was rotated


async def test_another_tenants_endpoint_is_a_404_like_a_missing_one_and_stays_untouched(
    pool: asyncpg.Pool, dsn: str
) -> None:
    owner, attacker = await operator(pool), await operator(pool)
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        created = await register(client, owner)
        endpoint_id = created["endpoint"]["id"]
        calls = [
            ("GET", "", None),
            ("POST", "/rotate", None),
            ("POST", "/disable", {"reason": "attacker"}),
            ("POST", "/enable", None),
        ]
        answers = []
        for method, suffix, body in calls:
            for target in (endpoint_id, str(uuid.uuid4())):
                r = await client.request(
                    method, f"{BASE}/{target}{suffix}", json=body, headers=attacker.headers
                )
                answers.append((r.status_code, r.json()))
        listed = await client.get(BASE, headers=attacker.headers)
        after = (await client.get(f"{BASE}/{endpoint_id}", headers=owner.headers)).json()
    foreign, missing = answers[0::2], answers[1::2]
    assert foreign == missing
    assert {status for status, _ in foreign} == {404}
    assert listed.json() == {"items": []}
    assert endpoint_id not in listed.text
    assert after["state"] == "active" and [k["key_id"] for k in after["keys"]] == ["k1"]


@pytest.mark.parametrize(
    "body",
    [
        {"url": "http://127.0.0.1:9/x", "event_types": ["not an event"]},
        {"url": "http://127.0.0.1:9/x", "event_types": "extraction.completed.v1"},
        {"url": "http://127.0.0.1:9/x", "description": "nul\u0000byte"},
        {"url": "http://127.0.0.1:9/x", "secret": "whsec_chosen_by_the_caller"},
        {"url": ""},
        {},
    ],
)
async def test_invalid_registrations_are_422_problems(
    pool: asyncpg.Pool, dsn: str, body: dict[str, Any]
) -> None:
    tk = await operator(pool)
    async with asgi_client(create_app(dev_settings(dsn), pool=pool)) as client:
        r = await client.post(BASE, json=body, headers=tk.headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    count = "SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1"
    assert await fetchval(pool, count, tk.tenant.id) == 0
