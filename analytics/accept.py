"""``bench changes --accept RUN`` / ``--unaccept RUN``: check the run against the store's series and changes,
and record the decision (bench.analytics.decisions)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics.changes import find_changes, load_series
from bench.analytics.decisions import accepted, record
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb


def decide(root: Path, con: duckdb.DuckDBPyConnection, metric: str, order_by: str | None, accept: str | None,
           unaccept: str | None, why: str | None, by: str | None) -> str:
    """``bench changes --accept RUN`` / ``--unaccept RUN``: check the run, record the decision, and say it in
    one line. Raises UsageError for a run that is not a point of a series, or a decision without a reason."""
    if accept and unaccept:
        raise UsageError("--accept and --unaccept: one decision at a time")
    run = accept or unaccept or ""
    if not why or not why.strip():
        raise UsageError(f"--why is required with --{'accept' if accept else 'unaccept'}: it is recorded with who and when")
    found = [(s, p) for s in load_series(con, metric, order_by) for p in s.points if p.run_id == run]
    if not found:
        (n,), = con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run]).fetchall()
        raise UsageError(f"run {run!r} " + ("has no value of the metric, so it starts no level" if n else
                                            "is not in the store (bench changes names each change's run)"))
    series, point = found[0]
    slide = ""
    if accept:  # a slide is accepted whole: at its last step, where its new level begins
        for c in find_changes(con, metric, order_by).changes:
            if c.run_id == run and c.slide:
                run, slide = c.slide["to_run"], f"; a slide, so at its last step, run {c.slide['to_run']}"
                point = next(p for p in series.points if p.run_id == run)
    current = accepted(root)
    if unaccept and run not in current:
        raise UsageError(f"run {run!r} is not accepted (bench changes lists what is)")
    d = record(root, "accept" if accept else "unaccept", run, series.series_id, series.label, why.strip(), by)
    when = point.started_at.date().isoformat() if point.started_at else "?"
    if accept:
        return (f"accepted {series.label}: the level from run {run} ({when}) is its reference for bench check now "
                f"({d.by}, {d.at}: {d.why}{slide})")
    return f"unaccepted {series.label}: run {run} ({when}) no longer starts its reference ({d.by}, {d.at}: {d.why})"
