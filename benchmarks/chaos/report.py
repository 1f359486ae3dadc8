"""What a chaos run reports: recovery per fault, the timeline PNG and a one-screen summary."""

from __future__ import annotations

import argparse
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from benchmarks.chaos.faults import FaultRecord
from benchmarks.chaos.oracle import OracleReport

#: Backlog within this many jobs (or 20 % of the level before the fault) counts as caught up.
RECOVERY_SLACK_JOBS = 3
#: The settle rate is read over windows of this many seconds (samples come every 0.5 s).
RATE_WINDOW_S = 3.0
#: Throughput has recovered when the settle rate reaches this share of the offered rate.
STEADY_SHARE = 0.8


def _backlog(sample: dict[str, float]) -> float:
    return sample["accepted"] - sample["settled"]


def _settle_rate(samples: list[dict[str, float]], i: int) -> float:
    """Jobs settled per second over the window of ``RATE_WINDOW_S`` ending at sample ``i``."""
    end = samples[i]
    start = next(
        (s for s in reversed(samples[:i]) if end["t"] - s["t"] >= RATE_WINDOW_S), samples[0]
    )
    span = end["t"] - start["t"]
    return (end["settled"] - start["settled"]) / span if span > 0 else 0.0


def recovery_times(
    faults: list[FaultRecord], samples: list[dict[str, float]], offered_rate: float
) -> list[dict[str, Any]]:
    """Per fault, seconds from its end until the system recovered, two ways:

    - ``recovery_s`` (the issue's "back to steady throughput"): the settle rate over the
      last ``RATE_WINDOW_S`` is at least ``STEADY_SHARE`` of the open loop's offered
      rate — in a steady open-loop run settles per second equal arrivals per second —
      or there is no backlog left to settle (caught up, below).
    - ``catch_up_s`` (stricter): the backlog (accepted, not settled) is back to its level
      when the fault began, i.e. the work that piled up meanwhile is done too. How long
      that takes depends on how much spare capacity the run has over its arrivals, not
      only on the fault.

    None when it did not happen within the run."""
    out = []
    for f in faults:
        before = [s for s in samples if s["t"] <= f.start_s]
        base = _backlog(before[-1]) if before else 0.0
        slack = max(RECOVERY_SLACK_JOBS, 0.2 * base)
        after = [i for i, s in enumerate(samples) if s["t"] >= f.end_s]
        caught = next(
            (samples[i]["t"] for i in after if _backlog(samples[i]) <= base + slack), None
        )
        steady = next(
            (
                samples[i]["t"]
                for i in after
                if _settle_rate(samples, i) >= STEADY_SHARE * offered_rate
                or _backlog(samples[i]) <= base + slack
            ),
            None,
        )
        out.append(
            {
                "kind": f.kind,
                "start_s": round(f.start_s, 2),
                "end_s": round(f.end_s, 2),
                "backlog_before": base,
                "recovery_s": None if steady is None else round(max(0.0, steady - f.end_s), 2),
                "catch_up_s": None if caught is None else round(max(0.0, caught - f.end_s), 2),
            }
        )
    return out


def within(recovery: list[dict[str, Any]], key: str, seconds: float) -> int:
    """How many faults recovered (``key``: ``recovery_s`` or ``catch_up_s``) within ``seconds``."""
    return sum(1 for r in recovery if r[key] is not None and r[key] <= seconds)


def write_timeline(path: Path, result: dict[str, Any]) -> Path:
    """Throughput, backlog and jobs per state over time, with each fault as a band."""
    samples = result["samples"]
    ts = [s["t"] for s in samples]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    rate = [0.0] + [
        (b["settled"] - a["settled"]) / max(b["t"] - a["t"], 1e-6) for a, b in pairwise(samples)
    ]
    ax1.plot(ts, rate, label="settled / s", color="black", lw=0.8)
    ax1.plot(ts, [_backlog(s) for s in samples], label="backlog (accepted - settled)", color="C3")
    ax1.set_ylabel("jobs")
    ax1.legend(loc="upper right")
    ax1.set_title(
        f"chaos: {result['invoices']} invoices, seed {result['seed']}, "
        f"oracle {'PASS' if result['oracle']['ok'] else 'FAIL'}"
    )
    for key in ("ready", "retry_scheduled", "running", "succeeded", "review_required",
                "failed_terminal", "delivered"):  # fmt: skip
        ax2.plot(ts, [s[key] for s in samples], label=key, lw=1)
    ax2.set_ylabel("jobs / deliveries")
    ax2.set_xlabel("seconds since the first submission")
    ax2.legend(loc="upper left", fontsize=7, ncol=2)
    kinds = sorted({f["kind"] for f in result["faults"]})
    colors = {k: plt.get_cmap("tab20")(i % 20) for i, k in enumerate(kinds)}
    for f in result["faults"]:
        end = max(f["end_s"], f["start_s"] + 0.3)
        for ax in (ax1, ax2):
            ax.axvspan(f["start_s"], end, color=colors[f["kind"]], alpha=0.35, lw=0)
    handles = [Rectangle((0, 0), 1, 1, color=colors[k], alpha=0.5) for k in kinds]
    fig.legend(handles, kinds, loc="lower center", ncol=4, fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summarise(result: dict[str, Any], oracle: OracleReport) -> str:
    """The one-screen summary: load, faults and recovery, latency, retries, the oracle."""
    m = result["metrics"]
    lat = m["completion_latency_s"]
    rt = m["retries_per_job"]
    lines = [
        f"chaos run ({result.get('stack_kind', 'harness')} stack): {result['invoices']} "
        f"invoices, seed {result['seed']}, drained {'yes' if result['drained'] else 'NO'}",
        f"accepted {m['accepted']}, rejected {m['rejected'] or 0}",
        f"completion latency p50 {lat['p50']:.2f}s p99 {lat['p99']:.2f}s max {lat['max']:.2f}s",
        f"retries per job: mean {rt['mean']:.2f}, max {rt['max']}, {rt['jobs_retried']} jobs "
        f"retried; uncertain attempts {m['uncertain_attempts']}; late results discarded "
        f"{m['late_results_discarded']}",
        f"outbox: peak {m['outbox_unpublished_peak']['events']} unpublished events at "
        f"{m['outbox_unpublished_peak']['at_s']}s",
        f"faults (lease {m['lease_s']}s; offered {m.get('offered_rate_per_s', 0):.2f} jobs/s; "
        f"throughput back within two leases: {m['recovered_within_two_leases']}/"
        f"{len(m['recovery_s'])}; backlog caught up within two leases: "
        f"{m.get('caught_up_within_two_leases', '-')}/{len(m['recovery_s'])}):",
    ]
    for f, r in zip(result["faults"], m["recovery_s"], strict=True):
        rec = "not recovered" if r["recovery_s"] is None else f"recovered {r['recovery_s']:.1f}s"
        caught = r.get("catch_up_s")
        up = "never caught up" if caught is None else f"caught up {caught:.1f}s"
        flag = "" if f["triggered"] else " [NOT TRIGGERED]"
        lines.append(
            f"  {f['start_s']:6.1f}s  {f['kind']:<26} {rec:<18} {up:<19} {f['detail']}{flag}"
        )
    restarts = m.get("supervised", {}).get("restarts", [])
    if restarts:
        lines.append("restarts left to the runtime supervisor (s after the kill):")
    for r in restarts:
        started = r["supervisor_start_s"]
        lines.append(
            f"  {r['member']:<24} Ray restarted it {r['ray_restart_s']:.1f}s, supervisor "
            + ("never started it" if started is None else f"started it {started:.1f}s")
        )
    lines.append(oracle.render())
    return "\n".join(lines)


def rescore(result: dict[str, Any]) -> dict[str, Any]:
    """Recovery figures of a stored ``chaos.json`` read again with the rules above (runs
    written before ``recovery_s`` measured throughput carry only the backlog figure)."""
    faults = [FaultRecord(**f) for f in result["faults"]]
    samples = result["samples"]
    rate = result["metrics"].get("offered_rate_per_s")
    if rate is None:  # older runs: the open loop spread every invoice over the arrivals
        arrivals = max((s["t"] for s in samples if s["accepted"] < result["invoices"]), default=0)
        rate = result["invoices"] / max(arrivals, 1e-6)
    recovery = recovery_times(faults, samples, rate)
    lease = result["metrics"]["lease_s"]
    return {
        "offered_rate_per_s": round(rate, 3),
        "recovery_s": recovery,
        "recovered_within_two_leases": within(recovery, "recovery_s", 2 * lease),
        "caught_up_within_two_leases": within(recovery, "catch_up_s", 2 * lease),
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.chaos.report RESULT.json``: print a run's recovery figures."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("result", type=Path)
    args = parser.parse_args(argv)
    figures = rescore(json.loads(args.result.read_text()))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
