"""``bench ingest``: every file under the given paths -> parsed -> one atomic batch of Parquet rows.

Contract: never raises for bad input (it becomes a problem row or a run status); raises BenchError for
usage errors (a path that does not exist, an unknown --format, a bad --path-pattern, a store of another
schema version). Idempotent: a source whose SHA-256 is already in the store is skipped.
"""

from __future__ import annotations

import gc
import hashlib
import os
import posixpath
import tarfile
import threading
import time
import zipfile
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

from bench.ingest import patterns as pat
from bench.ingest import prehash, registry, rundir
from bench.ingest.errors import BenchError
from bench.ingest.parse import parse_bytes, parse_stream
from bench.ingest.records import ParseResult, Problem, StepTable, TelemetryTable
from bench.ingest.rows import FileRef, FileRows, file_rows, problem_row, tables
from bench.ingest.schema import run_id, steps_table, telemetry_table
from bench.ingest.sources import Item, Reader, is_archive, iter_items
from bench.ingest.store import Batch, StoreWriter

BIG_FILE = prehash.MIN_BYTES  # above this a file is parsed as a stream, never held whole
CHUNK = 8 * 1024 * 1024
SPILL_ROWS = 500_000  # a large file's step / telemetry rows go to the batch every this many rows
BATCH_SOURCES = 2000  # commit every this many new sources, so a long ingest keeps its progress
_READ_ERRORS = (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile, RuntimeError)


@dataclass
class IngestSummary:
    """What an ingest did. ``problems_by_kind`` counts problem rows written."""

    store: str
    files_seen: int = 0
    files_parsed: int = 0
    runs_added: int = 0
    steps_added: int = 0
    telemetry_added: int = 0
    duplicates_skipped: int = 0
    unrecognized: int = 0
    bytes_read: int = 0
    wall_time_s: float = 0.0
    problems_by_kind: dict[str, int] = field(default_factory=dict)
    runs_by_status: dict[str, int] = field(default_factory=dict)
    runs_by_format: dict[str, int] = field(default_factory=dict)

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes_read / 1e6 / self.wall_time_s if self.wall_time_s > 0 else None

    @property
    def problems(self) -> int:
        return sum(self.problems_by_kind.values())

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "mb_per_s": self.mb_per_s, "problems": self.problems}


@dataclass
class _Context:
    writer: StoreWriter
    batch: Batch
    known: set[str]
    fmt: str | None
    patterns: list[pat.PathPattern]
    summary: IngestSummary
    counters: dict[str, Counter[str]]
    pattern_texts: list[str]
    #: (archive, folder) -> run_id of the bench run directory log read from that archive folder
    archive_runs: dict[tuple[str, str], str] = field(default_factory=dict)


def ingest(
    paths: list[str],
    store: os.PathLike[str] | str,
    *,
    fmt: str | None = None,
    path_patterns: list[str] | tuple[str, ...] = (),
    progress: Callable[[str, int], None] | None = None,
    on_wait: Callable[[], None] | None = None,
    workers: int | None = None,
    skip_globs: tuple[str, ...] = (),
) -> IngestSummary:
    """Ingest ``paths`` into the store at ``store``; see the module docstring for the contract.

    ``workers`` parser processes (default: one per core, started once more than ``_Parsers.INLINE_BYTES``
    are queued, or at once for an archive larger than that; 0 parses in this process). The main process
    reads, hashes, parses large files and commits batches; small files are parsed in the workers, which
    write their steps and telemetry part files themselves; results are recorded in file order.
    ``skip_globs``: files found under a directory or in an archive whose path or name matches one of
    these shell patterns are not read.
    """
    if fmt is not None and fmt not in registry.FORMAT_MODULES:
        raise BenchError(f"unknown format {fmt!r}; `bench ingest --list-formats` lists them")
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise BenchError(f"no such file or directory: {', '.join(missing)}")
    compiled = [pat.PathPattern.compile(t) for t in path_patterns]
    t0 = time.perf_counter()
    summary = IngestSummary(store=str(store))
    with _few_collections(), StoreWriter(Path(store), wait_message=on_wait) as writer, _Parsers(workers) as parsers:
        parsers.patterns = compiled
        parsers.scratch = str(writer.scratch())
        if _archive_bytes(paths) > _Parsers.INLINE_BYTES:
            parsers.start()  # a big archive's first chunks go to the workers too
        ctx = _Context(writer, writer.new_batch(), writer.known_hashes(), fmt, compiled, summary,
                       {"problems": Counter(), "status": Counter(), "format": Counter()}, list(path_patterns))
        for item in iter_items(paths, exclude=str(store), skip_globs=tuple(skip_globs)):
            job = _read_item(item, ctx)
            if job is not None:
                parsers.submit(job, fmt)
            for chunk in parsers.ready():
                _finish(*chunk, ctx, progress)
        for chunk in parsers.drain():
            _finish(*chunk, ctx, progress)
        if ctx.batch.n_sources or ctx.batch.rows["problems"]:
            ctx.batch.commit()
    summary.problems_by_kind = dict(ctx.counters["problems"])
    summary.runs_by_status = dict(ctx.counters["status"])
    summary.runs_by_format = dict(ctx.counters["format"])
    summary.wall_time_s = time.perf_counter() - t0
    return summary


#: Collector thresholds while ingesting. Parsing allocates millions of short-lived objects and makes
#: almost no reference cycles; at the default gen-0 threshold (700) the collector walked the live objects
#: often enough to cost 0.35 s of 4 s on the Lambda archive in one process (0.05 s with these).
_GC_THRESHOLD = (50_000, 20, 10)


@contextmanager
def _few_collections() -> Iterator[None]:
    old = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*old)


@dataclass
class _Job:
    """A small file read and hashed, waiting to be parsed."""

    item: Item
    sha: str
    data: bytes
    owner: str | None = None  # for a run directory's telemetry.csv: its run's run_id


def _parse_many(
    jobs: list[tuple[bytes, FileRef]], fmt: str | None, patterns: list[pat.PathPattern], scratch: str
) -> tuple[list[FileRows], list[tuple[str, str]]]:
    """Parse a chunk of small files (in a worker): each file's rows, and the part files holding all their
    steps and telemetry, written here into ``scratch`` as (table, path). Writing them in the worker keeps
    the encoding on the workers' cores and the rows out of the pipe back to the ingest process."""
    import uuid

    from bench.ingest.store import write_part

    now = time.time()
    parses = [(parse_bytes(data, source=ref.source, fmt=fmt), ref) for data, ref in jobs]
    rows = [file_rows(p, ref, patterns, now) for p, ref in parses]
    parts = []
    for name, table in zip(("steps", "telemetry"), tables(parses, patterns), strict=True):
        if table.num_rows:
            path = os.path.join(scratch, f"{name}-{uuid.uuid4().hex}.parquet")
            write_part(table, Path(path), required=True)
            parts.append((name, path))
    return rows, parts


#: The job area: an anonymous shared mapping that the ingest process makes just before it forks its
#: workers, so that they see what it writes there afterwards (see ``_Parsers``).
_JOB_AREA: Any = None


def _parse_many_mapped(spans: list[tuple[int, int, FileRef]], fmt: str | None, patterns: list[pat.PathPattern],
                       scratch: str) -> tuple[list[FileRows], list[tuple[str, str]]]:
    """``_parse_many`` (in a forked worker) for a chunk whose files' bytes are in the job area, each at
    (start, length)."""
    return _parse_many([(_JOB_AREA[start:start + n], ref) for start, n, ref in spans], fmt, patterns, scratch)


def _exit_with_ingest(ingest_pid: int) -> None:
    """Worker initializer: end this worker when the ingest process is gone (e.g. kill -9); collect
    garbage as rarely as the ingest process does."""
    import threading

    gc.set_threshold(*_GC_THRESHOLD)

    def watch() -> None:
        while True:
            try:
                os.kill(ingest_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


class _Parsers:
    """Parses small files in worker processes, handing results back in submission order.

    Jobs are grouped into chunks of about ``CHUNK_BYTES`` to amortise inter-process overhead, and at
    most ``MAX_PENDING`` chunks are in flight, so memory stays bounded whatever the input size.

    Forked workers get a chunk's bytes through the job area, one ``SLOT_BYTES`` slot per chunk in flight,
    instead of pickled through a pipe: on the Lambda archive that is 0.13 s less CPU (the pickling, the
    pipe's two copies and the unpickling of 112 MB) for 30 MB more resident memory. A chunk is written to
    its slot before its task is submitted, and the slot is reused only once the chunk's result is back.
    A chunk larger than a slot, and every chunk of forkserver workers, still travels pickled.
    """

    CHUNK_BYTES = 4 * 1024 * 1024
    MAX_PENDING = 8
    SLOTS, SLOT_BYTES = MAX_PENDING + 2, 8 * 1024 * 1024
    INLINE_BYTES = 8 * 1024 * 1024  # parse the first this many bytes here: a small ingest never pays for a pool

    def __init__(self, workers: int | None):
        self.workers = (os.cpu_count() or 1) if workers is None else workers
        self._pool: Any = None
        self._chunk: list[_Job] = []
        self._chunk_bytes = 0
        self._sent_bytes = 0
        self._pending: deque[tuple[list[_Job], Any, int | None]] = deque()
        self._fmt: str | None = None
        self.patterns: list[pat.PathPattern] = []
        self.scratch = ""  # where _parse_many writes part files (StoreWriter.scratch)
        self._area: Any = None
        self._free_slots: list[int] = []

    def __enter__(self) -> _Parsers:
        return self

    def start(self) -> None:
        """Use worker processes from now on: once ``INLINE_BYTES`` are queued, or at once when the input
        is known to be large (an archive bigger than that).

        While this process runs no other Python thread (the usual case at the start of an ingest), the
        workers are forked from it right here, after it has imported every parser and pandas (which
        pyarrow loads on first use, unless the ingest command keeps it out), so they start at once with
        all of that: measured on the Lambda archive, 0.45 s of CPU and about 0.3 s of waiting less than
        with a forkserver. The native threads numpy and pyarrow start at import are fork-safe (both
        register at-fork handlers). Otherwise a forkserver is used: forking a process that runs other
        Python threads (a part writer, a hashing thread) could leave a child holding a lock of a thread
        that does not exist there. The server starts clean, imports the same modules once and forks the
        workers at their first task."""
        if self.workers > 0 and self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            preload = ["bench.ingest.rows", "bench.ingest.store", "pandas", "bench.ingest.formats.tf_cnn_scan",
                       *(f"bench.ingest.formats.{name}" for name in registry.FORMAT_MODULES)]
            fork = threading.active_count() == 1
            ctx: Any
            if fork:
                import importlib

                for name in preload:
                    try:
                        importlib.import_module(name)
                    except ImportError:
                        if name != "pandas":  # kept out by the ingest command (bench.ingest.cli)
                            raise
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

    def submit(self, job: _Job, fmt: str | None) -> None:
        self._fmt = fmt
        self._chunk.append(job)
        self._chunk_bytes += len(job.data)
        if self._chunk_bytes >= self.CHUNK_BYTES:
            self._send()

    def _send(self) -> None:
        if not self._chunk:
            return
        chunk, size, self._chunk, self._chunk_bytes = self._chunk, self._chunk_bytes, [], 0
        args = [(j.data, _ref(j.item, j.sha, j.owner)) for j in chunk]
        self._sent_bytes += size
        if self._sent_bytes > self.INLINE_BYTES:
            self.start()
        if self._pool is None:
            self._pending.append((chunk, _Done(_parse_many(args, self._fmt, self.patterns, self.scratch)), None))
        elif self._area is not None and size <= self.SLOT_BYTES and self._free_slots:
            slot = self._free_slots.pop()
            pos, spans = slot * self.SLOT_BYTES, []
            for data, ref in args:
                self._area[pos:pos + len(data)] = data
                spans.append((pos, len(data), ref))
                pos += len(data)
            fut = self._pool.submit(_parse_many_mapped, spans, self._fmt, self.patterns, self.scratch)
            self._pending.append((chunk, fut, slot))
        else:
            self._pending.append((chunk, self._pool.submit(_parse_many, args, self._fmt, self.patterns, self.scratch),
                                  None))

    def ready(self) -> Iterator[tuple[list[_Job], list[FileRows], list[tuple[str, str]]]]:
        """Chunks whose turn has come; blocks only when too many chunks are in flight."""
        while self._pending and (self._pending[0][1].done() or len(self._pending) > self.MAX_PENDING):
            yield self._take()

    def drain(self) -> Iterator[tuple[list[_Job], list[FileRows], list[tuple[str, str]]]]:
        """The chunks left, in order. Once the last one is in, the workers are told to exit, so that they
        end (about 0.02 s) while the last batch is committed, rather than after it."""
        self._send()
        while self._pending:
            chunk = self._take()
            if not self._pending and self._pool is not None:
                self._pool.shutdown(wait=False)
            yield chunk

    def _take(self) -> tuple[list[_Job], list[FileRows], list[tuple[str, str]]]:
        chunk, fut, slot = self._pending.popleft()
        try:
            return (chunk, *fut.result())
        finally:
            if slot is not None:
                self._free_slots.append(slot)


@dataclass
class _Done:
    """An already-computed result with the Future methods _Parsers uses."""

    value: tuple[list[FileRows], list[tuple[str, str]]]

    def done(self) -> bool:
        return True

    def result(self) -> tuple[list[FileRows], list[tuple[str, str]]]:
        return self.value


def _archive_bytes(paths: list[str]) -> int:
    """The size on disk of the archives among ``paths`` (compressed: a lower bound of what they hold)."""
    total = 0
    for p in paths:
        if os.path.isfile(p) and is_archive(p):
            total += os.path.getsize(p)
    return total


def _read_item(item: Item, ctx: _Context) -> _Job | None:
    """Read and hash one item. Returns a parse job for a new small file; handles the rest here."""
    ctx.summary.files_seen += 1
    if item.reader is None:
        _problem_only(ctx, item, Problem("read_error", item.error or "unreadable"))
        return None
    try:
        if item.size > BIG_FILE:
            _ingest_big(item, ctx)
            return None
        data = item.reader.read()
    except _READ_ERRORS as e:
        _problem_only(ctx, item, Problem("read_error", f"{type(e).__name__}: {e}"))
        return None
    ctx.summary.bytes_read += len(data)
    hasher = hashlib.sha256(data)
    if item.sidecar is not None:  # a bench run directory: output.log + run.json is one source
        hasher.update(item.sidecar)
    sha = hasher.hexdigest()
    _note_run_dir(item, sha, ctx)
    return None if _is_duplicate(sha, ctx) else _Job(item, sha, data, _owner(item, ctx))


def _note_run_dir(item: Item, sha: str, ctx: _Context) -> None:
    """Remember the run of a run directory's log read from an archive, for its telemetry.csv (which
    ``rundir.pair_members`` passes on after the log)."""
    if item.sidecar is not None and item.archive is not None:
        ctx.archive_runs[(item.archive, posixpath.dirname(item.member or ""))] = run_id(sha, 0)


def _owner(item: Item, ctx: _Context) -> str | None:
    """The run_id of the run a run directory's telemetry.csv was sampled for (None for other files): from
    the log beside it on disk, or from the log already read from the same archive folder."""
    if posixpath.basename(item.match_path) != rundir.TELEMETRY_CSV:
        return None
    if item.archive is None:
        return rundir.telemetry_run_id(item.source)
    return ctx.archive_runs.get((item.archive, posixpath.dirname(item.member or "")))


def _finish(
    jobs: list[_Job], rows: list[FileRows], parts: list[tuple[str, str]], ctx: _Context,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Record a parsed chunk of files in the current batch (committing it when it is full)."""
    for name, path in parts:
        ctx.batch.adopt(name, path)
    for job, file in zip(jobs, rows, strict=True):
        _record(job.item, job.sha, len(job.data), file, ctx)
        if progress:
            progress(job.item.source, ctx.summary.bytes_read)
    if ctx.batch.n_sources >= BATCH_SOURCES:
        ctx.batch.commit()
        ctx.batch = ctx.writer.new_batch()


def _is_duplicate(sha: str, ctx: _Context) -> bool:
    if sha in ctx.known:
        ctx.summary.duplicates_skipped += 1
        return True
    ctx.known.add(sha)
    return False


class _Duplicate(BaseException):
    """A large file's hash, known only once parsing is under way, is already in the store. A
    BaseException, so that the parse guard (which turns parser exceptions into problems) lets it out."""


def _ingest_big(item: Item, ctx: _Context) -> None:
    """A large file, streamed (bounded memory). A plain file is hashed on a helper thread while this one
    parses it; an archive member is hashed first and then read again. Spilled rows are written as part
    files on writer threads as they come (``_BigParts``), before the hash is known, and adopted into the
    batch once it is; for a duplicate they are deleted, and reading stops as soon as the hash says so."""
    assert item.reader is not None
    ctx.summary.bytes_read += item.size
    pool = None
    if item.archive is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, thread_name_prefix="bench-sha256")
        sha = _Hash(ctx, future=pool.submit(_sha256_file, item, prehash.claim(item.source)))
    else:
        early = _sha256(item, item.reader)
        _note_run_dir(item, early, ctx)
        sha = _Hash(ctx, early=early)
        if sha.checked() is None:
            return
    parts = _BigParts(str(ctx.writer.scratch()), sha.known(), item.source, pat.match_first(ctx.patterns, item.match_path),
                      _owner(item, ctx))
    if sha.future is not None:
        sha.future.add_done_callback(parts.resolve)
    try:
        _parse_big(item, ctx, sha, parts)
    except _Duplicate:
        return
    finally:
        parts.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class _Hash:
    """A large file's hash as its parse sees it: known beforehand (``early``) or from the hashing thread's
    ``future``, and checked against the store once."""

    def __init__(self, ctx: _Context, *, future: Future[str] | None = None, early: str = ""):
        self.future, self._early, self._ctx = future, early, ctx
        self._verdict: list[str | None] = []  # [sha] once checked and new; [None] for a duplicate

    def known(self) -> str | None:
        """The hash if it was known beforehand, else None (it is being computed)."""
        return self._early or None

    def checked(self) -> str | None:
        """The hash (waiting for it), or None when it is already in the store."""
        if not self._verdict:
            sha = self.future.result() if self.future is not None else self._early
            self._verdict.append(None if _is_duplicate(sha, self._ctx) else sha)
        return self._verdict[0]

    def new(self) -> str:
        """The hash; raises _Duplicate when it is already in the store."""
        sha = self.checked()
        if sha is None:
            raise _Duplicate
        return sha

    def known_duplicate(self) -> bool:
        """True once the hash is known (without waiting for it) and already in the store."""
        return (self.future is None or self.future.done()) and self.checked() is None


class _BigParts:
    """The spilled step and telemetry rows of one large file, written as part files into the writer's
    scratch directory on writer threads while the file is parsed, so that the encoding overlaps the
    parsing and the hashing instead of waiting for the hash.

    A part written while the file's hash is not known yet carries a placeholder hash (a random token of
    the same length) in its run_id (and telemetry's source_sha256); those columns are written patchable
    (``store.write_part``), and ``finish`` replaces the placeholder in place (``store.patch_part``), which
    gives the file that writing the real hash would have given. Parts written once the hash is known
    (``resolve``, called by the hashing thread) carry it from the start. Each part is fsynced by its
    writer. Parts not taken by ``finish`` (a duplicate, an error) are deleted by ``close``.

    A part holds ``PART_ROWS`` rows or more (the last may hold fewer); at most ``MAX_WRITES`` writes are
    queued or running, so memory stays about (this + 1) x PART_ROWS rows."""

    PART_ROWS = 500_000
    WRITERS = 2  # threads (pyarrow encodes without the GIL)
    MAX_WRITES = 2
    PATCHABLE: ClassVar[dict[str, tuple[str, ...]]] = {"steps": ("run_id",), "telemetry": ("source_sha256", "run_id")}

    def __init__(self, scratch: str, sha: str | None, source: str, tags: dict[str, str], owner: str | None):
        import secrets

        self._scratch, self._source, self._tags, self._owner = scratch, source, tags, owner
        self._placeholder = secrets.token_hex(32)  # a 64-digit hex string, as a SHA-256
        self._known = sha  # the real hash once known (set by this thread or the hashing thread)
        self._pool: Any = None
        self._writing: deque[Future[None]] = deque()
        self._files: list[tuple[str, str]] = []
        self._written_with: dict[str, str] = {}  # path -> the hash (or placeholder) its rows carry
        self._buffered: dict[str, list[dict[str, Any]]] = {"steps": [], "telemetry": []}
        self._rows = {"steps": 0, "telemetry": 0}

    def resolve(self, hashed: Future[str]) -> None:
        """The hashing thread's done-callback: parts written from now on carry the file's real hash."""
        if not hashed.cancelled() and hashed.exception() is None:
            self._known = hashed.result()

    def add(self, name: str, cols: dict[str, Any]) -> None:
        """Take spilled rows of table ``name``; write a part file in the background once there are enough."""
        self._buffered[name].append(cols)
        self._rows[name] += len(cols["run_index"])
        if self._rows[name] >= self.PART_ROWS:
            self._flush(name)

    def _flush(self, name: str) -> None:
        import uuid

        spills, self._buffered[name], self._rows[name] = self._buffered[name], [], 0
        if not spills:
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.WRITERS, thread_name_prefix="bench-parquet")
        self._wait(self.MAX_WRITES - 1)
        path = os.path.join(self._scratch, f"{name}-{uuid.uuid4().hex}.parquet")
        self._files.append((name, path))
        self._writing.append(self._pool.submit(self._write, name, spills, path))

    def _write(self, name: str, spills: list[dict[str, Any]], path: str) -> None:
        """One part file of several spills: a table each (one Arrow chunk), written as one row group."""
        import pyarrow as pa

        from bench.ingest.store import write_part

        sha = self._known or self._placeholder
        if name == "steps":
            tables = [steps_table([(cols, sha)]) for cols in spills]
        else:
            tables = [telemetry_table([(cols, sha, self._source, self._tags)], [self._owner]) for cols in spills]
        write_part(pa.concat_tables(tables), Path(path), required=True,
                   patchable=self.PATCHABLE[name] if sha == self._placeholder else (), sync=True)
        self._written_with[path] = sha

    def _wait(self, keep: int = 0) -> None:
        while len(self._writing) > keep:
            self._writing.popleft().result()

    def finish(self, sha: str) -> list[tuple[str, str]]:
        """The part files, in the order written, holding ``sha`` (the file's hash) where the placeholder was;
        they are the caller's from now on."""
        from bench.ingest.store import patch_part

        for name in self._buffered:
            self._flush(name)
        self._wait()
        fake = self._placeholder
        for name, path in self._files:
            if self._written_with[path] == fake:
                patch_part(Path(path), self.PATCHABLE[name], [(fake, sha), (fake[:16], sha[:16])])
                with open(path, "rb") as fh:
                    os.fsync(fh.fileno())
            elif self._written_with[path] != sha:
                raise RuntimeError(f"{path} was written with the hash {self._written_with[path]}, not {sha}")
        files, self._files = self._files, []
        return files

    def close(self) -> None:
        """Stop the writer threads and delete the part files not handed out by ``finish``."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for _, path in self._files:
            with suppress(FileNotFoundError):
                os.remove(path)


def _sha256(item: Item, reader: Reader) -> str:
    """SHA-256 of the item's bytes read from ``reader`` (then its run.json sidecar's)."""
    hasher = hashlib.sha256()
    for chunk in _chunks(reader):
        hasher.update(chunk)
    return _with_sidecar(hasher, item)


def _sha256_file(item: Item, early: Future[Any] | None) -> str:
    """SHA-256 of a plain file (then its sidecar's): from the hash started by ``bench.ingest.prehash``
    when there is one, else read here."""
    hasher = early.result() if early is not None else prehash.hash_file(item.source)
    return _with_sidecar(hasher.copy(), item)


def _with_sidecar(hasher: Any, item: Item) -> str:
    if item.sidecar is not None:
        hasher.update(item.sidecar)
    return hasher.hexdigest()


def _parse_big(item: Item, ctx: _Context, sha: _Hash, parts: _BigParts) -> None:
    owner = _owner(item, ctx)

    def spill(name: str) -> Callable[[dict[str, Any]], None]:
        def add(cols: dict[str, Any]) -> None:
            if sha.known_duplicate():
                raise _Duplicate  # stop reading a file that is already in the store
            parts.add(name, cols)

        return add

    result = ParseResult(steps=StepTable(spill=spill("steps"), spill_rows=SPILL_ROWS),
                         telemetry=TelemetryTable(spill=spill("telemetry"), spill_rows=SPILL_ROWS))
    with _reopen(item) as reader:
        head = reader.read(registry.HEAD_CHARS)
        parsed = parse_stream(head, _chunks(reader), source=item.source, fmt=ctx.fmt, result=result)
    result.steps.flush()  # the last rows too: every row of a large file is in its parts
    result.telemetry.flush()
    known = sha.new()
    batch = ctx.batch
    for name, path in parts.finish(known):
        batch.adopt(name, path)
    ref = _ref(item, known, owner)
    _record(item, known, item.size, file_rows(parsed, ref, ctx.patterns, time.time()), ctx)


def _ref(item: Item, sha: str, owner: str | None) -> FileRef:
    """The file's identity; a run directory's telemetry.csv also names the run it was sampled for."""
    return FileRef(item.source, sha, item.match_path, item.sidecar, owner)


def _chunks(reader: Reader) -> Iterator[bytes]:
    while chunk := reader.read(CHUNK):
        yield chunk


@contextmanager
def _reopen(item: Item) -> Iterator[IO[bytes]]:
    """A fresh reader of ``item`` (a streamed tar member is read again by random access)."""
    if item.archive is None:
        with open(item.source, "rb") as fh:
            yield fh
    elif item.archive.lower().endswith(".zip"):
        with zipfile.ZipFile(item.archive) as zf, zf.open(item.member or "") as zfh:
            yield zfh
    else:
        with tarfile.open(item.archive, "r:*") as tf:
            tfh = tf.extractfile(item.member or "")
            if tfh is None:
                raise OSError(f"archive member {item.member} is not a regular file")
            yield tfh


def _record(item: Item, sha: str, size: int, file: FileRows, ctx: _Context) -> None:
    """Add one file's rows and its sources row to the current batch, and count them."""
    batch, now = ctx.batch, time.time()
    batch.rows["runs"].extend(file.runs)
    batch.rows["problems"].extend(file.problems)
    for run in file.runs:
        ctx.counters["status"][run["status"]] += 1
        ctx.counters["format"][file.format or "?"] += 1
    for p in file.problems:
        ctx.counters["problems"][p["kind"]] += 1
    batch.rows["sources"].append(
        {"source": item.source, "source_sha256": sha, "size_bytes": size, "archive": item.archive,
         "member": item.member, "resolved_path": os.path.abspath(item.archive or item.source),
         "format": file.format, "forced_format": ctx.fmt is not None, "path_patterns": ctx.pattern_texts,
         "n_runs": len(file.runs), "n_steps": file.n_steps, "n_problems": len(file.problems),
         "ingested_at": round(now * 1e6)}
    )
    batch.n_sources += 1
    s = ctx.summary
    s.runs_added += len(file.runs)
    s.steps_added += file.n_steps
    s.telemetry_added += file.n_telemetry
    if file.format is None:
        s.unrecognized += 1
    else:
        s.files_parsed += 1


def _problem_only(ctx: _Context, item: Item, p: Problem) -> None:
    ctx.batch.rows["problems"].append(problem_row(item.source, None, None, p, time.time()))
    ctx.counters["problems"][p.kind] += 1
