"""Crash points: inert unless armed, armed only with fault injection on, and then a SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from pipeline import checkpoints


def test_a_disarmed_point_does_nothing() -> None:
    checkpoints.disarm()
    checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)


def test_arming_needs_fault_injection_and_a_known_point() -> None:
    with pytest.raises(PermissionError):
        checkpoints.arm(checkpoints.ATTEMPT_ANSWERED, enabled=False)
    with pytest.raises(ValueError, match="unknown checkpoint"):
        checkpoints.arm("attempt.somewhere", enabled=True)


def test_an_armed_point_kills_the_process_when_reached() -> None:
    code = (
        "from pipeline import checkpoints\n"
        "checkpoints.arm(checkpoints.RELAY_CONFIRMED, enabled=True)\n"
        "checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)\n"
        "print('other points pass', flush=True)\n"
        "checkpoints.reached(checkpoints.RELAY_CONFIRMED)\n"
        "print('not reached')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    assert out.stdout == "other points pass\n"
