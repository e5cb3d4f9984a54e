"""Render an IngestSummary for a person (rich tables on stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.ingest.pipeline import IngestSummary


def print_summary(s: IngestSummary) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(markup=False, emoji=False, highlight=False)  # paths are text: "[exp]" and ":x:" stay
    t = Table(title=Text(f"bench ingest -> {s.store}"), show_header=False)
    t.add_row("files seen", str(s.files_seen))
    t.add_row("files parsed", str(s.files_parsed))
    t.add_row("runs added", str(s.runs_added))
    t.add_row("steps added", str(s.steps_added))
    t.add_row("telemetry samples added", str(s.telemetry_added))
    t.add_row("duplicates skipped", str(s.duplicates_skipped))
    t.add_row("unrecognized files", str(s.unrecognized))
    t.add_row("runs by status", _fmt(s.runs_by_status))
    t.add_row("runs by format", _fmt(s.runs_by_format))
    t.add_row("problems by kind", _fmt(s.problems_by_kind))
    if s.superseded:
        t.add_row("grown files", f"{s.superseded} files were ingested before, shorter: their earlier versions are "
                                 "superseded (kept, left out of the runs view; see all_runs)")
    if s.pattern_misses:
        t.add_row("--path-pattern", f"{s.pattern_misses} files with runs matched no pattern (their runs have no "
                                    "values from the path); check the template against `tar tf` / `find`")
    mbs = s.mb_per_s
    t.add_row("wall time", f"{s.wall_time_s:.2f} s" + (f"  ({mbs:.1f} MB/s, {s.bytes_read / 1e6:.1f} MB)" if mbs else ""))
    console.print(t)


def _fmt(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"
