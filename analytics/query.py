"""What `bench sql` and the analytics commands add to the store's connection (bench.sql.read): the views
computed in Python, one statement run, and the user error for a view that cannot be read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics.run_stats import compute_run_stats
from bench.sql.errors import BenchError, UsageError
from bench.sql.read import connect

if TYPE_CHECKING:
    import duckdb


def register_python_views(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Register the Python-computed views that ``sql`` mentions (``run_stats``: per-run warm-up, CV and a
    batch-means confidence interval from the steps; see bench.analytics.run_stats)."""
    import re

    if re.search(r"\brun_stats\b", sql, re.IGNORECASE):

        con.register("run_stats", compute_run_stats(con))


def view_error(error: Exception, view: str, where: str | None) -> BenchError:
    """The user error for a failed read of ``view``: a UsageError (exit 2) naming --where when one was
    given (it is what failed), else a BenchError naming the view."""
    if where:
        return UsageError(f"reading {view} with --where {where!r} failed: {error}")
    return BenchError(f"reading the view {view} failed: {error}")


def run_sql(root: Path, sql: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run one SQL statement over the store; returns (column names, rows); a statement that returns no
    rows gives ([], []). Raises UsageError for an empty query, BenchError on SQL errors."""
    import duckdb

    if not sql.strip():
        raise UsageError('the SQL query is empty; e.g. bench sql "SELECT * FROM runs LIMIT 5"')
    con = connect(root, reads=sql)
    try:
        register_python_views(con, sql)
        rel = con.execute(sql)
        cols = [d[0] for d in rel.description] if rel.description else []
        return cols, rel.fetchall()
    except duckdb.Error as e:
        raise BenchError(f"SQL failed: {e}") from e
