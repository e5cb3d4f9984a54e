"""Given/expect tests of sql/strong_scaling.sql (global batch fixed): on hand-made `configs` rows, then
from runs through the configs view."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from logtools import runs_table

from bench.sql.views import load_sql, register_views

FACTORS = ["framework", "framework_version", "model", "dataset", "data", "mode", "precision", "data_format",
           "variable_update", "all_reduce", "device_type", "device_model"]
OUT = ("batch_size_per_device, num_devices, global_batch_size, images_per_sec, baseline_devices, baseline_images_per_sec, "
       "speedup, efficiency, superlinear")
approx = pytest.approx


def configs_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A `configs` table: the factor columns (NULL unless given), tags, the scale point and the mean."""
    cols: dict[str, pa.Array] = {f: pa.array([r.get(f) for r in rows], pa.string()) for f in FACTORS}
    cols["config_id"] = pa.array([f"c{i}" for i in range(len(rows))], pa.string())
    cols["tags"] = pa.array([list(r.get("tags", {}).items()) for r in rows], pa.map_(pa.string(), pa.string()))
    for name in ("batch_size_per_device", "num_devices", "num_nodes"):
        cols[name] = pa.array([r.get(name) for r in rows], pa.int64())
    cols["images_per_sec"] = pa.array([r.get("images_per_sec") for r in rows], pa.float64())
    cols["throughput"] = cols["images_per_sec"]  # configs' rate in its unit: images/sec here
    cols["throughput_unit"] = pa.array(["images/sec"] * len(rows), pa.string())
    return pa.table(cols)


def strong(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """strong_scaling.sql over a given `configs` table: OUT columns then strong_config_id, in a fixed order."""
    con = duckdb.connect()
    con.register("configs", configs_table(rows))
    sql = load_sql("strong_scaling").strip().rstrip(";")
    order = "global_batch_size NULLS LAST, num_devices, batch_size_per_device NULLS LAST"
    return con.execute(f"SELECT {OUT}, strong_config_id FROM ({sql}) ORDER BY {order}").fetchall()


RESNET = {"model": "resnet50", "device_model": "Tesla P100", "num_nodes": 1, "tags": {"optimizer": "sgd"}}


def test_global_batch_fixed_superlinear_and_failed_point() -> None:
    got = strong([
        {**RESNET, "batch_size_per_device": 256, "num_devices": 1, "images_per_sec": 100.0},  # global 256
        {**RESNET, "batch_size_per_device": 128, "num_devices": 2, "images_per_sec": 180.0},  # global 256
        {**RESNET, "batch_size_per_device": 64, "num_devices": 4, "images_per_sec": 420.0},  # global 256
        {**RESNET, "batch_size_per_device": 32, "num_devices": 8, "images_per_sec": None},  # global 256, all failed
        {**RESNET, "batch_size_per_device": 64, "num_devices": 1, "images_per_sec": 90.0},  # global 64
        {**RESNET, "batch_size_per_device": 32, "num_devices": 2, "images_per_sec": 153.0},  # global 64
    ])
    assert [r[:-1] for r in got] == [
        (64, 1, 64, 90.0, 1, 90.0, 1.0, 1.0, False),
        (32, 2, 64, 153.0, 1, 90.0, approx(1.7), approx(0.85), False),  # 153/90 = 1.7; 1.7/2 = 0.85
        (256, 1, 256, 100.0, 1, 100.0, 1.0, 1.0, False),
        (128, 2, 256, 180.0, 1, 100.0, approx(1.8), approx(0.9), False),  # 180/100 = 1.8; 1.8/2 = 0.9
        (64, 4, 256, 420.0, 1, 100.0, approx(4.2), approx(1.05), True),  # 4.2/4 = 1.05: never clamped
        (32, 8, 256, None, 1, 100.0, None, None, None),  # no ok run: NULL, never 0
    ]
    ids = [r[-1] for r in got]
    assert ids[0] == ids[1] and ids[2] == ids[3] == ids[4] == ids[5] and ids[0] != ids[2]


def test_missing_baseline_null_factor_and_unknown_global_batch() -> None:
    got = strong([
        {"batch_size_per_device": 256, "num_devices": 2, "images_per_sec": 300.0},  # NULL model; global 512 from 2 GPUs
        {"batch_size_per_device": 128, "num_devices": 4, "images_per_sec": 540.0},
        {"num_devices": 2, "images_per_sec": 100.0},  # per-device batch unknown: global batch unknown
        {"num_devices": 4, "images_per_sec": 180.0},
    ])
    assert [r[:-1] for r in got] == [
        (256, 2, 512, 300.0, 2, 300.0, 1.0, 1.0, False),
        (128, 4, 512, 540.0, 2, 300.0, approx(1.8), approx(0.9), False),  # 540/300 = 1.8; 1.8/(4/2) = 0.9
        (None, 2, None, 100.0, None, None, None, None, None),  # no strong-scaling partner
        (None, 4, None, 180.0, None, None, None, None, None),
    ]



def test_from_runs_through_configs() -> None:
    cfg = {"model": "inception3", "device_model": "Tesla K80", "num_nodes": 1}
    con = duckdb.connect()
    con.register("runs", runs_table([
        {**cfg, "batch_size_per_device": 128, "num_devices": 1, "images_per_sec": 30.0, "tags": {"repeat": "1"}},
        {**cfg, "batch_size_per_device": 128, "num_devices": 1, "images_per_sec": 34.0, "tags": {"repeat": "2"}},
        {**cfg, "batch_size_per_device": 128, "num_devices": 1, "status": "oom", "tags": {"repeat": "3"}},
        {**cfg, "batch_size_per_device": 64, "num_devices": 2, "images_per_sec": 56.0},
    ]))
    register_views(con, ["run_configs", "configs", "strong_scaling"])
    got = con.execute(f"SELECT {OUT}, n_runs, n_ok FROM strong_scaling ORDER BY num_devices").fetchall()
    # 1 GPU: (30+34)/2 = 32 over 2 of 3 runs; 2 GPUs: 56/32 = 1.75, 1.75/2 = 0.875.
    assert got == [
        (128, 1, 128, 32.0, 1, 32.0, 1.0, 1.0, False, 3, 2),
        (64, 2, 128, 56.0, 1, 32.0, 1.75, 0.875, False, 1, 1),
    ]
