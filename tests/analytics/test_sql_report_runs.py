"""Given/expect tests of sql/report_runs.sql on a hand-made runs table.

Its config_id must be the one sql/configs.sql gives the same configuration (the report links numbers of
`configs`/`scaling` rows to runs through it), failed runs stay as rows with NULL metrics, and the
`repeat` tag does not split a configuration.
"""

from __future__ import annotations

from typing import Any

import duckdb
from logtools import runs_table

from bench.sql.views import register_views

INCEPTION = {"framework": "tensorflow", "model": "inception3", "batch_size_per_device": 64,
             "gpu_model": "Tesla P100-SXM2-16GB", "data": "synthetic", "num_devices": 1, "num_nodes": 1}


def _rows() -> list[dict[str, Any]]:
    return [
        {**INCEPTION, "run_id": "a-0", "source": "a.log", "source_sha256": "aa", "images_per_sec": 142.0,
         "tags": {"repeat": "1", "optimizer": "sgd"}},
        {**INCEPTION, "run_id": "b-0", "source": "b.log", "source_sha256": "bb", "images_per_sec": 140.0,
         "tags": {"optimizer": "sgd", "repeat": "2"}},
        {**INCEPTION, "run_id": "c-0", "source": "c.log", "source_sha256": "cc", "num_devices": 2, "status": "oom",
         "status_detail": "ResourceExhaustedError: OOM", "tags": {"optimizer": "sgd"}},
        {**INCEPTION, "run_id": "d-0", "source": "d.log", "source_sha256": "dd", "images_per_sec": 139.0,
         "tags": {"optimizer": "momentum"}},
        {"model": "resnet50", "run_id": "e-0", "source": "e.log", "source_sha256": "ee", "images_per_sec": 50.0},
    ]


def _query(con: duckdb.DuckDBPyConnection, name: str, columns: str) -> list[tuple[Any, ...]]:
    register_views(con, ["run_configs", name])
    return con.execute(f"SELECT {columns} FROM {name}").fetchall()


def test_one_row_per_run_with_the_config_id_of_configs() -> None:
    con = duckdb.connect()
    con.register("runs", runs_table(_rows()))
    got = _query(con, "report_runs", "run_id, config_id, num_devices, status, status_detail, images_per_sec, source, "
                                     "source_sha256")
    assert sorted(r[0] for r in got) == ["a-0", "b-0", "c-0", "d-0", "e-0"]  # every run, the oom one too
    by_run = {r[0]: r for r in got}
    # a, b (repeats) and c (same factors and tags but for `repeat`) are one configuration; d's optimizer
    # tag and e's model make two more.
    assert by_run["a-0"][1] == by_run["b-0"][1] == by_run["c-0"][1]
    assert len({r[1] for r in got}) == 3
    assert by_run["c-0"][2:] == (2, "oom", "ResourceExhaustedError: OOM", None, "c.log", "cc")
    assert by_run["a-0"][2:] == (1, "ok", None, 142.0, "a.log", "aa")
    configs = {(cid, gpus) for cid, gpus in _query(con, "configs", "config_id, num_devices")}
    assert {(r[1], r[2]) for r in got} == configs  # the same ids and scale points as sql/configs.sql


def test_rows_are_ordered_by_configuration_then_scale_point() -> None:
    con = duckdb.connect()
    rows = [{**INCEPTION, "run_id": f"r-{g}", "num_devices": g, "images_per_sec": 100.0 * g} for g in (8, 1, 4, 2)]
    con.register("runs", runs_table(rows))
    got = _query(con, "report_runs", "run_id, num_devices")
    assert got == [("r-1", 1), ("r-2", 2), ("r-4", 4), ("r-8", 8)]
