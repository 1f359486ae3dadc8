"""The worker: one attempt of one job end to end (what an answer means: extraction
grounds it, validation checks it), the loop that keeps a driver busy, and the
autoscaler that decides how many drivers run.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import WorkerConfig
from pipeline.worker.fleet import DriverAutoscaler, DriverFleet, LocalDriverFleet
from pipeline.worker.interpretation import Interpretation, interpret
from pipeline.worker.loop import DrainReport, DriverLoop
from pipeline.worker.ocr_proof import OcrConfidences
from pipeline.worker.scaling import (
    ScalingConfig,
    ScalingDecision,
    ScalingSignal,
    ScalingState,
    best_headroom,
    decide,
    headroom,
)

__all__ = [
    "AttemptRunner",
    "DrainReport",
    "DriverAutoscaler",
    "DriverFleet",
    "DriverLoop",
    "Interpretation",
    "LocalDriverFleet",
    "OcrConfidences",
    "ScalingConfig",
    "ScalingDecision",
    "ScalingSignal",
    "ScalingState",
    "WorkerConfig",
    "best_headroom",
    "decide",
    "headroom",
    "interpret",
]
