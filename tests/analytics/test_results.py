"""DuckDB results are drained through one helper (bench.analytics.results): a ``fetchone`` on a shared
connection left DuckDB 2.0's result unfinished and broke the next query (bench run, then bench report)."""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb

from bench.analytics.results import first, rows

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ingest", "runner", "analytics", "sql")


def test_no_partial_fetch_outside_the_helper() -> None:
    found = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if path.name == "results.py" and path.parent.name == "analytics":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("fetchone", "fetchmany"):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], f"read results with bench.analytics.results.first/rows instead: {found}"


def test_first_drains_so_the_next_query_runs() -> None:
    con = duckdb.connect(":memory:")
    assert first(con, "SELECT * FROM range(5)") == (0,)
    assert rows(con, "SELECT ? + 1", [41]) == [(42,)]
    assert first(con, "SELECT * FROM range(0)") is None
