"""What ``fenceline demo --keep`` leaves for the review console (issue 18), without the
engine: the demo's own provisioning, its default corpus, and the invoices a faithful
reading sends to review settled REVIEW_REQUIRED the way a driver settles them. Every
such job is in the queue of the console key the demo prints for its tenant, and in
no other tenant's.

(The full demo needs the vLLM engine; this runs the part of it the console depends on.)"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from benchmarks.demo.corpus import TENANTS, DemoOptions, corpus
from benchmarks.demo.provision import CONSOLE_SCOPES, console_lines, provision, review_key_name
from pipeline.api import create_app
from pipeline.extraction import answer_for
from pipeline.jobs import JobStore
from pipeline.states import JobState
from pipeline.tenants import authenticate, get_tenant_by_name, load_master_data
from pipeline.worker import interpret
from tests.support.api import TenantKey, loopback_server, settings_for
from tests.support.console import console_login

pytestmark = pytest.mark.integration


async def test_every_review_job_of_the_demo_is_in_the_console_of_its_tenants_printed_key(
    pool: asyncpg.Pool, dsn: str
) -> None:
    settings = settings_for(dsn, delivery_allow_loopback_http=True, delivery_allowed_ports=(443, 9))
    work = corpus(DemoOptions())
    keys, _ = await provision(settings, "http://127.0.0.1:9/webhooks/fenceline", work)
    review_keys = {name: keys.pop(review_key_name(name)) for name, _ in TENANTS}
    lines = console_lines("http://127.0.0.1:8123", review_keys, work)
    app = create_app(settings, pool=pool)
    store = JobStore(pool, settings)
    today = datetime.now(UTC).date()
    waiting: dict[str, list[uuid.UUID]] = {name: [] for name, _ in TENANTS}
    async with loopback_server(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            for i, (tenant, inv) in enumerate(work):
                if inv.truth_decision.value != "REVIEW_REQUIRED":
                    continue
                r = await c.post(
                    "/v1/extraction-jobs",
                    json={"document": {"text": inv.ocr_text, "filename": f"invoice-{i}.txt"}},
                    headers={"Authorization": f"Bearer {keys[tenant]}"},
                )
                assert r.status_code == 202, r.text
                (lease,) = await store.claim("demo-test-driver")
                async with pool.acquire() as conn:
                    t = await get_tenant_by_name(conn, tenant)
                    assert t is not None
                    master = await load_master_data(conn, t.id, keys=store.data_keys)
                it = interpret(
                    answer_for(inv.truth, inv.ocr_text), inv.ocr_text, master, today=today
                )
                decision = JobState(it.report.decision.value)
                settled = await store.succeed(
                    lease, result=it.result(), validation=it.report.as_dict(), decision=decision
                )
                assert settled.state is JobState.REVIEW_REQUIRED, it.report.as_dict()
                waiting[tenant].append(lease.job_id)
        queues: dict[str, str] = {}
        for name, key in review_keys.items():
            async with pool.acquire() as conn:
                principal = await authenticate(conn, key)
                t = await get_tenant_by_name(conn, name)
            assert principal is not None and t is not None
            assert principal.scopes == frozenset(CONSOLE_SCOPES)
            async with httpx.AsyncClient(base_url=base, timeout=10) as c:
                await console_login(c, TenantKey(t, key, principal.key_id))
                queues[name] = (await c.get("/console/queue")).text
    assert sum(len(v) for v in waiting.values()) == 2  # the two adversarial invoices
    for name, jobs in waiting.items():
        for job_id in jobs:
            assert str(job_id) in queues[name]
            assert all(str(job_id) not in queues[o] for o in queues if o != name)
        # The printed line names the tenant's key and how many wait for it.
        (line,) = [x for x in lines if re.match(rf"\s+{re.escape(name)}\s", x)]
        assert review_keys[name] in line and f"({len(jobs)} invoice(s) expected in review)" in line
    assert (
        lines[0] == "console: http://127.0.0.1:8123/console  (sign in with the tenant's review key)"
    )
    assert json.dumps(lines).count("flk_") == len(TENANTS)
