"""One parsed file -> the rows it adds to the store's tables (runs, problems, steps, telemetry).

Runs in the parser workers, so that the main ingest process only concatenates and writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from bench.ingest import patterns as pat
from bench.ingest import rundir
from bench.ingest.parse import FileParse
from bench.ingest.records import Problem
from bench.ingest.schema import run_row, steps_table, telemetry_table


@dataclass
class FileRows:
    """What one file adds: its run and problem rows, and counts for the summary and sources table."""

    format: str | None
    runs: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
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
    out = FileRows(parsed.format, n_steps=res.steps.total_rows, n_telemetry=res.telemetry.total_rows)
    runs = res.runs
    if ref.sidecar is not None:
        meta, problems = rundir.load_run_json(ref.sidecar)
        res.problems.extend(problems)
        if meta is not None:
            runs = [rundir.apply_run_json(r, meta, res.problems) for r in (res.runs or [rundir.empty_run()])]
    for run in runs:
        run = pat.apply(run, values, res.problems)
        out.runs.append(run_row(run, source=ref.source, sha=ref.sha, ingested_at=now))
    out.problems = [problem_row(ref.source, ref.sha, parsed.format, p, now) for p in res.problems]
    return out


def tables(parses: list[tuple[FileParse, FileRef]], patterns: list[pat.PathPattern]) -> tuple[pa.Table, pa.Table]:
    """The steps and telemetry still buffered in ``parses``, as two Arrow tables (buffers emptied)."""
    steps = steps_table([(p.result.steps.take(), ref.sha) for p, ref in parses if p.result.steps.buffered()])
    sampled = [(p, ref) for p, ref in parses if p.result.telemetry.buffered()]
    telemetry = telemetry_table(
        [(p.result.telemetry.take(), ref.sha, ref.source, pat.match_first(patterns, ref.match_path)) for p, ref in sampled],
        [ref.run_id for _, ref in sampled],
    )
    return steps, telemetry


def problem_row(source: str, sha: str | None, fmt: str | None, p: Problem, now: float) -> dict[str, Any]:
    return {"source": source, "source_sha256": sha, "format": fmt, "kind": p.kind, "line_no": p.line_no,
            "text": p.text, "message": p.message, "ingested_at": round(now * 1e6)}
