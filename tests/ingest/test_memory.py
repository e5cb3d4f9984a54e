"""bench.ingest.memory: the collector's and glibc's settings while an ingest runs, and after it."""

from __future__ import annotations

import gc
import os
import platform
import resource

import pytest

from bench.ingest import memory

BLOCK = 8 * 1024 * 1024


def test_collector_thresholds_are_raised_and_restored() -> None:
    old = gc.get_threshold()
    with memory.tuned():
        assert gc.get_threshold() == memory.GC_THRESHOLD
    assert gc.get_threshold() == old


def _resident() -> int:
    """This process's resident bytes, from /proc (the kernel's count, whatever page sizes back it)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _resident_given_back() -> int:
    """Bytes the process stops holding when three 8 MiB blocks, written, are freed at once (as a big file's
    parse frees a chunk and a part's columns)."""
    blocks = [bytearray(BLOCK) for _ in range(3)]  # zero-filled: every page is touched
    held = _resident()
    del blocks
    return held - _resident()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the malloc settings are glibc's")
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc")
def test_freed_blocks_are_kept_while_tuned_and_given_back_after() -> None:
    with memory.tuned():
        _resident_given_back()  # the first round takes the memory from the kernel
        kept = [_resident_given_back() for _ in range(4)]
        held = _resident()
    given_back = held - _resident()
    # Resident memory, not page faults: how many faults a fresh mapping costs depends on the kernel
    # (transparent huge pages back one with a fault per 2 MiB), what the process holds does not
    assert max(kept) < BLOCK // 8  # freed blocks stay in the heap, for the next parse's
    assert given_back > 2 * BLOCK  # the three blocks' 24 MiB, less what else the process freed or took


def test_a_process_that_ends_with_its_ingest_stays_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_FOR_GOOD", False)
    old = gc.get_threshold()
    try:
        memory.keep_tuned()
        with memory.tuned():
            pass
        assert gc.get_threshold() == memory.GC_THRESHOLD  # not restored: the process ends here
    finally:
        gc.set_threshold(*old)
