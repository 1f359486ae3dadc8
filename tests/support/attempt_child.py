"""A driver in its own process that claims one job and calls a (slow) provider.

``python -m tests.support.attempt_child DSN PROVIDER_URL WORKER LEASE_SECONDS``
claims one job, prints ``CLAIMED <job_id> <fence>`` and runs the attempt against
the provider at ``PROVIDER_URL``; the parent SIGKILLs it mid-attempt, so the
attempt's span never ends and nothing of this process reaches any exporter.
"""

from __future__ import annotations

import asyncio
import sys

from pipeline.database import create_pool
from pipeline.extraction import OpenAICompatibleEngine
from pipeline.jobs import JobStore
from pipeline.settings import Settings
from pipeline.worker import AttemptRunner, WorkerConfig


async def main(dsn: str, provider: str, worker: str, lease_seconds: float) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=2)
    store = JobStore(pool, Settings(lease_seconds=lease_seconds))
    (lease,) = await store.claim(worker, lease_seconds=lease_seconds)
    print(f"CLAIMED {lease.job_id} {lease.fence}", flush=True)
    async with OpenAICompatibleEngine(provider, "fake-model") as engine:
        cfg = WorkerConfig(worker_id=worker, max_output_tokens=2048, heartbeat_seconds=0.5)
        await AttemptRunner(store, engine, cfg).run(lease)
    print("FINISHED", flush=True)  # never reached: the parent kills us mid-call


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
