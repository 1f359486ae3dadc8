"""The spec's capacity model as a calculator (``python -m benchmarks.capacity``).

Also ``fenceline capacity``.

It only formats :mod:`pipeline.admission.limits` (the single implementation of
the formulas, which admission is configured from): attempt capacity is the
tightest of RPM, TPM and Little's-law concurrency; job capacity divides by
attempts per job; drain time is backlog over net capacity. The numbers are
steady-state approximations (section 3 of the spec): bursts, token spread and
latency tails move real completion times, which is why the ``burst2000``
benchmark scenario compares this prediction with a measured drain.

Example (the spec's worked example)::

    python -m benchmarks.capacity --rpm 600 --tpm 600000 --reserved-tokens 6000 \\
        --concurrency 30 --mean-service 15 --attempts-per-job 1.1 \\
        --backlog 10000 --arrival-rate 1
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import Any

from pipeline.admission import (
    attempt_capacity,
    drain_seconds,
    job_capacity,
    littles_law_concurrency,
)


@dataclass(frozen=True)
class CapacityInputs:
    """The limits and workload the model needs. ``inf`` means "not a limit"."""

    rpm: float = math.inf
    tpm: float = math.inf
    reserved_tokens: float = 1.0
    concurrency: float = math.inf
    mean_service_seconds: float = 1.0
    attempts_per_job: float = 1.0
    backlog: float = 0.0
    arrival_rate: float = 0.0


@dataclass(frozen=True)
class CapacityReport:
    """What the model predicts for :class:`CapacityInputs`."""

    attempt_capacity: float
    job_capacity: float
    bound_by: str
    drain_seconds: float
    drain_seconds_with_arrivals: float
    littles_law_concurrency: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def predict(inputs: CapacityInputs) -> CapacityReport:
    """Apply the formulas; ``bound_by`` names the limit that sets attempt capacity."""
    bounds = {
        "rpm": inputs.rpm / 60.0,
        "tpm": inputs.tpm / (60.0 * inputs.reserved_tokens),
        "concurrency": inputs.concurrency / inputs.mean_service_seconds,
    }
    attempts = attempt_capacity(
        rpm=inputs.rpm,
        tpm=inputs.tpm,
        reserved_tokens=inputs.reserved_tokens,
        concurrency=inputs.concurrency,
        mean_service_seconds=inputs.mean_service_seconds,
    )
    jobs = job_capacity(attempts, inputs.attempts_per_job)
    return CapacityReport(
        attempt_capacity=attempts,
        job_capacity=jobs,
        bound_by=min(bounds, key=lambda k: bounds[k]),
        drain_seconds=drain_seconds(inputs.backlog, jobs),
        drain_seconds_with_arrivals=drain_seconds(inputs.backlog, jobs, inputs.arrival_rate),
        littles_law_concurrency=littles_law_concurrency(
            inputs.arrival_rate * inputs.attempts_per_job, inputs.mean_service_seconds
        ),
    )


def render(inputs: CapacityInputs, report: CapacityReport) -> str:
    """A few lines for a terminal."""

    def dur(s: float) -> str:
        if math.isinf(s):
            return "never (arrivals >= capacity)"
        return f"{s:,.1f} s ({s / 60:,.1f} min)"

    return "\n".join(
        [
            f"attempt capacity   {report.attempt_capacity:,.4f} attempts/s"
            f"  (bound by {report.bound_by})",
            f"job capacity       {report.job_capacity:,.4f} jobs/s"
            f"  ({inputs.attempts_per_job:g} attempts/job)",
            f"drain {inputs.backlog:,.0f} jobs     {dur(report.drain_seconds)}",
            f"  with {inputs.arrival_rate:g} jobs/s arriving  "
            f"{dur(report.drain_seconds_with_arrivals)}",
            f"Little's law L     {report.littles_law_concurrency:,.2f} attempts in flight"
            " at that arrival rate",
        ]
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The calculator's options (shared by ``fenceline capacity``)."""
    p.add_argument("--rpm", type=float, default=math.inf, help="requests per minute")
    p.add_argument("--tpm", type=float, default=math.inf, help="tokens per minute")
    p.add_argument("--reserved-tokens", type=float, default=1.0, help="reserved tokens/attempt")
    p.add_argument("--concurrency", type=float, default=math.inf, help="concurrent attempts")
    p.add_argument("--mean-service", type=float, default=1.0, help="mean attempt seconds")
    p.add_argument("--attempts-per-job", type=float, default=1.0)
    p.add_argument("--backlog", type=float, default=0.0, help="jobs waiting")
    p.add_argument("--arrival-rate", type=float, default=0.0, help="new jobs per second")


def inputs_from(args: argparse.Namespace) -> CapacityInputs:
    return CapacityInputs(
        rpm=args.rpm,
        tpm=args.tpm,
        reserved_tokens=args.reserved_tokens,
        concurrency=args.concurrency,
        mean_service_seconds=args.mean_service,
        attempts_per_job=args.attempts_per_job,
        backlog=args.backlog,
        arrival_rate=args.arrival_rate,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fenceline capacity model (spec section 3).")
    add_arguments(parser)
    args = parser.parse_args(argv)
    inputs = inputs_from(args)
    if all(math.isinf(v) for v in (inputs.rpm, inputs.tpm, inputs.concurrency)):
        parser.error("give at least one of --rpm, --tpm, --concurrency")
    print(render(inputs, predict(inputs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
