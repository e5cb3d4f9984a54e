"""``bench changes --accept RUN`` / ``--unaccept RUN``: check the run against the store's series and changes,
and record the decision (bench.analytics.decisions)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics.changes import find_changes, load_series
from bench.analytics.decisions import accepted, record
from bench.analytics.results import first
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb


def decide(root: Path, con: duckdb.DuckDBPyConnection, metric: str, order_by: str | None, accept: str | None,
           unaccept: str | None, why: str | None, by: str | None) -> str:
    """``bench changes --accept RUN`` / ``--unaccept RUN``: check the run, record the decision, and say it in
    one line. Raises UsageError for a run that is not a point of a series, or a decision without a reason."""
    if accept and unaccept:
        raise UsageError("--accept and --unaccept: one decision at a time")
    run = accept if accept is not None else unaccept or ""
    if not run.strip():
        raise UsageError(f"--{'accept' if accept is not None else 'unaccept'} needs a run id (bench changes names "
                         "each change's run)")
    if not why or not why.strip():
        raise UsageError(f"--why is required with --{'accept' if accept else 'unaccept'}: it is recorded with who and when")
    found = [(s, p) for s in load_series(con, metric, order_by) for p in s.points if p.run_id == run]
    if not found:
        raise UsageError(f"run {run!r} {_why_no_point(con, run, metric, order_by)}")
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


def _why_no_point(con: duckdb.DuckDBPyConnection, run: str, metric: str, order_by: str | None) -> str:
    """Why ``run`` is not a point of any series: not in the store, not ok, no value, or no place in order."""
    order = order_by or "started_at"
    row = first(con, f"SELECT status, {metric}, ({order}) FROM runs WHERE run_id = ?", [run])
    if row is None:
        return "is not in the store (bench changes names each change's run)"
    status, value, key = row
    if status != "ok":
        return f"is {status}: it has no {metric}, so it starts no level"
    if value is None:
        return f"has no {metric} (its log gives another metric: --metric), so it starts no level"
    if key is None:
        return (f"has no {order}, so it has no place in its series (order the runs by another column with "
                "--order-by, e.g. a tag that dates them)")
    return "is not a point of any series"
