"""How an ingest process manages its memory: rarer garbage collections, and freed memory kept for reuse.

Parsing allocates millions of short-lived objects and makes almost no reference cycles: at the default
gen-0 threshold (700) the collector walked the live objects often enough to cost 0.35 s of 4 s on the
Lambda archive in one process (0.05 s with ``GC_THRESHOLD``).

A large file's parse allocates and frees buffers of megabytes all the time: 8 MiB chunks of the file,
columns of 500,000 rows, their Arrow tables. glibc's malloc gives such blocks back to the kernel when
they are freed (``munmap``, or trimming the top of the heap), and the next one costs a page fault per
4 KiB while the kernel zeroes it again. Measured on the 1 GB benchmark log on the project's 2-core VM,
three interleaved runs each: with glibc's defaults, 3.48-3.83 s, 1.30-1.52 s of system time and 158-183k
page faults; with blocks of up to ``MMAP_THRESHOLD`` taken from the heap and up to ``TRIM_THRESHOLD`` of
free heap kept, 3.09-3.39 s, 0.74-0.80 s and 142-154k (``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` in the environment do the same). Peak memory did not grow (618-665 MB against
654-753 MB): freed blocks are reused rather than new ones mapped.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

GC_THRESHOLD = (50_000, 20, 10)
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
_GLIBC_DEFAULT = 128 * 1024  # both thresholds' start values in glibc


def _glibc() -> Any:
    """The C library, when it is glibc (whose malloc these settings are for); else None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def tune_process() -> None:
    """Collect garbage rarely and keep freed memory for reuse, in this process and those forked from it
    (a forkserver's workers call this themselves)."""
    gc.set_threshold(*GC_THRESHOLD)
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


_FOR_GOOD = False  # set by keep_tuned()


def keep_tuned() -> None:
    """For a process that ends with its ingest (``bench ingest``): tune it now, and let ``tuned`` restore
    nothing: giving the kept memory back to the kernel just before the process exits only costs time."""
    global _FOR_GOOD
    tune_process()
    _FOR_GOOD = True


#: deltalake's allocator, a jemalloc of its own (its symbols prefixed ``_rjem_``), reads its options from
#: this variable when it starts: freed pages go back to the kernel at once instead of after its decay time.
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"
#: pyarrow's default pool, mimalloc, likewise keeps freed pages before it purges them; purged at once, a long
#: ingest's peak is what it holds, not that plus what it freed.
MIMALLOC_ENV, MIMALLOC_PURGE = "MIMALLOC_PURGE_DELAY", "0"


def deltalake_gives_back() -> None:
    """For a ``bench ingest`` process (the console entry point calls this before deltalake is imported):
    deltalake frees what its commits and its OPTIMIZE allocated, and with jemalloc's default decay those
    pages stayed in the process for jemalloc's decay time, so the automatic compaction at the end of a long
    ingest stacked on everything before it; given back at once, the peak is lower in the same wall time
    (tests/ingest/test_archive_memory.py holds the peak; ``make bench`` the time). pyarrow's mimalloc is
    told the same (``MIMALLOC_ENV``). A value the user set is kept."""
    os.environ.setdefault(JEMALLOC_ENV, JEMALLOC_CONF)
    os.environ.setdefault(MIMALLOC_ENV, MIMALLOC_PURGE)


def give_back() -> None:
    """Give the free memory kept for the parse back to the kernel, once the parse is over: what comes after
    (the commit, a compaction in deltalake) allocates differently, and a 200,000-member archive's ingest
    peaked 60 MB higher with the parse's free memory still held."""
    gc.collect()  # the parse's cycles, left by the raised thresholds
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@contextmanager
def tuned() -> Iterator[None]:
    """``tune_process`` for the time of an ingest. Afterwards the collector's thresholds are restored,
    glibc's thresholds are set back to their start values (glibc has no way to turn its dynamic
    adjustment of them back on) and the free memory kept is given back to the kernel; in a process that
    ends with the ingest (``keep_tuned``), nothing is done."""
    if _FOR_GOOD:
        yield
        return
    old = gc.get_threshold()
    tune_process()
    try:
        yield
    finally:
        gc.set_threshold(*old)
        libc = _glibc()
        if libc is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT)
            libc.mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT)
            libc.malloc_trim(0)
