"""Shared report writing for benchmarks: one JSON file and PNG plots per run."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "at": datetime.now(UTC).isoformat(),
    }


def write_json(out_dir: Path, name: str, data: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2, default=str))
    return path


def bar_plot(
    out_dir: Path, name: str, title: str, labels: list[str], values: list[float], ylabel: str
) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(labels, values, color=["#4c72b0", "#dd8452", "#55a868", "#c44e52"][: len(values)])
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    for i, v in enumerate(values):
        ax.annotate(f"{v:.1f}", (i, v), ha="center", va="bottom")
    fig.tight_layout()
    path = out_dir / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]
