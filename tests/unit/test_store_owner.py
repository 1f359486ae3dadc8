"""The settle hooks that create deliveries are registered where the store is built.

:func:`pipeline.delivery.job_store` builds the job store as the system runs it;
a bare :class:`pipeline.jobs.JobStore` has no settle hooks, so a success settled
through it creates no ERP delivery (this happened once, silently). Outside the
tests, a bare store may only be built where no job can succeed through it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Where a bare ``JobStore(`` is allowed, and why no success settles through it.
ALLOWED = {
    "pipeline/delivery/deliveries.py": "job_store() itself adds the delivery hook",
    "pipeline/api/context.py": "only when the caller passes its own settle hooks",
    "pipeline/jobs/admin.py": "explain: reads only",
    "cluster/cli/admin.py": "status: reads the backlog only",
    "cluster/drivers.py": "the reaper: expires leases, never settles a success",
    "benchmarks/load/store_bench.py": "claim/complete timing without deliveries",
    "benchmarks/load/broker_bench.py": "broker path timing without deliveries",
    "benchmarks/load/runner.py": "uses job_store() when the scenario delivers",
    "cluster/driver_fleet.py": "the autoscaler: reads the runnable backlog only",
    "benchmarks/load/autoscale_bench.py": "driver scaling timing without deliveries",
    "benchmarks/load/duplicate_check_bench.py": "duplicate-claim timing without deliveries",
    "benchmarks/load/retention_bench.py": "the claim probe: claims only, never settles",
    "cluster/cli/kafka.py": "the Kafka ingress accepts jobs only, never settles one",
}


def test_no_bare_job_store_outside_the_places_that_cannot_forget_deliveries() -> None:
    found: dict[str, int] = {}
    for folder in ("pipeline", "cluster", "deployments", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("pipeline/jobs/") and rel != "pipeline/jobs/admin.py":
                continue  # the store's own package
            count = len(re.findall(r"\bJobStore\(", path.read_text()))
            if count:
                found[rel] = count
    assert set(found) <= set(ALLOWED), sorted(set(found) - set(ALLOWED))
    assert found, "the scan found no store construction at all: the pattern is stale"
