"""``bench ingest``: every file under the given paths -> parsed -> one atomic batch of Parquet rows.

Contract: never raises for bad input (it becomes a problem row or a run status); raises BenchError for
usage errors (a path that does not exist, an unknown --format, a bad --path-pattern, a store of another
schema version). Idempotent: a source whose SHA-256 is already in the store is skipped.

The loop: ``iter_items`` (files, directories, archive members) -> the read stage (``_read_item``: read
and hash, identity) -> detect, parse, buffer, write (``stages.parse_files``: held files in chunks in
``pool.ParserPool``, a streamed one here) -> the current ``store.Batch`` (``_record``) -> committed to the
tables every ``BATCH_SOURCES`` sources and at the end -> published once (bench.sql.store's protocol), so
that a reader sees all of the ingest or none of it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from bench.ingest import patterns as pat
from bench.ingest import read_stage, registry
from bench.ingest.identity import Identities, meaning, text
from bench.ingest.items import DEFAULT_LIMITS, READ_ERRORS, Item, Limits
from bench.ingest.memory import give_back, tuned
from bench.ingest.parts import Parts
from bench.ingest.pool import Job, ParserPool, file_ref
from bench.ingest.records import Problem
from bench.ingest.rows import FileRows, problem_row
from bench.ingest.sources import ARCHIVE_CUT, ARCHIVE_UNREADABLE, is_archive, iter_items
from bench.ingest.stages import parse_files
from bench.ingest.versions import Hashing, Place
from bench.sql.compact import maybe_compact
from bench.sql.errors import BenchError
from bench.sql.store import Batch, StoreWriter

BATCH_SOURCES = 2000  # commit every this many new sources, so a long ingest keeps its progress


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
    #: The run_id of every run row this ingest added, in file order, and the runs files holding them (a
    #: compaction after the ingest leaves them readable for store.VACUUM_HOURS).
    run_ids: list[str] = field(default_factory=list)
    runs_files: list[str] = field(default_factory=list)
    #: Files that gave runs but whose path matched none of the --path-pattern templates given.
    pattern_misses: int = 0
    #: Files that extend a version of themselves ingested before (``versions``), which they supersede.
    superseded: int = 0
    #: Tables restored to the store's committed state before this ingest: a killed writer's unpublished work.
    rolled_back: list[str] = field(default_factory=list)
    #: ``--rebuild`` only: tables whose log could not be read (moved aside), and recorded sources it could
    #: neither parse again nor carry over (their rows are gone).
    set_aside: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    #: ``--rebuild`` only: rows of damaged files that neither a log nor a readable file could restore, one
    #: line per table (given up with ``--accept-loss``; without it the rebuild refuses).
    given_up: list[str] = field(default_factory=list)
    #: Archives not read to their end (cut or corrupt), each with how far: what was read is stored, and
    #: ``bench ingest`` exits 1 (as tar does).
    incomplete: list[str] = field(default_factory=list)
    #: ``--rebuild`` only: how a damaged or lost commits table was made again (bench.sql.recover), or None.
    recovered: str | None = None
    #: Commits rows written but not in the commits table's log, recorded before this ingest (delta.roll_forward).
    rolled_forward: list[str] = field(default_factory=list)
    runs_by_status: dict[str, int] = field(default_factory=dict)
    runs_by_format: dict[str, int] = field(default_factory=dict)
    #: Files that compaction after the ingest merged (bench.sql.compact); 0 when it did not run.
    compacted_files: int = 0
    #: A store on object storage: why its tables' Delta logs were not brought to this ingest (bench.sql.projection).
    logs_behind: str | None = None

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes_read / 1e6 / self.wall_time_s if self.wall_time_s > 0 else None

    @property
    def problems(self) -> int:
        return sum(self.problems_by_kind.values())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["run_ids"], out["runs_files"]  # lists as long as the ingest; the counts say what happened
        return {**out, "mb_per_s": self.mb_per_s, "problems": self.problems}


@dataclass
class _Context:
    writer: StoreWriter
    batch: Batch
    ids: Identities | None  # None once the read stage is over
    fmt: str | None
    patterns: list[pat.PathPattern]
    summary: IngestSummary
    counters: dict[str, Counter[str]]
    pattern_texts: list[str]


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
    limits: Limits = DEFAULT_LIMITS,
    earlier: Sequence[dict[str, Any]] = (),
    compact: bool = True,
) -> IngestSummary:
    """Ingest ``paths`` into the store at ``store``; see the module docstring for the contract.

    ``workers`` parser processes (default: one per core, started once more than ``ParserPool.INLINE_BYTES``
    are queued, or at once for an archive larger than that; 0 parses in this process). The main process
    reads and hashes, takes streamed files through the stages and commits batches; held files go through
    them in the workers, which write their part files themselves; results are recorded in file order.
    ``skip_globs``: files found under a directory or in an archive whose path or name matches one of
    these shell patterns are not read_stage. ``limits``: how far an archive member may expand before it is
    stopped as a decompression bomb (its read_error problem says so). ``earlier``: sources rows of versions
    of the files that are not in this store (a rebuild's old generation), for ``versions``. ``compact``
    False: no compaction after the publish (an ingest staged for object storage: bench.ingest.remote_ingest).
    """
    registry.check_format(fmt)
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise BenchError(f"no such file or directory: {', '.join(missing)}")
    compiled = [pat.PathPattern.compile(t) for t in path_patterns]
    t0 = time.perf_counter()
    summary = IngestSummary(store=str(store))
    with tuned(), StoreWriter(Path(store), wait_message=on_wait) as writer, ParserPool(workers) as parsers:
        summary.rolled_back, summary.rolled_forward = writer.rolled_back, writer.rolled_forward
        parsers.patterns = compiled
        parsers.scratch = str(writer.scratch())
        if _archive_bytes(paths) > ParserPool.INLINE_BYTES:
            parsers.start()  # a big archive's first chunks go to the workers too
        ids = Identities(writer.known_sources(), writer.known_duplicates(), list(earlier))
        ctx = _Context(writer, writer.new_batch(), ids, fmt, compiled, summary,
                       {"problems": Counter(), "status": Counter(), "format": Counter()}, list(path_patterns))
        for item in iter_items(paths, exclude=str(store), skip_globs=tuple(skip_globs), limits=limits):
            job = _read_item(item, ctx)
            if job is not None:
                parsers.submit(job, fmt)
            for chunk in parsers.ready():
                _finish(*chunk, ctx, progress)
        for chunk in parsers.drain():
            _finish(*chunk, ctx, progress)
        if ctx.batch.n_sources or ctx.batch.rows["problems"]:
            ctx.summary.runs_files.extend(map(str, ctx.batch.commit()))
        # what the read stage kept per file is not needed by the commit: freed, and given back, before the
        # link step and a compaction allocate (a 200,000-member archive's ingest peaked there)
        summary.duplicates_skipped = ids.skipped
        ctx.ids = None
        del ids
        give_back()
        writer.link_telemetry()  # telemetry files to the runs they were sampled for
        if writer.sources or writer.checksums:
            writer.publish("ingest")  # the commit point: every batch of this ingest at once
        if compact:
            summary.compacted_files = maybe_compact(writer)  # past compact.AUTO_FILES files in a table
    summary.problems_by_kind = dict(ctx.counters["problems"])
    summary.runs_by_status = dict(ctx.counters["status"])
    summary.runs_by_format = dict(ctx.counters["format"])
    summary.wall_time_s = time.perf_counter() - t0
    return summary


def _archive_bytes(paths: list[str]) -> int:
    """The size on disk of the archives among ``paths`` (compressed: a lower bound of what they hold)."""
    return sum(os.path.getsize(p) for p in paths if os.path.isfile(p) and is_archive(p))


def _read_item(item: Item, ctx: _Context) -> Job | None:
    """The read stage: read and hash one item, and settle its identity (``identity``). Returns the parse
    job of a new held file; a streamed one goes through the other stages here (``_stream``)."""
    ctx.summary.files_seen += 1
    ids = ctx.ids
    assert ids is not None
    if item.reader is None:
        _problem_only(ctx, item, Problem("read_error", item.error or "unreadable"))
        if item.member is None and (item.error or "").startswith((ARCHIVE_CUT, ARCHIVE_UNREADABLE)):
            ctx.summary.incomplete.append(f"{item.source}: {item.error}")
        return None
    where = ids.place(item)
    hashing = ids.hashing(where)
    if item.size > read_stage.BIG_FILE:
        _stream(item, where, hashing, ids, ctx)
        return None
    try:
        data, hashed = read_stage.read_held(item, hashing, meaning(item))
    except READ_ERRORS as e:
        _problem_only(ctx, item, Problem("read_error", f"{type(e).__name__}: {e}"))
        return None
    ctx.summary.bytes_read += len(data)
    sha = ids.identify(item, where, hashed)
    _copies(ids, ctx)
    if sha is None:
        return None
    return Job(item, sha, data, ids.owner(item), *ids.new_version(where, len(data), hashing, sha))


def _stream(item: Item, where: Place, hashing: Hashing, ids: Identities, ctx: _Context) -> None:
    """A file over ``read_stage.BIG_FILE``, never held: the same stages as a held file's (``stages.parse_files``),
    run here, hashed on a thread while it is parsed, its part files written on threads."""
    ctx.summary.bytes_read += item.size
    owner = ids.owner(item)
    try:
        with (Parts(str(ctx.writer.scratch()), threads=Parts.WRITERS) as parts,  # closed last: its writes wait
              read_stage.Streamed(item, hashing, meaning(item), partial(ids.identify, item, where)) as streamed):
            (rows,), files = parse_files([(streamed, file_ref(item, "", owner))], ctx.fmt, ctx.patterns, parts)
    except READ_ERRORS as e:
        _problem_only(ctx, item, Problem("read_error", f"{type(e).__name__}: {e}"))
        return
    finally:
        _copies(ids, ctx)
    if rows is None:  # in the store already
        return
    for name, path in files:
        ctx.batch.adopt(name, path)
    sha = streamed.identity.result()
    _record(item, sha, item.size, rows, ctx, *ids.new_version(where, item.size, hashing, sha))


def _copies(ids: Identities, ctx: _Context) -> None:
    """The problem rows of the copies the read stage found."""
    for item, problem, sha in ids.problems:
        _problem_only(ctx, item, problem, sha)
    ids.problems.clear()


def _finish(
    jobs: list[Job], rows: list[FileRows], parts: list[tuple[str, str]], ctx: _Context,
    progress: Callable[[str, int], None] | None,
) -> None:
    """Record a parsed chunk of files in the current batch (committing it when it is full)."""
    for name, path in parts:
        ctx.batch.adopt(name, path)
    for job, file in zip(jobs, rows, strict=True):
        _record(job.item, job.sha, len(job.data), file, ctx, job.content_sha256, job.supersedes)
        if progress:
            progress(job.item.name, ctx.summary.bytes_read)
    if ctx.batch.n_sources >= BATCH_SOURCES:
        ctx.summary.runs_files.extend(map(str, ctx.batch.commit()))
        ctx.batch = ctx.writer.new_batch()


def _record(item: Item, sha: str, size: int, file: FileRows, ctx: _Context, content: str | None = None,
            supersedes: str | None = None) -> None:
    """Add one file's rows and its sources row to the current batch, and count them."""
    assert ctx.ids is not None
    batch, now, where = ctx.batch, time.time(), ctx.ids.place(item)
    runs = file.runs
    if isinstance(runs, list):
        batch.rows["runs"].extend(runs)
        statuses, run_ids = [run["status"] for run in runs], [run["run_id"] for run in runs]
    else:  # a file of many runs: their table (rows.RUNS_AS_TABLE)
        batch.rows["runs"].append(runs)
        statuses, run_ids = runs.column("status").to_pylist(), runs.column("run_id").to_pylist()
    batch.rows["problems"].extend(file.problems)
    batch.rows["systems"].extend(file.systems)
    batch.rows["score_scales"].extend(file.score_scales)
    batch.rows["telemetry_links"].extend(file.telemetry_links)
    ctx.counters["status"].update(statuses)
    if runs:
        ctx.counters["format"][file.format or "?"] += len(runs)
    ctx.summary.run_ids.extend(run_ids)
    for p in file.problems:
        ctx.counters["problems"][p["kind"]] += 1
    if ctx.patterns and file.runs and not pat.match_first(ctx.patterns, item.match_path):
        ctx.summary.pattern_misses += 1
    if not file.stored:  # its problems only: the next ingest reads it again
        ctx.summary.files_parsed += 1
        return
    batch.rows["sources"].append(
        {"source": item.name, "source_sha256": sha, "content_sha256": content, "supersedes": supersedes,
         "size_bytes": size, "archive": text(item.archive), "member": text(item.member), "resolved_path": where[0],
         "format": file.format, "forced_format": ctx.fmt is not None, "path_patterns": ctx.pattern_texts,
         "n_runs": len(file.runs), "n_steps": file.n_steps, "n_problems": len(file.problems),
         "ingested_at": round(now * 1e6)}
    )
    batch.n_sources += 1
    s = ctx.summary
    s.superseded += supersedes is not None
    s.runs_added += len(file.runs)
    s.steps_added += file.n_steps
    s.telemetry_added += file.n_telemetry
    if file.format is None and not any(p["kind"] == "resource" for p in file.problems):
        s.unrecognized += 1
    else:
        s.files_parsed += 1


def _problem_only(ctx: _Context, item: Item, p: Problem, sha: str | None = None) -> None:
    ctx.batch.rows["problems"].append(problem_row(item.name, sha, None, p, time.time()))
    ctx.counters["problems"][p.kind] += 1
