"""What a chaos run reports: recovery per fault, the timeline PNG and a one-screen summary."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from benchmarks.chaos.faults import FaultRecord
from benchmarks.chaos.oracle import OracleReport

#: Backlog within this many jobs (or 20 % of the level before the fault) counts as recovered.
RECOVERY_SLACK_JOBS = 3


def _backlog(sample: dict[str, float]) -> float:
    return sample["accepted"] - sample["settled"]


def recovery_times(
    faults: list[FaultRecord], samples: list[dict[str, float]]
) -> list[dict[str, Any]]:
    """Per fault: seconds from its end until the backlog (accepted, not settled) is back to
    its level when the fault began — the system has caught up with the open-loop arrivals.
    None when it never got back within the run."""
    out = []
    for f in faults:
        before = [s for s in samples if s["t"] <= f.start_s]
        base = _backlog(before[-1]) if before else 0.0
        slack = max(RECOVERY_SLACK_JOBS, 0.2 * base)
        back = next(
            (s["t"] for s in samples if s["t"] >= f.end_s and _backlog(s) <= base + slack), None
        )
        out.append(
            {
                "kind": f.kind,
                "start_s": round(f.start_s, 2),
                "end_s": round(f.end_s, 2),
                "backlog_before": base,
                "recovery_s": None if back is None else round(max(0.0, back - f.end_s), 2),
            }
        )
    return out


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
        f"faults (lease {m['lease_s']}s; recovered within two leases: "
        f"{m['recovered_within_two_leases']}/{len(m['recovery_s'])}):",
    ]
    for f, r in zip(result["faults"], m["recovery_s"], strict=True):
        rec = "not recovered" if r["recovery_s"] is None else f"recovered {r['recovery_s']:.1f}s"
        flag = "" if f["triggered"] else " [NOT TRIGGERED]"
        lines.append(f"  {f['start_s']:6.1f}s  {f['kind']:<26} {rec:<18} {f['detail']}{flag}")
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
