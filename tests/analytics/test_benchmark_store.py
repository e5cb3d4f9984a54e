"""The generated store `make bench` times analytics on: a small one reads like an ingested store (its runs
carry the device columns ingest writes, so configs, scaling and compare see them)."""

from __future__ import annotations

from pathlib import Path

from analytics_speed import GPUS, make_store

from bench.analytics.compare import compare
from bench.sql.read import connect


def test_a_small_generated_store_answers_configs_scaling_and_compare(tmp_path: Path) -> None:
    make_store(tmp_path / "st", n_runs=2000, steps_per_run=2)
    con = connect(tmp_path / "st")
    types = con.execute("SELECT DISTINCT device_type FROM configs").fetchall()
    assert types == [("gpu",)]
    assert {m for (m,) in con.execute("SELECT DISTINCT device_model FROM configs").fetchall()} == set(GPUS)
    assert con.execute("SELECT count(*) FROM scaling WHERE speedup IS NOT NULL").fetchall()[0][0] > 0
    res = compare(con, "device_model", "P100", "K80")
    assert res.pairs and res.summary.median is not None and res.summary.median > 1  # P100 is the faster one
