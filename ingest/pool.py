"""Held files taken through the stages in chunks, in worker processes once the ingest is large; handed back in
the order they were read.

``ParserPool`` groups held files into chunks of about ``CHUNK_BYTES`` and takes a chunk through the stages
(``stages.parse_files``: detect, parse, buffer, write): in this process while the ingest is small, in
forked workers once it is not. A worker writes the chunk's part files itself and returns the other rows.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bench.ingest import patterns as pat
from bench.ingest import registry
from bench.ingest.items import Item
from bench.ingest.memory import tune_process
from bench.ingest.parts import Parts
from bench.ingest.records import Problem
from bench.ingest.rows import FileRef, FileRows, problem_row
from bench.ingest.stages import parse_files


@dataclass
class Job:
    """A held file read and hashed, waiting for the other stages."""

    item: Item
    sha: str
    data: bytes
    owner: str | None = None  # for a run directory's telemetry.csv: its run's run_id
    content_sha256: str | None = None  # the SHA-256 of the bytes alone, when ``sha`` also covers more
    supersedes: str | None = None  # the source_sha256 of the earlier version this one extends (``versions``)

    def ref(self) -> FileRef:
        return file_ref(self.item, self.sha, self.owner)


def file_ref(item: Item, sha: str, owner: str | None) -> FileRef:
    """The file's identity; a run directory's telemetry.csv also names the run it was sampled for."""
    return FileRef(item.name, sha, item.match_path, item.sidecar, owner)


def parse_many(
    jobs: list[tuple[bytes, FileRef]], fmt: str | None, patterns: list[pat.PathPattern], scratch: str
) -> tuple[list[FileRows], list[tuple[str, str]]]:
    """Parse a chunk of held files (in a worker): ``stages.parse_files``, its part files written here into
    ``scratch``, which keeps the encoding on the workers' cores and the rows out of the pipe back to the
    ingest process."""
    with Parts(scratch) as parts:
        rows, written = parse_files(list(jobs), fmt, patterns, parts)
    return [r for r in rows if r is not None], written


#: The job area: an anonymous shared mapping that the ingest process makes just before it forks its
#: workers, so that they see what it writes there afterwards (see ``ParserPool``).
_JOB_AREA: Any = None


def _parse_mapped(spans: list[tuple[int, int, FileRef]], fmt: str | None, patterns: list[pat.PathPattern],
                       scratch: str) -> tuple[list[FileRows], list[tuple[str, str]]]:
    """``parse_many`` (in a forked worker) for a chunk whose files' bytes are in the job area, each at
    (start, length)."""
    return parse_many([(_JOB_AREA[start:start + n], ref) for start, n, ref in spans], fmt, patterns, scratch)


def _exit_with_ingest(ingest_pid: int) -> None:
    """Worker initializer: end this worker when the ingest process is gone (e.g. kill -9); manage memory
    as the ingest process does."""
    tune_process()

    def watch() -> None:
        while True:
            try:
                os.kill(ingest_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


class ParserPool:
    """Takes held files through the stages in worker processes, handing results back in submission order.

    Jobs are grouped into chunks of about ``CHUNK_BYTES`` to amortise inter-process overhead, and at
    most ``MAX_PENDING`` chunks are in flight, so memory stays bounded whatever the input size.

    Forked workers get a chunk's bytes through the job area, one ``SLOT_BYTES`` slot per chunk in flight,
    instead of pickled through a pipe: that saves the pickling, the pipe's two copies and the unpickling of
    every chunk's bytes, for one slot of resident memory per chunk in flight. A chunk is written to
    its slot before its task is submitted, and the slot is reused only once the chunk's result is back.
    A chunk larger than a slot, and every chunk of forkserver workers, still travels pickled.
    """

    CHUNK_BYTES = 4 * 1024 * 1024
    #: Files in a chunk at most: the jobs in flight and their results are held here (a chunk of 4 MiB of
    #: 700-byte logs would be 6,000 of them, 60,000 in flight)
    CHUNK_FILES = 1000
    MAX_PENDING = 8
    SLOTS, SLOT_BYTES = MAX_PENDING + 2, 8 * 1024 * 1024
    INLINE_BYTES = 8 * 1024 * 1024  # parse the first this many bytes here: a small ingest never pays for a pool

    def __init__(self, workers: int | None):
        self.workers = (os.cpu_count() or 1) if workers is None else workers
        self._pool: Any = None
        self._chunk: list[Job] = []
        self._chunk_bytes = 0
        self._sent_bytes = 0
        self._pending: deque[tuple[list[Job], Any, int | None]] = deque()
        self._fmt: str | None = None
        self.patterns: list[pat.PathPattern] = []
        self.scratch = ""  # where parse_many writes part files (StoreWriter.scratch)
        self._area: Any = None
        self._free_slots: list[int] = []

    def __enter__(self) -> ParserPool:
        return self

    def start(self) -> None:
        """Use worker processes from now on: once ``INLINE_BYTES`` are queued, or at once when the input
        is known to be large (an archive bigger than that).

        While this process runs no other Python thread (the usual case at the start of an ingest), the
        workers are forked from it right here, after it has imported every parser and pandas (which
        pyarrow loads on first use, unless the ingest command keeps it out), so they start at once with
        all of that, where a forkserver's workers would import it again before their first chunk
        (``make bench`` times the ingest). The native threads numpy and pyarrow start at import are fork-safe (both
        register at-fork handlers). Otherwise a forkserver is used: forking a process that runs other
        Python threads (a part writer, a hashing thread) could leave a child holding a lock of a thread
        that does not exist there. The server starts clean, imports the same modules once and forks the
        workers at their first task."""
        if self.workers > 0 and self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            preload = ["bench.ingest.stages", "bench.sql.store", "pandas", "bench.ingest.formats.tf_cnn_scan",
                       *(f"bench.ingest.formats.{name}" for name in registry.FORMAT_MODULES)]
            fork = threading.active_count() == 1
            ctx: Any
            if fork:
                import importlib

                for name in preload:
                    try:
                        importlib.import_module(name)
                    except ImportError:
                        if name != "pandas":  # kept out by the ingest command (bench.runner.commands.ingest_cmd)
                            raise
                registry.all_formats()  # plugins too (one that cannot be imported is reported here, once)
                ctx = multiprocessing.get_context("fork")
            else:
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(preload)
            if fork:
                import mmap

                global _JOB_AREA
                _JOB_AREA = self._area = mmap.mmap(-1, self.SLOTS * self.SLOT_BYTES)
                self._free_slots = list(range(self.SLOTS))
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx,
                                             initializer=_exit_with_ingest, initargs=(os.getpid(),))
            if fork:
                self._pool.submit(int)  # a fork pool forks all its workers at the first task: now

    def __exit__(self, *exc: object) -> None:
        global _JOB_AREA
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
        if self._area is not None:
            self._area.close()
            _JOB_AREA = self._area = None

    def submit(self, job: Job, fmt: str | None) -> None:
        self._fmt = fmt
        self._chunk.append(job)
        self._chunk_bytes += len(job.data)
        if self._chunk_bytes >= self.CHUNK_BYTES or len(self._chunk) >= self.CHUNK_FILES:
            self._send()

    def _send(self) -> None:
        if not self._chunk:
            return
        chunk, size, self._chunk, self._chunk_bytes = self._chunk, self._chunk_bytes, [], 0
        args = [(j.data, j.ref()) for j in chunk]
        self._sent_bytes += size
        if self._sent_bytes > self.INLINE_BYTES:
            self.start()
        if self._pool is None:
            self._pending.append((chunk, _Done(parse_many(args, self._fmt, self.patterns, self.scratch)), None))
        elif self._area is not None and size <= self.SLOT_BYTES and self._free_slots:
            slot = self._free_slots.pop()
            pos, spans = slot * self.SLOT_BYTES, []
            for data, ref in args:
                self._area[pos:pos + len(data)] = data
                spans.append((pos, len(data), ref))
                pos += len(data)
            fut = self._pool.submit(_parse_mapped, spans, self._fmt, self.patterns, self.scratch)
            self._pending.append((chunk, fut, slot))
        else:
            self._pending.append((chunk, self._pool.submit(parse_many, args, self._fmt, self.patterns, self.scratch),
                                  None))

    def ready(self) -> Iterator[tuple[list[Job], list[FileRows], list[tuple[str, str]]]]:
        """Chunks whose turn has come; blocks only when too many chunks are in flight."""
        while self._pending and (self._pending[0][1].done() or len(self._pending) > self.MAX_PENDING):
            yield self._take()

    def drain(self) -> Iterator[tuple[list[Job], list[FileRows], list[tuple[str, str]]]]:
        """The chunks left, in order. Once the last one is in, the workers are told to exit, so that they
        end while the last batch is committed, rather than after it."""
        self._send()
        while self._pending:
            chunk = self._take()
            if not self._pending and self._pool is not None:
                self._pool.shutdown(wait=False)
            yield chunk

    def _take(self) -> tuple[list[Job], list[FileRows], list[tuple[str, str]]]:
        from concurrent.futures.process import BrokenProcessPool

        chunk, fut, slot = self._pending.popleft()
        try:
            return (chunk, *fut.result())
        except BrokenProcessPool:  # a worker was killed (the OS's OOM killer): find the file, keep the rest
            self._restart()
            return (chunk, *isolated([(j.data, j.ref()) for j in chunk], self._fmt, self.patterns, self.scratch))
        finally:
            if slot is not None and self._area is not None:
                self._free_slots.append(slot)

    def _restart(self) -> None:
        """Drop a broken pool (every chunk it held fails as this one did, and is isolated in turn); later
        chunks start a fresh one."""
        global _JOB_AREA
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._area is not None:
            self._area.close()
            _JOB_AREA = self._area = None
            self._free_slots = []


#: The problem row of a file whose parser process the OS killed.
KILLED = ("the process parsing this file was killed (by the OS: out of memory?); nothing of the file is stored, "
          "and the rest of the ingest is")


def isolated(jobs: list[tuple[bytes, FileRef]], fmt: str | None, patterns: list[pat.PathPattern], scratch: str
             ) -> tuple[list[FileRows], list[tuple[str, str]]]:
    """A chunk whose worker died, parsed again one file per process: the file that kills its process again
    is one ``resource`` problem row, every other file is stored as usual."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "forkserver")
    rows: list[FileRows] = []
    parts: list[tuple[str, str]] = []
    for data, ref in jobs:
        with ProcessPoolExecutor(1, mp_context=ctx) as one:
            try:
                got_rows, got_parts = one.submit(parse_many, [(data, ref)], fmt, patterns, scratch).result()
            except BrokenProcessPool:
                rows.append(FileRows(None, problems=[problem_row(ref.source, ref.sha, None, Problem("resource", KILLED),
                                                                 time.time())]))
                continue
        rows += got_rows
        parts += got_parts
    return rows, parts


@dataclass
class _Done:
    """An already-computed result with the Future methods ParserPool uses."""

    value: tuple[list[FileRows], list[tuple[str, str]]]

    def done(self) -> bool:
        return True

    def result(self) -> tuple[list[FileRows], list[tuple[str, str]]]:
        return self.value
