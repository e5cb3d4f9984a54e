"""The test helpers that other tests lean on (tests/logtools.py), held to what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
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
    try:
        os.kill(grandchild, 0)
        alive = Path(f"/proc/{grandchild}/stat").read_text().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert alive is not session  # the group's kill reaches it; a plain kill leaves it (its own test kills it)
    if alive:
        os.kill(grandchild, 9)


def test_a_child_that_ended_is_left_as_it_ended() -> None:
    with child([sys.executable, "-c", "raise SystemExit(3)"], stdout=subprocess.PIPE) as proc:
        proc.communicate(timeout=60)
    assert proc.returncode == 3
