"""Admission cost: the pure policy, DRR with a 10,000-request backlog, and the
actor through Ray.

Run: ``python -m benchmarks.load.admission_bench [--cycles 100000] [--ray]``

* ``policy``: try_acquire + release cycles per second of one in-process
  :class:`~pipeline.admission.policy.AdmissionPolicy` (8 tenants, usage reconciled).
* ``drr``: tenant A queues 10,000 requests, then tenant B one; dispatch with 50
  permits, releasing the oldest grant per round. Reports grants/s and B's position
  (the fairness claim: B does not wait behind A's backlog).
* ``ray`` (opt-in, starts a private local Ray cluster): sequential acquire and
  release round trips through :class:`~cluster.admission.AdmissionClient`
  (p50/p99), and grants/s with 64 concurrent callers on 16 permits.

Prints one JSON object; numbers from a shared 2-core machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from typing import Any

from pipeline.admission import AdmissionConfig, AdmissionPolicy, AdmissionRequest, Grant
from pipeline.usage import Usage


def _quantile_ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[max(0, int(q * len(ordered)) - 1)] * 1000, 2)


def bench_policy(cycles: int) -> dict[str, Any]:
    cfg = AdmissionConfig(
        scope="bench", rpm=10**9, tpm=10**12, max_in_flight=64, tenant_max_in_flight=16
    )
    policy = AdmissionPolicy(cfg)
    started = time.perf_counter()
    for i in range(cycles):
        grant = policy.try_acquire(AdmissionRequest(f"t{i % 8}", 1000, 500))
        assert isinstance(grant, Grant)
        policy.release(grant, Usage(900, 300))
    elapsed = time.perf_counter() - started
    per_cycle_us = round(elapsed / cycles * 1e6, 1)
    return {"cycles_per_s": round(cycles / elapsed), "us_per_cycle": per_cycle_us}


def bench_drr(backlog: int = 10_000, permits: int = 50) -> dict[str, Any]:
    policy = AdmissionPolicy(AdmissionConfig(scope="bench", max_in_flight=permits))
    for _ in range(backlog):
        policy.submit(AdmissionRequest("A", 600, 400))
    policy.submit(AdmissionRequest("B", 600, 400))
    order: list[str] = []
    held: list[Grant] = []
    started = time.perf_counter()
    while policy.queued:
        for ticket in policy.dispatch():
            assert ticket.grant is not None
            order.append(ticket.grant.tenant)
            held.append(ticket.grant)
        grant = held.pop(0)
        policy.release(grant, Usage(500, 300))
    elapsed = time.perf_counter() - started
    return {
        "grants": len(order),
        "grants_per_s": round(len(order) / elapsed),
        "b_position": order.index("B"),
    }


async def _bench_ray_async(sequential: int) -> dict[str, Any]:
    from cluster.admission import AdmissionClient, actor_name, admission_actor

    scope = f"bench-{uuid.uuid4().hex[:6]}"
    cfg = AdmissionConfig(scope=scope, max_in_flight=16)
    handle = admission_actor(actor_name(scope), cfg, detached=False)
    await handle.start.remote()
    client = AdmissionClient(handle, scope=scope)
    acquire_s: list[float] = []
    release_s: list[float] = []
    for _ in range(sequential):
        t0 = time.perf_counter()
        grant = await client.acquire(AdmissionRequest("t", 100, 100), timeout=5)
        t1 = time.perf_counter()
        assert isinstance(grant, Grant)
        await client.release(grant, Usage(50, 50))
        acquire_s.append(t1 - t0)
        release_s.append(time.perf_counter() - t1)

    async def caller() -> None:
        for _ in range(20):
            grant = await client.acquire(AdmissionRequest("t", 100, 100), timeout=30)
            assert isinstance(grant, Grant)
            await asyncio.sleep(0.005)
            await client.release(grant, Usage(50, 50))

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(64)))
    elapsed = time.perf_counter() - started
    return {
        "acquire_p50_ms": _quantile_ms(acquire_s, 0.5),
        "acquire_p99_ms": _quantile_ms(acquire_s, 0.99),
        "release_p50_ms": _quantile_ms(release_s, 0.5),
        "release_p99_ms": _quantile_ms(release_s, 0.99),
        "concurrent_grants_per_s": round(64 * 20 / elapsed),
    }


def bench_ray(sequential: int = 500) -> dict[str, Any]:
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100_000_000,
        log_to_driver=False,
    )
    try:
        return asyncio.run(_bench_ray_async(sequential))
    finally:
        ray.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--cycles", type=int, default=100_000)
    p.add_argument("--ray", action="store_true", help="also measure the actor through Ray")
    args = p.parse_args()
    result: dict[str, Any] = {"policy": bench_policy(args.cycles), "drr": bench_drr()}
    if args.ray:
        result["ray"] = bench_ray()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
