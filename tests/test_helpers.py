"""The test helpers that other tests lean on (tests/logtools.py), held to what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from logtools import child


@pytest.mark.parametrize("session", [False, True])
def test_a_failing_test_leaves_no_child_running_and_no_pipe_open(session: bool) -> None:
    """The child (and, in a session of its own, the grandchild it started) is killed and reaped, and its
    pipes closed, when the body raises while it runs."""
    program = "import subprocess, sys, time; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); time.sleep(60)"
    with pytest.raises(AssertionError, match="the test failed"), \
            child([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                  start_new_session=session) as proc:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        raise AssertionError("the test failed")
    assert proc.returncode is not None and proc.returncode < 0
    assert proc.stdout.closed and proc.stderr is not None and proc.stderr.closed
    # the group's kill reaches it; a plain kill leaves it (this test kills it). A SIGKILL is delivered when the
    # process next runs: on a loaded machine the grandchild can still be sleeping just after the group's kill
    deadline = time.monotonic() + (30 if session else 0)
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(grandchild)
    if alive:
        os.kill(grandchild, 9)
    assert alive is not session


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_a_child_that_ended_is_left_as_it_ended() -> None:
    with child([sys.executable, "-c", "raise SystemExit(3)"], stdout=subprocess.PIPE) as proc:
        proc.communicate(timeout=60)
    assert proc.returncode == 3
