"""The worker: one attempt of one job end to end, and the loop that keeps a driver busy.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.worker.attempt import AttemptRunner
from pipeline.worker.contracts import WorkerConfig
from pipeline.worker.loop import DriverLoop

__all__ = [
    "AttemptRunner",
    "DriverLoop",
    "WorkerConfig",
]
