"""A Kafka ingress in its own process that stops dead after each inbox transaction.

``python -m tests.support.kafka_child DSN BOOTSTRAP TOPIC GROUP TENANT_ID`` reads the
topic; after each record's inbox transaction commits it prints ``INGESTED partition
offset`` and blocks before the record counts as durable, so no offset is ever
committed. The parent SIGKILLs it in the window between the inbox commit and the
offset commit that the spec asks to test.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from pipeline.database import create_pool
from pipeline.jobs import JobStore
from pipeline.messaging.kafka_inbox import KafkaInbox, KafkaIngestResult, KafkaRecord
from pipeline.messaging.kafka_ingress import KafkaIngress, KafkaIngressConfig


async def main(dsn: str, bootstrap: str, topic: str, group: str, tenant: str) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=4)
    never = asyncio.Event()

    async def stall(rec: KafkaRecord, result: KafkaIngestResult) -> None:
        print(f"INGESTED {rec.partition} {rec.offset} {result.outcome}", flush=True)
        await never.wait()  # never durable, never committed; SIGKILL ends us here

    inbox = KafkaInbox(pool, JobStore(pool), uuid.UUID(tenant))
    config = KafkaIngressConfig(
        bootstrap,
        topic,
        group,
        window=1000,
        # Short, so the group drops this member soon after its SIGKILL (librdkafka's
        # mock cluster holds the next rebalance until then).
        session_timeout_ms=6000,
        max_poll_interval_ms=8000,
    )
    await KafkaIngress(inbox, config, after_ingest=stall).run(never)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
