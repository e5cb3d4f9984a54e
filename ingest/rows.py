"""One parsed file -> the rows it adds to the store's tables (runs, problems, steps, telemetry).

Runs in the parser workers, so that the main ingest process only concatenates and writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from bench.ingest import links, rundir, runjson
from bench.ingest import patterns as pat
from bench.ingest.parse import FileParse
from bench.ingest.records import Problem
from bench.ingest.table_rows import run_row, score_scale_row, steps_table, system_row, telemetry_table
from bench.sql.names import storable


@dataclass
class FileRows:
    """What one file adds: its run and problem rows, and counts for the summary and sources table."""

    format: str | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    systems: list[dict[str, Any]] = field(default_factory=list)
    score_scales: list[dict[str, Any]] = field(default_factory=list)
    telemetry_links: list[dict[str, Any]] = field(default_factory=list)  # its pending row (bench.ingest.links, bench.sql.links)
    n_steps: int = 0
    n_telemetry: int = 0


@dataclass(frozen=True)
class FileRef:
    """Identity of one file: its source name, content hash and the path patterns match against.

    ``sidecar``: the run.json of a ``bench run`` directory whose output.log this is (``sha`` then covers
    the log's bytes followed by run.json's, so an updated run.json is ingested again).
    """

    source: str
    sha: str
    match_path: str
    sidecar: bytes | None = None
    run_id: str | None = None  # the run this file's telemetry belongs to (a run directory's telemetry.csv)


def file_rows(parsed: FileParse, ref: FileRef, patterns: list[pat.PathPattern], now: float) -> FileRows:
    """Rows of one parsed file, with run.json (``ref.sidecar``) and then path-pattern values filled in
    (conflicts become problems). A run directory whose log shows no run still gives one run row."""
    res = parsed.result
    values = pat.match_first(patterns, ref.match_path)
    if parsed.format == "mlperf":  # the results tree's own layout, under what --path-pattern gave
        values = {**pat.match_first(pat.RESULTS_TREE, ref.match_path), **values}
    out = FileRows(parsed.format, n_steps=res.steps.total_rows, n_telemetry=res.telemetry.total_rows)
    runs = res.runs
    if ref.sidecar is not None:
        meta, problems = runjson.load(ref.sidecar)
        res.problems.extend(problems)
        if meta is not None:
            runs = [rundir.apply_run_json(r, meta, res.problems) for r in (res.runs or [rundir.empty_run(meta)])]
    for run in runs:
        run = pat.apply(run, values, res.problems)
        out.runs.append(run_row(run, source=ref.source, sha=ref.sha, ingested_at=now))
    place = pat.match_first(pat.SYSTEMS_TREE, ref.match_path) if res.systems else {}
    out.systems = [system_row(s, source=ref.source, sha=ref.sha, ingested_at=now,
                              place={"system": s.system_name} if parsed.format == "host_metadata" and s.system_name else place)
                   for s in res.systems]  # a machine's metadata: its folder is its system
    place = pat.match_first(pat.SCALING_TREE, ref.match_path) if res.score_scales else {}
    out.score_scales = [score_scale_row(s, source=ref.source, sha=ref.sha, place=place, ingested_at=now)
                        for s in res.score_scales]
    out.problems = [problem_row(ref.source, ref.sha, parsed.format, p, now) for p in res.problems]
    return out


def chunk_rows(parses: list[tuple[FileParse, FileRef]], patterns: list[pat.PathPattern], now: float
               ) -> tuple[list[FileRows], pa.Table, pa.Table]:
    """The rows of a chunk of parsed files: each file's run and problem rows, and the steps and telemetry
    of all of them as two Arrow tables (buffers emptied). Per-file isolation: a file whose rows cannot be
    made (an Arrow or conversion error) keeps only its problem rows plus one ``store_error`` problem naming
    the error; none of its runs, steps or telemetry are stored, and the other files are not touched."""
    rows: list[Any] = [_guarded(file_rows, p, ref, patterns, now) for p, ref in parses]
    steps_in = [(p.result.steps.take(), ref.sha) if p.result.steps.buffered() else None for p, ref in parses]
    telemetry_in = [((p.result.telemetry.take(), ref.sha, ref.source, pat.match_first(patterns, ref.match_path)),
                     ref.run_id) if p.result.telemetry.buffered() else None for p, ref in parses]

    def build(ok: list[int]) -> tuple[pa.Table, pa.Table]:
        steps = [s for i in ok if (s := steps_in[i]) is not None]
        sampled = [t for i in ok if (t := telemetry_in[i]) is not None]
        return steps_table(steps), telemetry_table([t for t, _ in sampled], [owner for _, owner in sampled])

    kept = [i for i, r in enumerate(rows) if not isinstance(r, _Failed)]
    try:
        steps, telemetry = build(kept)
    except Exception:  # one file's values broke the chunk's tables: find it, keep the others
        tables = []
        for i in kept:
            one = _guarded(build, [i])
            if isinstance(one, _Failed):
                rows[i] = one
            else:
                tables.append(one)
        steps = _concat([t[0] for t in tables], steps_table([]))
        telemetry = _concat([t[1] for t in tables], telemetry_table([], []))
    out = [r.rows(p, ref, now) if isinstance(r, _Failed) else r for (p, ref), r in zip(parses, rows, strict=True)]
    for r, sampled in zip(rows, telemetry_in, strict=True):
        if sampled is not None and sampled[1] is None and not isinstance(r, _Failed):
            cols, sha, source, tags = sampled[0]
            pending = links.pending_row(links.span(cols), sha, source, tags, now)
            r.telemetry_links = [pending] if pending else []
    return out, steps, telemetry


@dataclass
class _Failed:
    """A file whose rows could not be made, and why."""

    error: str

    def rows(self, parsed: FileParse, ref: FileRef, now: float) -> FileRows:
        problems = [*parsed.result.problems,
                    Problem("store_error", f"this file's rows could not be stored, so none were: {self.error}")]
        return FileRows(parsed.format, problems=[problem_row(ref.source, ref.sha, parsed.format, p, now) for p in problems])


def _guarded(make: Any, *args: Any) -> Any:
    try:
        return make(*args)
    except Exception as e:  # values a parser let through; the file is isolated, never the ingest
        return _Failed(f"{type(e).__name__}: {e}"[:300])


def _concat(tables: list[pa.Table], empty: pa.Table) -> pa.Table:
    return pa.concat_tables(tables, promote_options="default") if tables else empty


def problem_row(source: str, sha: str | None, fmt: str | None, p: Problem, now: float) -> dict[str, Any]:
    return {"source": storable(source), "source_sha256": sha, "format": fmt, "kind": p.kind, "line_no": p.line_no,
            "text": None if p.text is None else storable(p.text), "message": storable(p.message),
            "ingested_at": round(now * 1e6)}
