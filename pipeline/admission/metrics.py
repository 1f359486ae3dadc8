"""An admission scope's usage against its limits, as Prometheus gauges.

Why: "TPM near its limit" is the signal that the provider's budget, not the
engines or the drivers, is what bounds throughput (spec section 3: the
capacity is the tightest of RPM, TPM and concurrency). The policy already
holds every number; this collector reads them at collection time from
:meth:`AdmissionPolicy.snapshot`, so a gauge can never be stale or drift from
what admission enforces.

Series (labels: ``scope`` — one per provider project or engine — and
``dimension``; no tenant, job or grant ids):

* ``fenceline_admission_usage{scope,dimension}``: ``rpm`` request slots and
  ``tpm`` charged tokens in the sliding window, ``tpd`` those of the last day,
  ``permits`` open grants, ``concurrent_tokens`` tokens reserved by open grants;
* ``fenceline_admission_limit{scope,dimension}``: the configured limit of each
  dimension the scope enforces (absent when the limit is ``None``), so
  ``usage / limit`` is the utilisation an alert compares to a threshold;
* ``fenceline_admission_queued{scope}``: acquirers waiting for a grant;
* ``fenceline_admission_cooldown_seconds{scope}``: what remains of a shared
  429 cooldown (0 when none).

The collector runs on the thread that collects the registry; the actor's
metrics bridge collects on the actor's own event loop, the policy's one owner.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pipeline.admission.policy import AdmissionPolicy

#: (dimension label, snapshot field of its usage, config field of its limit)
DIMENSIONS = (
    ("rpm", "window_requests", "rpm"),
    ("tpm", "window_tokens", "tpm"),
    ("tpd", "day_tokens", "tpd"),
    ("permits", "in_flight", "max_in_flight"),
    ("concurrent_tokens", "in_flight_tokens", "max_concurrent_tokens"),
)


class AdmissionUsageCollector(Collector):
    """The usage-vs-limit gauges of one scope's policy (module docstring)."""

    def __init__(self, policy: AdmissionPolicy) -> None:
        self.policy = policy

    def collect(self) -> Iterator[Metric]:
        snap = self.policy.snapshot()
        config = self.policy.config
        usage = GaugeMetricFamily(
            "fenceline_admission_usage",
            "Admission usage of a scope: rpm/tpm in the sliding window, open permits and "
            "their reserved tokens",
            labels=["scope", "dimension"],
        )
        limit = GaugeMetricFamily(
            "fenceline_admission_limit",
            "The configured limit of each admission dimension a scope enforces",
            labels=["scope", "dimension"],
        )
        for dimension, used, limited in DIMENSIONS:
            usage.add_metric([snap.scope, dimension], float(getattr(snap, used)))
            value = getattr(config, limited)
            if value is not None:
                limit.add_metric([snap.scope, dimension], float(value))
        queued = GaugeMetricFamily(
            "fenceline_admission_queued",
            "Acquirers waiting for an admission grant in a scope",
            labels=["scope"],
        )
        queued.add_metric([snap.scope], float(sum(snap.queued.values())))
        cooldown = GaugeMetricFamily(
            "fenceline_admission_cooldown_seconds",
            "Seconds left of a scope's shared 429 cooldown (0 when none)",
            labels=["scope"],
        )
        cooldown.add_metric([snap.scope], snap.cooldown_remaining)
        yield from (usage, limit, queued, cooldown)


def admission_registry(policy: AdmissionPolicy) -> CollectorRegistry:
    """A registry of its own holding ``policy``'s usage collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AdmissionUsageCollector(policy))
    return registry
