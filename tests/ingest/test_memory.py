"""bench.ingest.memory: the collector's and glibc's settings while an ingest runs, and after it."""

from __future__ import annotations

import gc
import platform
import resource

import pytest

from bench.ingest import memory

BLOCK = 8 * 1024 * 1024


def _faults_of_rounds(rounds: int) -> int:
    """Page faults of ``rounds`` times: three 8 MiB blocks written, then all freed. Each round frees 24 MiB
    at once, as a big file's parse frees a chunk and a part's columns."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        blocks = [bytearray(BLOCK) for _ in range(3)]  # zero-filled: every page is touched
        del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_collector_thresholds_are_raised_and_restored() -> None:
    old = gc.get_threshold()
    with memory.tuned():
        assert gc.get_threshold() == memory.GC_THRESHOLD
    assert gc.get_threshold() == old


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the malloc settings are glibc's")
def test_freed_blocks_are_reused_while_tuned_and_given_back_after() -> None:
    pages_per_round = 3 * BLOCK // resource.getpagesize()
    with memory.tuned():
        _faults_of_rounds(1)  # the first round maps the memory
        tuned = _faults_of_rounds(4)
    after = _faults_of_rounds(4)
    assert tuned < pages_per_round / 4  # reused: almost no page is mapped again
    # glibc's start values: each block is mapped, and unmapped when freed, so its pages fault again. Not
    # "4 rounds' worth": in a process that ran hundreds of tests before, half of them were counted once
    # (the kernel may back a fresh mapping with fewer faults); more than a round's is what says "given back"
    assert after > pages_per_round and after > 8 * tuned


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
