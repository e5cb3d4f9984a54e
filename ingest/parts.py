"""The write stage: step and telemetry rows of one or more files -> part files in the store's scratch folder.

Every file's rows reach the store through ``Parts``. A parser's column buffers hand their rows to it
(``Parts.sink``): a held file's at the end of its parse, a streamed file's every ``stages.SPILL_ROWS``
rows too. Every ``PART_ROWS`` rows of a table, and at ``finish``, they are converted to the store's schema
(``table_rows``) and written as one part file. A file's run ids are made of its SHA-256, so a write
first waits for that (``PartFile.sha``): a streamed file is hashed on a thread while it is parsed.

Where the writes run is the only difference between the two kinds of input:
- a chunk of held files, parsed in a worker: ``Parts(scratch)`` writes in that worker, at ``finish``;
- one streamed file, parsed here: ``Parts(scratch, threads=WRITERS)`` writes on threads while the parse
  goes on, in bounded memory (``MAX_BACKLOG``, ``MAX_WRITES``).

A file whose rows cannot be converted (values a parser let through) or written (a full disk) loses all
of them, and only it: ``PartFile.error`` says why, the other files' rows are written, and a part that
held any row of a failed file is deleted (with its other files failed as well: a part is stored whole
or not at all).
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.ingest import pending_links
from bench.ingest.table_rows import steps_table, telemetry_table
from bench.sql.schema import write_part

TABLES = ("steps", "telemetry")


@dataclass(eq=False)
class PartFile:
    """One file whose rows a ``Parts`` writes. ``sha``: its source_sha256, perhaps still being computed;
    ``resolve``, when given, is called (on the parsing thread) before waiting for it."""

    sha: Future[str]
    source: str
    tags: dict[str, str]
    owner: str | None  # the run its telemetry was sampled for (a run directory's telemetry.csv)
    resolve: Callable[[], object] | None = None
    #: The time its telemetry spans, when its samples name no run (bench.ingest.pending_links).
    span: pending_links.Span | None = None
    #: Why its rows could not be written; None while they can.
    error: str | None = None


class Parts:
    """Part files of the rows of the files added to it; see the module docstring. Use as a context manager:
    parts not handed out by ``finish`` are deleted on exit."""

    PART_ROWS = 500_000
    WRITERS = 2  # threads for a streamed file (pyarrow encodes without the GIL)
    MAX_WRITES = 2  # writes queued or running beyond the backlog, once the hash is known
    MAX_BACKLOG = 8  # parts waiting for the hash, after which the parse waits for it

    def __init__(self, scratch: str, *, threads: int = 0):
        self._scratch = scratch
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="bench-parquet") if threads else None
        self._writing: deque[Future[None]] = deque()
        self._files: list[PartFile] = []
        #: (table, path, the files whose rows it holds: filled in once it is written)
        self._written: list[tuple[str, str, list[PartFile]]] = []
        self._buffered: dict[str, list[tuple[PartFile, dict[str, Any]]]] = {t: [] for t in TABLES}
        self._rows = dict.fromkeys(TABLES, 0)
        self._backlog: int | None = None

    def __enter__(self) -> Parts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def file(self, sha: Future[str], source: str, tags: dict[str, str], owner: str | None,
             resolve: Callable[[], object] | None = None) -> PartFile:
        """A file whose rows will be added."""
        one = PartFile(sha, source, tags, owner, resolve)
        self._files.append(one)
        return one

    def sink(self, file: PartFile, table: str) -> Callable[[dict[str, Any]], None]:
        """Where a column buffer of ``file``'s ``table`` hands its rows (``ColumnBuffer(spill=...)``)."""
        return lambda cols: self.add(file, table, cols)

    def add(self, file: PartFile, table: str, cols: dict[str, Any]) -> None:
        """Take rows of ``table`` from ``file``; write a part once there are ``PART_ROWS``. Never raises into
        the parser that calls it: a failure is the file's ``error``."""
        if file.error is not None or not len(cols["run_index"]):
            return
        self._buffered[table].append((file, cols))
        self._rows[table] += len(cols["run_index"])
        if table == "telemetry" and file.owner is None:
            file.span = pending_links.merge(file.span, pending_links.span(cols))
        if self._rows[table] >= self.PART_ROWS:
            self._flush(table)

    def _flush(self, table: str) -> None:
        entries, self._buffered[table], self._rows[table] = self._buffered[table], [], 0
        entries = [(f, c) for f, c in entries if f.error is None]
        if not entries:
            return
        path = os.path.join(self._scratch, f"{table}-{uuid.uuid4().hex}.parquet")
        stored: list[PartFile] = []
        self._written.append((table, path, stored))
        if self._pool is None:
            _write(table, entries, path, stored, sync=False)  # the commit fsyncs its batch's files
            return
        if len(self._writing) >= self.MAX_BACKLOG:  # a hash slower than the parse: the parse waits for it
            unknown = {f for f, _ in entries if not f.sha.done()}
            for f in unknown:
                if f.resolve is not None:
                    with suppress(Exception):  # a read error: the writes get it, and so does the caller
                        f.resolve()
            wait([f.sha for f in unknown])
        if all(f.sha.done() for f, _ in entries):
            if self._backlog is None:  # the writes queued while the hash was not known yet
                self._backlog = len(self._writing)
            self._wait(self.MAX_WRITES - 1 + self._backlog)
        self._writing.append(self._pool.submit(_write, table, entries, path, stored, sync=True))

    def _wait(self, keep: int = 0) -> None:
        while len(self._writing) > keep:
            self._writing.popleft().exception()  # _write records its failures on the files

    def finish(self) -> list[tuple[str, str]]:
        """The part files, as (table, path), in the order written; they are the caller's from now on. A file
        whose rows could not all be written has its ``error`` set, and none of its rows are in them."""
        for f in self._files:
            if f.resolve is not None and f.error is None:
                f.resolve()
        for table in TABLES:
            self._flush(table)
        self._wait()
        failed = {f for f in self._files if f.error is not None}
        while True:  # a part that held a failed file's rows is dropped, and with it its other files' rows
            more = {f for _, _, files in self._written if failed.intersection(files) for f in files} - failed
            if not more:
                break
            for f in more:
                f.error = "rows stored in the same part file as a file that failed"
            failed |= more
        kept = [(t, p) for t, p, files in self._written if files and not failed.intersection(files)]
        self._written = [w for w in self._written if failed.intersection(w[2])]  # deleted by close
        return kept

    def close(self) -> None:
        """Stop the writer threads and delete the part files not handed out by ``finish``."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for _, path, _ in self._written:
            with suppress(FileNotFoundError):
                os.remove(path)
        self._written = []


def _write(table: str, entries: list[tuple[PartFile, dict[str, Any]]], path: str, stored: list[PartFile], *,
           sync: bool) -> None:
    """One part file of ``entries``' rows, the files whose rows it holds put in ``stored``. Converted all at
    once (Arrow's per-call overhead, paid once per part); should that fail, file by file, so that only the
    file whose values broke it is left out. A failed write fails every file in the part."""
    try:
        try:
            converted = [_tables(table, entries)]
        except Exception:
            converted = []
            for file in dict.fromkeys(f for f, _ in entries):
                try:
                    converted.append(_tables(table, [(f, c) for f, c in entries if f is file]))
                except Exception as e:  # values a parser let through: this file is isolated, never the ingest
                    file.error = f"{type(e).__name__}: {e}"[:300]
        kept = [t for t in converted if t.num_rows]
        if kept:
            stored.extend(dict.fromkeys(f for f, _ in entries if f.error is None))
            write_part(pa.concat_tables(kept, promote_options="default") if len(kept) > 1 else kept[0], Path(path),
                       required=True, sync=sync)
    except Exception as e:  # a full disk, a folder gone: every file in this part
        for file, _ in entries:
            if file.error is None:
                file.error = f"{type(e).__name__}: {e}"[:300]


def _tables(table: str, entries: list[tuple[PartFile, dict[str, Any]]]) -> pa.Table:
    if table == "steps":
        return steps_table([(cols, f.sha.result()) for f, cols in entries])
    return telemetry_table([(cols, f.sha.result(), f.source, f.tags) for f, cols in entries],
                           [f.owner for f, _ in entries])
