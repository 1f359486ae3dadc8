"""PNG plots of a run: latency CDFs, backlog and throughput over time, per-tenant completion."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.report import bar_plot


def write_plots(out_dir: Path, result: dict[str, Any]) -> list[Path]:
    """Latency CDFs, backlog and throughput over time, per-tenant completion."""
    paths: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, key in (
        ("acceptance", "acceptance_latencies_s"),
        ("completion", "completion_latencies_s"),
        ("ERP delivery", "delivery_latencies_s"),
    ):
        values = sorted(result.get(key) or [])
        if values:
            ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (acceptance: send to 202; others: 202 to settled / delivered)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("Latency CDF")
    ax.legend()
    paths.append(_save(fig, out_dir / "latency_cdf.png"))

    samples = result["samples"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ts = [s["t"] for s in samples]
    ax.plot(ts, [s["runnable"] for s in samples], label="runnable")
    ax.plot(ts, [s["running"] for s in samples], label="running")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("jobs")
    ax2 = ax.twinx()
    ax2.plot(ts, [s["oldest_runnable_age_s"] for s in samples], "k:", label="oldest age (s)")
    ax2.set_ylabel("oldest runnable age (s)")
    ax.set_title("Backlog over time")
    ax.legend(loc="upper left")
    paths.append(_save(fig, out_dir / "backlog.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    finishes = result["finish_times_s"]
    if finishes:
        width = max(1.0, math.ceil(finishes[-1] / 60))
        bins = [i * width for i in range(int(finishes[-1] // width) + 2)]
        ax.hist(finishes, bins=bins, weights=[1 / width] * len(finishes))
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("settled jobs / s")
    ax.set_title("Throughput over time")
    paths.append(_save(fig, out_dir / "throughput.png"))

    names = list(result["tenants"])
    paths.append(
        bar_plot(
            out_dir,
            "tenant_completion",
            "Completed jobs per tenant",
            names,
            [float(result["tenants"][n]["completed"]) for n in names],
            "jobs",
        )
    )
    ratios = result.get("baselines", {}).get("headline", {})
    if ratios:
        labels = list(ratios)
        paths.append(
            bar_plot(
                out_dir,
                "baseline_ratios",
                "Baselines: Fenceline / baseline (1.0 = same)",
                labels,
                [float(ratios[k]) for k in labels],
                "ratio",
            )
        )
    return paths


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
