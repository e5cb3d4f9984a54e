"""Open the Parquet store as DuckDB views: ``runs``, ``steps``, ``telemetry``, ``problems``, ``sources``,
and the curated views of ``sql/`` (see bench.analytics.views).

The one place where table names meet file paths; every query reads the logical view names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.analytics.run_stats import compute_run_stats
from bench.analytics.views import register_views
from bench.ingest import health
from bench.ingest.errors import BenchError, UsageError
from bench.ingest.schema import TABLES
from bench.ingest.store import check_store, table_files

if TYPE_CHECKING:
    import duckdb


def connect(root: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per store table (empty views for empty tables).

    Raises BenchError when ``root`` is not a store of this schema version. A damaged batch is left out
    with a one-line warning on stderr naming it and the fix (``bench.ingest.health``).
    """
    import duckdb

    check_store(root)
    state = health.check(root)
    for line in state.messages(root):  # the rest of the store still answers
        print(f"warning: {line}", file=sys.stderr)
    con = duckdb.connect(":memory:")
    for table, schema in TABLES.items():
        files = table_files(root, table, state.sound)
        if files:
            listing = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
        else:
            con.register(f"_empty_{table}", schema.empty_table())
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM _empty_{table}")

    register_views(con)
    return con


def register_python_views(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Register the Python-computed views that ``sql`` mentions (``run_stats``: per-run warm-up, CV and a
    HAC confidence interval from the steps; see bench.analytics.run_stats)."""
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
    con = connect(root)
    try:
        register_python_views(con, sql)
        rel = con.execute(sql)
        cols = [d[0] for d in rel.description] if rel.description else []
        return cols, rel.fetchall()
    except duckdb.Error as e:
        raise BenchError(f"SQL failed: {e}") from e
