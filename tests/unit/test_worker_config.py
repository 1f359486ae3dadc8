"""A driver's config survives being sent as plain data (the runtime app's config, Ray)."""

from __future__ import annotations

from dataclasses import asdict

from pipeline.extraction import DocumentLimits
from pipeline.worker import WorkerConfig


def test_limits_sent_as_a_mapping_come_back_as_limits() -> None:
    sent = WorkerConfig(worker_id="d", limits=DocumentLimits(max_bytes=1024, cpu_seconds=None))
    back = WorkerConfig(**asdict(sent))
    assert isinstance(back.limits, DocumentLimits)
    assert back == sent
    assert back.limits.max_bytes == 1024 and back.limits.cpu_seconds is None
