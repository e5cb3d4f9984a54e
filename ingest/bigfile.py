"""A file too large to hold (over ``BIG_FILE`` bytes), parsed as a stream in bounded memory.

Its identity, the SHA-256 of its bytes, is known one way: hashed before its rows are written. A plain
file is hashed on a helper thread while this one parses it; an archive member is hashed first and then
read again. The parser's spilled step and telemetry rows go to ``PartWriter``, whose writer threads wait
for the hash and then write each part file with it. Once the hash is known and already in the store,
the stream of chunks simply ends (the parse finishes early) and the parts are deleted.
"""

from __future__ import annotations

import os
import tarfile
import uuid
import zipfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from bench.ingest import links, registry
from bench.ingest.items import Item, Reader
from bench.ingest.parse import FileParse, parse_stream
from bench.ingest.records import ParseResult, StepTable, TelemetryTable
from bench.ingest.table_rows import steps_table, telemetry_table
from bench.ingest.versions import Hashing
from bench.sql.store import write_part

BIG_FILE = 64 * 1024 * 1024  # above this a file is parsed as a stream, never held whole
CHUNK = 8 * 1024 * 1024
SPILL_ROWS = 500_000  # a large file's step / telemetry rows are handed on every this many rows
_HASH_BLOCK = 1024 * 1024  # small enough that what read() copied is still in cache when SHA-256 reads it


def parse_big(item: Item, fmt: str | None, hashed: Future[str], is_duplicate: Callable[[str], bool],
              parts: PartWriter) -> FileParse | None:
    """Parse ``item`` as a stream, its spilled rows going to ``parts``. Returns None when the hash turns
    out to be in the store already (``is_duplicate``, asked once): reading then stops at the next chunk."""
    verdict: list[bool] = []

    def duplicate() -> bool:
        if not verdict:
            verdict.append(is_duplicate(hashed.result()))
        return verdict[0]

    def chunks(reader: Reader) -> Iterator[bytes]:
        while chunk := reader.read(CHUNK):
            if hashed.done() and duplicate():
                return
            yield chunk

    result = ParseResult(steps=StepTable(spill=lambda cols: parts.add("steps", cols), spill_rows=SPILL_ROWS),
                         telemetry=TelemetryTable(spill=lambda cols: parts.add("telemetry", cols),
                                                  spill_rows=SPILL_ROWS))
    with reopen(item) as reader:
        head = reader.read(registry.HEAD_CHARS)
        parsed = parse_stream(head, chunks(reader), source=item.name, fmt=fmt, result=result)
    if duplicate():
        return None
    result.steps.flush()  # the last rows too: every row of a large file is in its parts
    result.telemetry.flush()
    return parsed


def start_hash(item: Item, pool: ThreadPoolExecutor, hashing: Hashing) -> Future[str]:
    """The SHA-256 of ``item`` (then of its run.json sidecar), fed through ``hashing`` (read its prefixes
    once the future is done): computed on ``pool`` for a plain file, so that it overlaps the parse; for an
    archive member, read through now (its stream cannot be read twice at once), and the member is then
    read again for the parse."""
    if item.archive is None:
        return pool.submit(_hash_file, item, hashing)
    done: Future[str] = Future()
    assert item.reader is not None
    while chunk := item.reader.read(CHUNK):
        hashing.update(chunk)
    done.set_result(hashing.finish(item.sidecar))
    return done


def _hash_file(item: Item, hashing: Hashing) -> str:
    buf = bytearray(_HASH_BLOCK)
    view = memoryview(buf)
    with open(item.source, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            hashing.update(view[:n])
    return hashing.finish(item.sidecar)


@contextmanager
def reopen(item: Item) -> Iterator[IO[bytes]]:
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


class PartWriter:
    """The spilled step and telemetry rows of one large file, written as part files into ``scratch`` on
    writer threads, so that the encoding overlaps the parse. Each write first waits for the file's hash
    (``hashed``), which its run ids are made of. Until the hash is known, up to ``MAX_BACKLOG`` parts queue
    up, and then the parse waits for the hash: memory stays bounded however slowly the file is hashed
    (measured on the 1 GB benchmark log on a loaded VM: unbounded, 9 to 11 parts queued and ``bench
    ingest`` peaked at 645-943 MB in six runs; with 8, at 572-772 MB). After that at most ``MAX_WRITES``
    more writes are queued or running beyond that backlog, so the parse does not wait for the backlog,
    and memory stays about (backlog + ``MAX_WRITES`` + 1) x ``PART_ROWS`` rows. Parts not taken by
    ``finish`` are deleted by ``close``."""

    PART_ROWS = 500_000
    WRITERS = 2  # threads (pyarrow encodes without the GIL)
    MAX_WRITES = 2
    MAX_BACKLOG = 8

    def __init__(self, scratch: str, hashed: Future[str], source: str, tags: dict[str, str], owner: str | None):
        self._scratch, self._hashed, self._source, self._tags, self._owner = scratch, hashed, source, tags, owner
        self._pool = ThreadPoolExecutor(self.WRITERS, thread_name_prefix="bench-parquet")
        self._writing: deque[Future[None]] = deque()
        self._files: list[tuple[str, str]] = []
        self._buffered: dict[str, list[dict[str, Any]]] = {"steps": [], "telemetry": []}
        self._rows = {"steps": 0, "telemetry": 0}
        self._failed: BaseException | None = None  # a write that raised: finish() raises it, add() never does
        self._backlog: int | None = None
        #: The time its telemetry spans, for a file whose samples name no run (bench.ingest.links).
        self.span: links.Span | None = None

    def add(self, name: str, cols: dict[str, Any]) -> None:
        """Take spilled rows of table ``name``; write a part file in the background once there are enough.
        Never raises into the parser that calls it: after a failed write, rows are dropped and ``finish``
        raises the failure."""
        if self._failed is not None:
            return
        self._buffered[name].append(cols)
        self._rows[name] += len(cols["run_index"])
        if name == "telemetry" and self._owner is None:
            self.span = links.merge(self.span, links.span(cols))
        if self._rows[name] >= self.PART_ROWS:
            self._flush(name)

    def _flush(self, name: str) -> None:
        spills, self._buffered[name], self._rows[name] = self._buffered[name], [], 0
        if not spills or self._failed is not None:
            return
        if len(self._writing) >= self.MAX_BACKLOG:
            wait([self._hashed])  # a hash slower than the parse: the parse waits, memory stays bounded
        if self._hashed.done():
            if self._backlog is None:  # the writes queued while the hash was not known yet
                self._backlog = len(self._writing)
            self._wait(self.MAX_WRITES - 1 + self._backlog)
        path = os.path.join(self._scratch, f"{name}-{uuid.uuid4().hex}.parquet")
        self._files.append((name, path))
        self._writing.append(self._pool.submit(self._write, name, spills, path))

    def _write(self, name: str, spills: list[dict[str, Any]], path: str) -> None:
        """One part file of several spills: a table each (one Arrow chunk), written as one row group."""
        sha = self._hashed.result()
        if name == "steps":
            tables = [steps_table([(cols, sha)]) for cols in spills]
        else:
            tables = [telemetry_table([(cols, sha, self._source, self._tags)], [self._owner]) for cols in spills]
        write_part(pa.concat_tables(tables), Path(path), required=True, sync=True)

    def _wait(self, keep: int = 0) -> None:
        while len(self._writing) > keep:
            error = self._writing.popleft().exception()
            if error is not None and self._failed is None:
                self._failed = error

    def finish(self) -> list[tuple[str, str]]:
        """The part files, in the order written; they are the caller's from now on. Raises what a write
        raised (the caller then stores none of the file's rows)."""
        for name in self._buffered:
            self._flush(name)
        self._wait()
        if self._failed is not None:
            raise self._failed
        files, self._files = self._files, []
        return files

    def close(self) -> None:
        """Stop the writer threads and delete the part files not handed out by ``finish``."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        for _, path in self._files:
            with suppress(FileNotFoundError):
                os.remove(path)
