"""Curated views: every sql/*.sql becomes a view of that name, in dependency order."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from bench.analytics import views


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
