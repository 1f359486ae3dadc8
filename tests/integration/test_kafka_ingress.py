"""The Kafka ingress against a Kafka-protocol broker and the real PostgreSQL (spec §2).

The broker is librdkafka's mock cluster in its own process
(:mod:`tests.support.kafka_broker`): the ingress talks to it over TCP as to Kafka,
with a real consumer group and committed offsets read back from the broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator

import asyncpg
import httpx
import pytest

from pipeline.api import create_app
from pipeline.jobs import AcceptRequest, CancelRequest, DocumentIn, JobStore, cancel_job
from pipeline.messaging.kafka_inbox import HELD, KafkaInbox, KafkaIngestResult, KafkaRecord
from pipeline.messaging.kafka_ingress import KafkaIngress, KafkaIngressConfig
from tests.support.api import asgi_client, settings_for, tenant_with_key
from tests.support.jobs import new_tenant
from tests.support.kafka_broker import REPO, committed, end_offsets, mock_kafka, produce

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with mock_kafka() as address:
        yield address


def submission(i: int, **extra: object) -> bytes:
    return json.dumps({"document": {"text": f"Invoice INV-{i:04d} total 1{i}.00 EUR"}, **extra})


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"subs-{tag}", f"fenceline-ingress-{tag}"


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout}s: {check.__doc__ or check}")
        await asyncio.sleep(0.1)


async def tenant_jobs(pool: asyncpg.Pool, tenant: uuid.UUID) -> list[str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT idempotency_key FROM extraction_jobs WHERE tenant_id = $1", tenant
        )
    return sorted(r["idempotency_key"] for r in rows)


async def records(pool: asyncpg.Pool, tenant: uuid.UUID) -> list[asyncpg.Record]:
    async with pool.acquire() as conn:
        return await conn.fetch(
            "SELECT kafka_partition, kafka_offset, outcome, reason, job_id"
            " FROM kafka_ingress_records WHERE tenant_id = $1"
            " ORDER BY kafka_partition, kafka_offset",
            tenant,
        )


class Running:
    """An ingress running as a task of the test's loop until :meth:`stop`."""

    def __init__(self, ingress: KafkaIngress) -> None:
        self.ingress = ingress
        self.halt = asyncio.Event()
        self.task = asyncio.create_task(ingress.run(self.halt))

    async def caught_up(self, ends: dict[int, int]) -> None:
        topic = self.ingress.config.topic
        want = {(topic, p): end for p, end in ends.items() if end > 0}

        async def check() -> bool:
            """every partition committed to its end"""
            if self.task.done():
                self.task.result()  # raises what stopped it
            return self.ingress.commits == want

        await eventually(check)

    async def stop(self) -> None:
        self.halt.set()
        await asyncio.wait_for(self.task, 30)


def metric(ingress: KafkaIngress, name: str, **labels: str) -> float | None:
    return ingress.metrics.registry.get_sample_value(name, labels)


def lags(ingress: KafkaIngress, ends: dict[int, int]) -> dict[int, float | None]:
    return {
        p: metric(ingress, "fenceline_kafka_ingress_lag_records", partition=str(p)) for p in ends
    }


def ingress_for(
    pool: asyncpg.Pool, tenant: uuid.UUID, bootstrap: str, topic: str, group: str, **kw: object
) -> KafkaIngress:
    inbox = KafkaInbox(pool, JobStore(pool), tenant)
    return KafkaIngress(inbox, KafkaIngressConfig(bootstrap, topic, group, **kw))  # type: ignore[arg-type]


async def test_each_record_becomes_one_job_and_every_offset_is_committed(
    pool: asyncpg.Pool, bootstrap: str
) -> None:
    tenant = (await new_tenant(pool)).id
    topic, group = names()
    n = 40
    values = [submission(i) for i in range(n)]
    # A producer's retry of record 7 (same key, new offset) and one unreadable record.
    values[7] = submission(7, idempotency_key="erp-7")
    values.append(submission(7, idempotency_key="erp-7"))
    values.append(b"not json")
    await asyncio.to_thread(produce, bootstrap, topic, values)
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)
    assert sum(ends.values()) == n + 2

    run = Running(
        ingress_for(pool, tenant, bootstrap, topic, group, window=8, lag_sample_seconds=0.5)
    )
    await run.caught_up(ends)

    async def no_lag() -> bool:
        """the sampled lag of every partition down to 0"""
        return lags(run.ingress, ends) == {p: 0.0 for p in ends}

    await eventually(no_lag)
    await run.stop()

    assert run.ingress.counts == {"accepted": n, "replayed": 1, "refused": 1}
    records_total = "fenceline_kafka_ingress_records_total"
    for outcome, count in run.ingress.counts.items():
        assert metric(run.ingress, records_total, outcome=outcome) == count
    for p, end in ends.items():
        if end > 0:
            assert (
                metric(run.ingress, "fenceline_kafka_ingress_committed_offset", partition=str(p))
                == end
            )
    assert run.ingress.pauses >= 1  # 42 records through a window of 8
    keys = await tenant_jobs(pool, tenant)
    assert len(keys) == n == len(set(keys))
    assert "erp-7" in keys
    rows = await records(pool, tenant)
    assert len(rows) == n + 2  # every position recorded, the refused one with its reason
    refused = [r for r in rows if r["outcome"] == "refused"]
    assert [(r["reason"], r["job_id"]) for r in refused] == [("not_json", None)]
    replayed = [r for r in rows if r["outcome"] == "replayed"]
    first = [r for r in rows if r["job_id"] == replayed[0]["job_id"] and r["outcome"] == "accepted"]
    assert len(first) == 1  # the retry names the job its first copy made
    by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
    assert by_broker == {p: end for p, end in ends.items() if end > 0}


async def test_a_crash_between_inbox_and_offset_commit_reads_again_and_dedupes(
    pool: asyncpg.Pool, dsn: str, bootstrap: str
) -> None:
    tenant = (await new_tenant(pool)).id
    topic, group = names()
    n = 24
    await asyncio.to_thread(produce, bootstrap, topic, [submission(i) for i in range(n)])
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)

    argv = [dsn, bootstrap, topic, group, str(tenant)]
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.support.kafka_child", *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        out = child.stdout
        lines = [await asyncio.wait_for(asyncio.to_thread(out.readline), 60) for _ in range(n)]
        assert all(line.startswith("INGESTED ") for line in lines), lines
        assert len({tuple(line.split()[1:3]) for line in lines}) == n
        # Every record is in the inbox, and the child is stopped before any offset commit.
        assert len(await records(pool, tenant)) == n
        # Ten poll-and-commit turns go by while it polls on: an ingress that committed
        # before a record counted as durable would have committed by now.
        await asyncio.sleep(10 * KafkaIngressConfig.poll_timeout_seconds)
        assert child.poll() is None
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    assert await asyncio.to_thread(committed, bootstrap, topic, group) == {}
    assert len(await tenant_jobs(pool, tenant)) == n

    # A new consumer of the group reads every record again; the inbox knows them all.
    # (Short timeouts: the mock cluster expires the dead member by the joining one's.)
    run = Running(
        ingress_for(
            pool,
            tenant,
            bootstrap,
            topic,
            group,
            session_timeout_ms=6000,
            max_poll_interval_ms=8000,
        )
    )
    await run.caught_up(ends)
    await run.stop()
    assert run.ingress.counts == {"duplicate": n}
    assert len(await tenant_jobs(pool, tenant)) == n
    assert len(await records(pool, tenant)) == n
    by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
    assert by_broker == {p: end for p, end in ends.items() if end > 0}


class SlowInbox(KafkaInbox):
    """Holds one record's inbox transaction until released: it finishes last."""

    def __init__(self, *args: object, slow: tuple[int, int], **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.slow = slow
        self.release = asyncio.Event()

    async def ingest(self, rec: KafkaRecord) -> KafkaIngestResult:
        if (rec.partition, rec.offset) == self.slow:
            await self.release.wait()
        return await super().ingest(rec)


async def test_the_committed_offset_never_passes_an_unfinished_record(
    pool: asyncpg.Pool, bootstrap: str
) -> None:
    tenant = (await new_tenant(pool)).id
    topic, group = names()
    n = 24
    await asyncio.to_thread(produce, bootstrap, topic, [submission(i) for i in range(n)])
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)
    part = max(ends, key=lambda p: ends[p])
    assert ends[part] >= 4
    slow_offset = 1  # one durable record before it, at least two after it
    inbox = SlowInbox(pool, JobStore(pool), tenant, slow=(part, slow_offset))
    ingress = KafkaIngress(inbox, KafkaIngressConfig(bootstrap, topic, group))
    run = Running(ingress)

    others = {(topic, p): end for p, end in ends.items() if end > 0 and p != part}

    async def held() -> bool:
        """the other partitions committed to their ends, the slow one's up to it"""
        rows = await records(pool, tenant)
        return (
            len(rows) == n - 1
            and all(ingress.commits.get(tp) == end for tp, end in others.items())
            and ingress.commits.get((topic, part)) == slow_offset
        )

    await eventually(held)
    rows = await records(pool, tenant)
    after = [r["kafka_offset"] for r in rows if r["kafka_partition"] == part]
    # Later records of the partition are durable, yet the commit waits at the slow one.
    assert [o for o in after if o > slow_offset] == list(range(slow_offset + 1, ends[part]))
    for _ in range(5):  # several more poll-and-commit turns change nothing
        await asyncio.sleep(ingress.config.poll_timeout_seconds)
        assert ingress.commits[(topic, part)] == slow_offset
    by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
    assert by_broker[part] == slow_offset

    inbox.release.set()
    await run.caught_up(ends)
    await run.stop()
    assert ingress.counts == {"accepted": n}
    assert len(await tenant_jobs(pool, tenant)) == n
    by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
    assert by_broker == {p: end for p, end in ends.items() if end > 0}


async def test_the_fenceline_command_applies_the_intakes_limits_and_stops_on_sigterm(
    pool: asyncpg.Pool, dsn: str, bootstrap: str
) -> None:
    tenant = await new_tenant(pool)
    topic, group = names()
    values = [submission(i) for i in range(5)]
    values.append(json.dumps({"document": {"text": "x" * 300}}).encode())  # over the limit
    await asyncio.to_thread(produce, bootstrap, topic, values)
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)
    command = ["kafka-ingress", "--bootstrap", bootstrap, "--topic", topic, "--group", group]
    command += ["--metrics-port", "0"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cluster.cli",
        "--database-url",
        dsn,
        *command,
        "--tenant",
        tenant.name,
        cwd=REPO,
        env={**os.environ, "FENCELINE_MAX_DOCUMENT_BYTES": "200"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )

    async def caught_up() -> bool:
        """the command committed every partition to its end"""
        got = await asyncio.to_thread(committed, bootstrap, topic, group)
        return got == {p: end for p, end in ends.items() if end > 0}

    seen: list[str] = []
    try:
        assert process.stdout is not None
        while not seen or "metrics on port" not in seen[-1]:
            line = await asyncio.wait_for(process.stdout.readline(), 60)
            assert line, "".join(seen)
            seen.append(line.decode())
        port = int(seen[-1].rsplit(" ", 1)[1])
        await eventually(caught_up)
        async with httpx.AsyncClient() as client:
            scraped = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 60)
    output = "".join(seen).encode() + output
    assert process.returncode == 0, output.decode()
    assert 'fenceline_kafka_ingress_records_total{outcome="accepted"} 5.0' in scraped
    assert 'fenceline_kafka_ingress_records_total{outcome="refused"} 1.0' in scraped
    assert "stopped; {'accepted': 5, 'refused': 1}" in output.decode()
    assert len(await tenant_jobs(pool, tenant.id)) == 5
    refused = [r for r in await records(pool, tenant.id) if r["outcome"] == "refused"]
    assert [r["reason"] for r in refused] == ["document_over_limit:document_bytes"]


def text_of(i: int) -> str:
    value = json.loads(submission(i))
    return str(value["document"]["text"])


async def test_a_tenant_at_its_pending_jobs_quota_holds_the_record_until_a_job_settles(
    pool: asyncpg.Pool, bootstrap: str
) -> None:
    tenant = await new_tenant(pool, max_pending_jobs=1)
    # The quota's one pending job, under the key a producer's retry of it names.
    store = JobStore(pool)
    blocker = await store.accept(
        AcceptRequest(tenant_id=tenant.id, idempotency_key="erp-0", document=DocumentIn(text_of(0)))
    )
    topic, group = names()
    values = [submission(0, idempotency_key="erp-0"), submission(1)]
    await asyncio.to_thread(produce, bootstrap, topic, values)
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)
    # Retry-after is the quota's 30 s; the hold is capped far below it for the test.
    inbox = KafkaInbox(pool, store, tenant.id)
    ingress = KafkaIngress(
        inbox,
        KafkaIngressConfig(bootstrap, topic, group, lag_sample_seconds=0.05),
        retry_seconds=0.05,
        max_hold_seconds=0.2,
    )
    run = Running(ingress)

    async def held() -> bool:
        """the new record refused by the quota and tried again, the replay recorded"""
        if run.task.done():
            run.task.result()
        return (
            ingress.held_reasons["quota_pending_jobs"] >= 3
            and len(await records(pool, tenant.id)) == 1
        )

    await eventually(held)
    # The replay of the accepted job went through at the quota; the new record did not.
    rows = await records(pool, tenant.id)
    assert [(r["outcome"], r["job_id"]) for r in rows] == [("replayed", blocker.job_id)]
    assert await tenant_jobs(pool, tenant.id) == ["erp-0"]
    replayed = (rows[0]["kafka_partition"], rows[0]["kafka_offset"])
    positions = [(p, o) for p, end in ends.items() for o in range(end)]
    [(hp, ho)] = [pos for pos in positions if pos != replayed]
    # Its partition is paused, and no commit passes it, here or at the broker.
    assert ingress.held_partitions == {(topic, hp)}
    assert ingress.commits.get((topic, hp), 0) <= ho
    for _ in range(3):
        await asyncio.sleep(ingress.config.poll_timeout_seconds)
        by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
        assert by_broker.get(hp, 0) <= ho
    assert ingress.counts[HELD] == sum(ingress.held_reasons.values())
    assert "accepted" not in ingress.counts
    refusals = "fenceline_kafka_ingress_admission_refusals_total"
    assert (metric(ingress, refusals, reason="quota_pending_jobs") or 0) >= 3

    async def lag_shown() -> bool:
        """the held record counted as lag of its partition, and the partition as held"""
        return (lags(ingress, ends)[hp] or 0) >= 1 and (
            metric(ingress, "fenceline_kafka_ingress_held_partitions") == 1
        )

    await eventually(lag_shown)

    # The blocking job settles: the quota frees and the held record is accepted.
    await cancel_job(pool, tenant.id, blocker.job_id, CancelRequest("test"))
    await run.caught_up(ends)

    async def lag_gone() -> bool:
        """no lag and no held partition once the record went through"""
        return lags(ingress, ends) == {p: 0.0 for p in ends} and (
            metric(ingress, "fenceline_kafka_ingress_held_partitions") == 0
        )

    await eventually(lag_gone)
    await run.stop()
    assert ingress.counts["accepted"] == 1 and ingress.counts["replayed"] == 1
    assert ingress.held_partitions == set()
    assert await tenant_jobs(pool, tenant.id) == sorted(["erp-0", f"kafka:{topic}:{hp}:{ho}"])
    by_broker = await asyncio.to_thread(committed, bootstrap, topic, group)
    assert by_broker == {p: end for p, end in ends.items() if end > 0}


async def test_spend_is_reserved_at_acceptance_as_the_rest_intake_reserves_it(
    pool: asyncpg.Pool, dsn: str, bootstrap: str
) -> None:
    rest = await tenant_with_key(pool)
    async with asgi_client(create_app(settings_for(dsn), pool=pool)) as client:
        r = await client.post(
            "/v1/extraction-jobs",
            json={"document": {"text": text_of(3)}},
            headers={**rest.headers, "Idempotency-Key": "rest-3"},
        )
    assert r.status_code == 202, r.text
    tenant = (await new_tenant(pool)).id
    topic, group = names()
    await asyncio.to_thread(produce, bootstrap, topic, [submission(3)])
    ends = await asyncio.to_thread(end_offsets, bootstrap, topic)
    run = Running(ingress_for(pool, tenant, bootstrap, topic, group))
    await run.caught_up(ends)
    await run.stop()
    [row] = await records(pool, tenant)
    assert row["outcome"] == "accepted"

    async with pool.acquire() as conn:
        reserved = {
            who: await conn.fetchval(
                "SELECT amount FROM spend_reservations WHERE job_id = $1", job_id
            )
            for who, job_id in (("rest", uuid.UUID(r.json()["job_id"])), ("kafka", row["job_id"]))
        }
        spent = {
            who: await conn.fetchval(
                "SELECT reserved FROM tenant_spend WHERE tenant_id = $1", tenant_id
            )
            for who, tenant_id in (("rest", rest.tenant.id), ("kafka", tenant))
        }
        tokens = await conn.fetchval(
            "SELECT estimated_tokens FROM extraction_jobs WHERE id = $1", row["job_id"]
        )
    assert reserved["kafka"] is not None and reserved["kafka"] > 0
    assert reserved["kafka"] == reserved["rest"]
    assert spent["kafka"] == spent["rest"] == reserved["rest"]
    assert tokens > 0
