"""What the chaos scenario may ask of an actor it faults: its process id, and a crash
point armed in that process (:mod:`pipeline.checkpoints`; refused unless
``Settings.fault_injection`` is on, which it is only in the chaos stack)."""

from __future__ import annotations

import os

from pipeline import checkpoints
from pipeline.settings import Settings


class CrashPoints:
    """Mixed into the task driver, maintenance and delivery actors."""

    settings: Settings

    def pid(self) -> int:
        return os.getpid()

    def arm(self, point: str, action: str = checkpoints.KILL) -> int:
        """Crash (or, ``action="stop"``, pause) this process at ``point``; returns the
        process id."""
        checkpoints.arm(point, enabled=self.settings.fault_injection, action=action)
        return os.getpid()
