"""One parsed file -> its run, problem, system and score-scale rows (its steps and telemetry are written
as part files: ``parts``).

Made where the file was parsed (``stages``): in a parser worker for held files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from bench.ingest import gpu_load, run_dirs
from bench.ingest import patterns as pat
from bench.ingest.parse import FileParse
from bench.ingest.records import Problem
from bench.ingest.table_rows import run_row, runs_table, score_scale_row, system_row
from bench.sql import runjson
from bench.sql.columns import GPU_LOAD_DETAILS
from bench.sql.names import storable

#: A file with this many runs or more gives its runs as one table, not a dict per run (18,571 nccl-tests runs: 0.085 s
#: against 0.22 s). A table costs about 0.4 ms whatever its rows, some 60 runs' dicts, which a batch converts together.
RUNS_AS_TABLE = 100


@dataclass
class FileRows:
    """What one file adds: its run and problem rows, and counts for the summary and sources table."""

    format: str | None
    #: Its run rows: dicts, or for a file of RUNS_AS_TABLE runs or more their table (``table_rows.runs_table``).
    runs: list[dict[str, Any]] | pa.Table = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    systems: list[dict[str, Any]] = field(default_factory=list)
    score_scales: list[dict[str, Any]] = field(default_factory=list)
    telemetry_links: list[dict[str, Any]] = field(default_factory=list)  # its pending row (bench.ingest.pending_links, bench.sql.links)
    n_steps: int = 0
    n_telemetry: int = 0
    #: False for a file whose rows could not be stored (``failed_rows``): it gets no sources row, so that
    #: the next ingest reads it again.
    stored: bool = True


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
        res.problems.extend(Problem(p.kind, p.message) for p in problems)
        if meta is not None:
            runs = [run_dirs.apply_run_json(r, meta, res.problems) for r in (res.runs or [run_dirs.empty_run(meta)])]
            load = gpu_load.beside(ref.source, meta) if "::" not in ref.source else None  # not an archive member
            if load is not None:
                runs = [dataclasses.replace(r, details={**r.details, GPU_LOAD_DETAILS: load}) for r in runs]
    runs = [pat.apply(run, values, res.problems) for run in runs]
    if len(runs) >= RUNS_AS_TABLE:
        out.runs = runs_table(runs, source=ref.source, sha=ref.sha, ingested_at=now)
    else:
        out.runs = [run_row(run, source=ref.source, sha=ref.sha, ingested_at=now) for run in runs]
    place = pat.match_first(pat.SYSTEMS_TREE, ref.match_path) if res.systems else {}
    out.systems = [system_row(s, source=ref.source, sha=ref.sha, ingested_at=now,
                              place={"system": s.system_name} if parsed.format == "host_metadata" and s.system_name else place)
                   for s in res.systems]  # a machine's metadata: its folder is its system
    place = pat.match_first(pat.SCALING_TREE, ref.match_path) if res.score_scales else {}
    out.score_scales = [score_scale_row(s, source=ref.source, sha=ref.sha, place=place, ingested_at=now)
                        for s in res.score_scales]
    out.problems = [problem_row(ref.source, ref.sha, parsed.format, p, now) for p in res.problems]
    return out


def failed_rows(parsed: FileParse, ref: FileRef, error: str, now: float) -> FileRows:
    """The rows of a file whose rows could not be made or written: its problems, and one ``store_error``
    naming ``error``; none of its runs."""
    problems = [*parsed.result.problems,
                Problem("store_error", f"this file's rows could not be stored, so none were: {error}")]
    return FileRows(parsed.format, problems=[problem_row(ref.source, ref.sha, parsed.format, p, now) for p in problems],
                    stored=False)


def problem_row(source: str, sha: str | None, fmt: str | None, p: Problem, now: float) -> dict[str, Any]:
    return {"source": storable(source), "source_sha256": sha, "format": fmt, "kind": p.kind, "line_no": p.line_no,
            "text": None if p.text is None else storable(p.text), "message": storable(p.message),
            "ingested_at": round(now * 1e6)}
