"""Crash points: inert unless armed, armed only with fault injection on, then a SIGKILL
(or, armed to stop, one SIGSTOP the process resumes from)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

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


def test_a_stop_armed_point_pauses_the_process_once_and_it_resumes_where_it_was() -> None:
    code = (
        "from pipeline import checkpoints\n"
        "checkpoints.arm(checkpoints.ATTEMPT_ANSWERED, enabled=True, action='stop')\n"
        "print('armed', flush=True)\n"
        "checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)\n"
        "print('resumed', flush=True)\n"
        "checkpoints.reached(checkpoints.ATTEMPT_ANSWERED)\n"  # disarmed by the first stop
        "print('passed again', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "armed\n"
        deadline = time.monotonic() + 30
        while _state(proc.pid) != "T":  # stopped at the point
            assert time.monotonic() < deadline, "the process never stopped"
            time.sleep(0.02)
        time.sleep(0.3)
        assert _state(proc.pid) == "T" and proc.poll() is None  # still paused
        os.kill(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert out == "resumed\npassed again\n"


def test_an_unknown_action_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown checkpoint action"):
        checkpoints.arm(checkpoints.ATTEMPT_ANSWERED, enabled=True, action="pause")


def _state(pid: int) -> str:
    """The process's state letter in /proc (``T``: stopped)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
