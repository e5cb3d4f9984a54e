"""Read DuckDB results whole: the one way the analytics take rows from a shared connection.

DuckDB 2.0 keeps a result open until it is read to the end: reading only its first row leaves the rest
pending, and the next ``execute`` on the same connection fails with "connection has an unfinished result".
Every query here is read with ``rows`` or ``first``, which drain it (tests/analytics/test_results.py
refuses a partial fetch anywhere else in the package).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    """Every row of ``sql``, read to the end."""
    return con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()


def first(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (None when it has none); the result is drained all the same."""
    found = rows(con, sql, params)
    return found[0] if found else None
