"""An ingress consumer in its own process that stops dead after the inbox commit.

``python -m tests.support.inbox_child '<settings json>'`` consumes the work queue;
after the first inbox transaction commits it prints ``COMMITTED <event_id>``
and blocks before the ack, so the parent can SIGKILL it in exactly the window
between commit and ack that the spec asks to test.
"""

from __future__ import annotations

import asyncio
import json
import sys

from prometheus_client import CollectorRegistry

from pipeline.database import create_pool
from pipeline.messaging import BrokerMetrics, InboxConsumer, IngestResult
from pipeline.settings import Settings


async def main(settings: Settings) -> None:
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    never = asyncio.Event()

    async def stall(result: IngestResult) -> None:
        print(f"COMMITTED {result.event_id} {result.outcome}", flush=True)
        await never.wait()  # the ack never happens; SIGKILL ends us here

    consumer = InboxConsumer(
        pool, settings, after_commit=stall, metrics=BrokerMetrics(CollectorRegistry())
    )
    await consumer.start()
    print("READY", flush=True)
    await never.wait()


if __name__ == "__main__":
    asyncio.run(main(Settings(**json.loads(sys.argv[1]))))
