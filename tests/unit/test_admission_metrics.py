"""An admission scope's usage-vs-limit gauges read what the policy enforces, live."""

from __future__ import annotations

import asyncio
import contextlib

from prometheus_client import CollectorRegistry

from cluster.admission import AdmissionActor
from pipeline.admission import AdmissionConfig, AdmissionRequest
from pipeline.usage import Usage


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_usage_and_limits_follow_grants_and_their_settlement() -> None:
    now = [1000.0]
    actor = AdmissionActor(
        AdmissionConfig(
            scope="provider-a", rpm=10, tpm=10_000, max_in_flight=2, max_concurrent_tokens=6_000
        ),
        clock=lambda: now[0],
    )
    r = actor.metrics_registry
    first = await actor.acquire(AdmissionRequest("t1", 2_000, 1_000), timeout=0)
    second = await actor.acquire(AdmissionRequest("t2", 1_500, 500), timeout=0)
    assert not hasattr(first, "reason") and not hasattr(second, "reason")
    usage = {d: sample(r, "fenceline_admission_usage", scope="provider-a", dimension=d) for d in
             ("rpm", "tpm", "permits", "concurrent_tokens")}  # fmt: skip
    assert usage == {"rpm": 2, "tpm": 5_000, "permits": 2, "concurrent_tokens": 5_000}
    limits = {d: sample(r, "fenceline_admission_limit", scope="provider-a", dimension=d) for d in
              ("rpm", "tpm", "permits", "concurrent_tokens")}  # fmt: skip
    assert limits == {"rpm": 10, "tpm": 10_000, "permits": 2, "concurrent_tokens": 6_000}

    # A third acquirer waits on permits: it is counted as queued while it waits.
    waiting = asyncio.create_task(actor.acquire(AdmissionRequest("t3", 10, 10), timeout=30))
    await asyncio.sleep(0.01)
    assert sample(r, "fenceline_admission_queued", scope="provider-a") == 1
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert sample(r, "fenceline_admission_queued", scope="provider-a") == 0

    # Settling with reported usage: the permit and its reservation return, TPM keeps
    # the reported tokens (not the reservation) and RPM keeps the request.
    await actor.release(first, Usage(prompt_tokens=1_800, completion_tokens=200))
    assert sample(r, "fenceline_admission_usage", scope="provider-a", dimension="permits") == 1
    assert (
        sample(r, "fenceline_admission_usage", scope="provider-a", dimension="concurrent_tokens")
        == 2_000
    )
    assert sample(r, "fenceline_admission_usage", scope="provider-a", dimension="tpm") == 4_000
    assert sample(r, "fenceline_admission_usage", scope="provider-a", dimension="rpm") == 2

    # A 429 cooldown shows; the sliding window empties 60 s after the last settlement.
    await actor.cooldown(7.0)
    assert sample(r, "fenceline_admission_cooldown_seconds", scope="provider-a") == 7.0
    await actor.release(second, Usage(prompt_tokens=1_500, completion_tokens=100))
    now[0] += 61
    assert sample(r, "fenceline_admission_usage", scope="provider-a", dimension="tpm") == 0
    assert sample(r, "fenceline_admission_cooldown_seconds", scope="provider-a") == 0
    await actor.stop()


async def test_an_unenforced_dimension_has_usage_but_no_limit() -> None:
    actor = AdmissionActor(AdmissionConfig(scope="engine-short", max_concurrent_tokens=20_970))
    r = actor.metrics_registry
    await actor.acquire(AdmissionRequest("t", 100, 50), timeout=0)
    assert sample(r, "fenceline_admission_usage", scope="engine-short", dimension="tpm") == 150
    assert sample(r, "fenceline_admission_limit", scope="engine-short", dimension="tpm") is None
    assert (
        sample(r, "fenceline_admission_limit", scope="engine-short", dimension="concurrent_tokens")
        == 20_970
    )
    await actor.stop()
