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


#: What ``bench sql`` runs: queries. Every other statement (COPY, ATTACH, EXPORT, PRAGMA, SET, INSTALL, LOAD,
#: CREATE, INSERT, ...) is refused before anything runs, and the query's connection can read only the
#: store's own files and write none (``bench.sql.read.connect(confined=True)``).
QUERY_STATEMENTS = ("SELECT", "EXPLAIN")


def run_sql(root: Path, sql: str) -> tuple[list[str], list[tuple[object, ...]]]:
    """Run one SQL query (or several, giving the last one's rows) over the store, read-only; returns (column
    names, rows). Raises UsageError for an empty query or a statement that is not a query, BenchError on SQL
    errors (a file outside the store included)."""
    import duckdb

    if not sql.strip():
        raise UsageError('the SQL query is empty; e.g. bench sql "SELECT * FROM runs LIMIT 5"')
    try:
        kinds = [s.type.name for s in duckdb.extract_statements(sql)]
    except duckdb.Error as e:
        raise BenchError(f"SQL failed: {e}") from e
    if refused := [k for k in kinds if k not in QUERY_STATEMENTS]:
        raise UsageError(f"bench sql runs queries only and never writes; {refused[0]} statements are refused "
                         "(to keep a result, redirect --format csv or json to a file)")
    con = connect(root, reads=sql, confined=True)
    try:
        register_python_views(con, sql)
        rel = con.execute(sql)
        cols = [d[0] for d in rel.description] if rel.description else []
        return cols, rel.fetchall()
    except duckdb.PermissionException as e:
        raise UsageError(f"bench sql reads only the store's own files: {str(e).splitlines()[0]}") from e
    except duckdb.Error as e:
        raise BenchError(f"SQL failed: {e}") from e
