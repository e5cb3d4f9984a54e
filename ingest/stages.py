"""Detect, parse, buffer, write: what becomes of the bytes of every file, held or streamed, wherever it runs.

``parse_files`` takes files the read stage has read and hashed (``pipeline``, ``read``): a chunk of held
files, in a parser worker or inline (``pool``), or one streamed file, in the ingest process (``pipeline``).
For each file, in order:
1. **detect and parse** (``parse``): its format, then its runs, problems, and step and telemetry rows;
2. **buffer**: those rows wait in the result's column buffers (``tables``); a streamed file's are handed
   on every ``SPILL_ROWS`` rows, so that its memory stays bounded;
3. its run, problem and other rows (``rows.file_rows``), once its identity is known;
4. **write**: the buffered rows go to ``parts.Parts``, which writes them as part files.
The caller adds the rows and part files to the store's batch.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future

from bench.ingest import patterns as pat
from bench.ingest import pending_links
from bench.ingest.parse import FileParse, parse_bytes, parse_stream
from bench.ingest.parts import PartFile, Parts
from bench.ingest.read_stage import Streamed
from bench.ingest.records import ParseResult
from bench.ingest.rows import FileRef, FileRows, failed_rows, file_rows
from bench.ingest.sample_tables import StepTable, TelemetryTable

#: What ``parse_files`` is given of one file: its bytes (held) or its stream. A streamed file's
#: ``FileRef.sha`` is set once its hash is known (``Streamed.resolve``).
Content = bytes | Streamed
SPILL_ROWS = 500_000  # a streamed file's step / telemetry rows are handed on every this many rows


def parse_files(files: Sequence[tuple[Content, FileRef]], fmt: str | None, patterns: list[pat.PathPattern],
                parts: Parts) -> tuple[list[FileRows | None], list[tuple[str, str]]]:
    """Each file's rows (None for a streamed file found to be in the store already: its parse stopped
    early), and the part files holding all their steps and telemetry, as (table, path). Never raises for
    a file's bad values: a file whose rows cannot be made or written keeps only its problem rows plus a
    ``store_error`` problem naming the error, and the other files are not touched."""
    now = time.time()
    done: list[tuple[FileParse, FileRef, PartFile, FileRows | None, bool]] = []  # ..., skipped
    for content, ref in files:
        streamed = content if isinstance(content, Streamed) else None
        sha = streamed.identity if streamed else _known(ref.sha)
        tags = pat.match_first(patterns, ref.match_path)
        target = parts.file(sha, ref.source, tags, ref.run_id, streamed.resolve if streamed else None)
        spill_rows = SPILL_ROWS if streamed else sys.maxsize  # a held file's rows stay in reach of the checks
        result = ParseResult(steps=StepTable(spill=parts.sink(target, "steps"), spill_rows=spill_rows),
                             telemetry=TelemetryTable(spill=parts.sink(target, "telemetry"), spill_rows=spill_rows))
        if streamed is None:
            assert isinstance(content, bytes)
            parsed = parse_bytes(content, source=ref.source, fmt=fmt, result=result)
        else:
            with streamed.open() as chunks:
                parsed = parse_stream(streamed.head, chunks, source=ref.source, fmt=fmt, result=result)
            if streamed.resolve() is None:  # in the store already
                target.error = "in the store already"  # its rows are not written
                done.append((parsed, ref, target, None, True))
                continue
            ref = dataclasses.replace(ref, sha=sha.result())
        try:
            rows: FileRows | None = file_rows(parsed, ref, patterns, now)
        except Exception as e:  # values a parser let through; the file is isolated, never the ingest
            target.error = f"{type(e).__name__}: {e}"[:300]
            rows = None
        result.steps.flush()
        result.telemetry.flush()
        done.append((parsed, ref, target, rows, False))
    written = parts.finish()
    out: list[FileRows | None] = []
    for parsed, ref, target, rows, skipped in done:
        if skipped:
            out.append(None)
        elif rows is None or target.error is not None:
            out.append(failed_rows(parsed, ref, target.error or "", now))
        else:
            pending = pending_links.pending_row(target.span, ref.sha, ref.source, target.tags, now)
            rows.telemetry_links = [pending] if pending else []
            out.append(rows)
    return out, written


def _known(sha: str) -> Future[str]:
    done: Future[str] = Future()
    done.set_result(sha)
    return done
