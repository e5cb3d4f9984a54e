"""The curated queries of ``sql/`` as DuckDB views: ``sql/<name>.sql`` becomes the view ``<name>``.

Views may read each other (``scaling`` reads ``configs``); they are created in an order that
satisfies those references, found by retrying the ones whose dependencies are not created yet.
Queries are read only through ``importlib.resources`` (package data of ``bench.sql``).
"""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb


def load_sql(name: str) -> str:
    """The text of ``sql/<name>.sql``; raises FileNotFoundError for an unknown name."""
    return files("bench.sql").joinpath(f"{name}.sql").read_text()


def curated_names() -> list[str]:
    """Names of every curated query, sorted."""
    return sorted(p.name[:-4] for p in files("bench.sql").iterdir() if p.name.endswith(".sql"))


def register_views(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> None:
    """Create one view per curated query on ``con`` (all of them by default), and the curated views they
    read that ``con`` lacks (``configs`` reads ``run_configs``).

    Raises duckdb.Error when a query is wrong (not merely waiting for a view it reads).
    """
    import re

    import duckdb

    curated = set(curated_names())
    pending = list(curated if names is None else names)
    while pending:
        failed: list[tuple[str, duckdb.Error]] = []
        for name in pending:
            try:
                con.execute(f"CREATE OR REPLACE VIEW {name} AS {_strip(load_sql(name))}")
            except duckdb.CatalogException as e:  # reads a view not created yet: retry after the others
                failed.append((name, e))
        missing = {m.group(1) for _, e in failed if (m := re.search(r"Table with name (\w+) does not exist", str(e)))}
        added = sorted((missing & curated) - set(pending))
        if len(failed) == len(pending) and not added:
            raise failed[0][1]
        pending = added + [name for name, _ in failed]


def _strip(sql: str) -> str:
    """A query without its trailing semicolon (a view body is one SELECT)."""
    return sql.strip().rstrip(";")
