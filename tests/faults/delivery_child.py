"""A dispatcher in its own process, paused between the ERP's 2xx and its commit.

``python -m tests.faults.delivery_child DSN LEASE_SECONDS`` claims due deliveries,
POSTs them, prints ``RESPONSE <status> <delivery id> <fence>`` once a response
arrived, and then waits (holding the uncommitted outcome) until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

from pipeline.database import create_pool
from pipeline.delivery.claims import Claim
from pipeline.delivery.egress_client import HttpOutcome
from tests.support.delivery import dispatcher_for


async def main(dsn: str, lease_seconds: float) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=2)
    dispatcher = dispatcher_for(pool, lease_seconds=lease_seconds)

    async def pause(claim: Claim, outcome: HttpOutcome) -> None:
        print(f"RESPONSE {outcome.status} {claim.id} {claim.fence}", flush=True)
        await asyncio.sleep(3600)

    dispatcher.after_response = pause
    print("CLAIMING", flush=True)
    await dispatcher.run_once()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
