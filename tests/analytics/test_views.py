"""Curated views: every sql/*.sql becomes a view of that name, in dependency order."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from bench.sql import views


def test_views_are_created_in_dependency_order(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {
        "b_reads_a": "SELECT x * 2 AS y FROM a_base",  # needs a_base, which sorts after it
        "a_base": "-- header\nSELECT x FROM runs WHERE x > 1;",
    }
    monkeypatch.setattr(views, "load_sql", texts.__getitem__)
    con = duckdb.connect()
    con.register("runs", pa.table({"x": [1, 2, 3]}))
    views.register_views(con, ["b_reads_a", "a_base"])
    assert con.execute("SELECT y FROM b_reads_a ORDER BY y").fetchall() == [(4,), (6,)]


def test_a_broken_view_is_an_error_not_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(views, "load_sql", {"bad": "SELECT * FROM no_such_table"}.__getitem__)
    with pytest.raises(duckdb.CatalogException):
        views.register_views(duckdb.connect(), ["bad"])


def test_every_shipped_query_is_listed() -> None:
    assert "demo_summary" in views.curated_names()


def test_a_table_without_files_has_the_columns_and_types_of_its_schema(tmp_path: Path) -> None:
    """An empty table's view is typed NULLs (not a registered Arrow table, which imports pandas): the same
    names and DuckDB types as the schema's Arrow table would give."""
    from bench.sql.read import connect
    from bench.sql.schema import TABLES
    from bench.sql.store import StoreWriter

    with StoreWriter(tmp_path / "st"):
        pass
    reference = duckdb.connect()
    with connect(tmp_path / "st") as con:
        for table, schema in TABLES.items():
            reference.register("e", schema.empty_table())
            want = reference.execute("DESCRIBE e").fetchall()
            got = con.execute(f"DESCRIBE all_{table}" if table in ("runs", "steps", "telemetry", "problems")
                              else f"DESCRIBE {table}").fetchall()
            assert [r[:2] for r in got] == [r[:2] for r in want], table
            assert con.execute(f"SELECT count(*) FROM {table}").fetchall() == [(0,)]
