"""Given/expect tests of sql/scaling.sql (weak scaling): on hand-made `configs` rows, then from runs through
the configs view, and against the official TensorFlow sheet of 2017."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from logtools import runs_table

from bench.sql.views import load_sql, register_views

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "tf-official-2017.csv"
OUT = "config_id, num_devices, num_nodes, images_per_sec, baseline_devices, baseline_images_per_sec, speedup, efficiency, superlinear"


def scale(configs: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """scaling.sql over a given `configs` table of (config_id, num_devices, num_nodes, n_runs, n_ok, images_per_sec)."""
    names = ["config_id", "num_devices", "num_nodes", "n_runs", "n_ok", "images_per_sec"]
    types = [pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.float64()]
    table = pa.table({n: pa.array([r[i] for r in configs], t) for i, (n, t) in enumerate(zip(names, types, strict=True))})
    table = table.append_column("throughput", table["images_per_sec"])  # configs' rate in its unit: images/sec here
    con = duckdb.connect()
    con.register("configs", table)
    sql = load_sql("scaling").strip().rstrip(";")
    return con.execute(f"SELECT {OUT} FROM ({sql}) ORDER BY config_id, num_devices NULLS FIRST, num_nodes").fetchall()


approx = pytest.approx


def test_baseline_superlinear_and_failed_point() -> None:
    got = scale([
        ("a", 1, 1, 1, 1, 100.0),
        ("a", 2, 1, 1, 1, 190.0),
        ("a", 4, 1, 1, 1, 420.0),
        ("a", 8, 1, 2, 0, None),  # every run failed
    ])
    assert got == [
        ("a", 1, 1, 100.0, 1, 100.0, 1.0, 1.0, False),  # the baseline itself: exactly 1, not superlinear
        ("a", 2, 1, 190.0, 1, 100.0, approx(1.9), approx(0.95), False),  # 190/100 = 1.9; 1.9/2 = 0.95
        ("a", 4, 1, 420.0, 1, 100.0, approx(4.2), approx(1.05), True),  # 4.2/4 = 1.05: kept above 1, flagged
        ("a", 8, 1, None, 1, 100.0, None, None, None),  # no ok run: NULL, never 0
    ]


def test_missing_baseline_failed_smallest_count_and_unknown_gpus() -> None:
    got = scale([
        ("b", 2, 1, 1, 1, 200.0),  # measured only from 2 GPUs up
        ("b", 4, 1, 1, 1, 360.0),
        ("c", None, None, 1, 1, 80.0),  # GPU count unknown: no speedup
        ("c", 1, 1, 3, 0, None),  # the 1-GPU runs all failed: the baseline is the 2-GPU point
        ("c", 2, 1, 1, 1, 150.0),
        ("c", 4, 1, 1, 1, 300.0),
    ])
    assert got == [
        ("b", 2, 1, 200.0, 2, 200.0, 1.0, 1.0, False),
        ("b", 4, 1, 360.0, 2, 200.0, approx(1.8), approx(0.9), False),  # 360/200 = 1.8; 1.8/(4/2) = 0.9
        ("c", None, None, 80.0, 2, 150.0, None, None, None),
        ("c", 1, 1, None, 2, 150.0, None, None, None),
        ("c", 2, 1, 150.0, 2, 150.0, 1.0, 1.0, False),
        ("c", 4, 1, 300.0, 2, 150.0, 2.0, 1.0, False),  # 300/150 = 2; 2/(4/2) = 1 exactly: not superlinear
    ]


def test_baseline_prefers_fewest_nodes_at_the_smallest_gpu_count() -> None:
    got = scale([
        ("d", 2, 2, 1, 1, 180.0),
        ("d", 2, 1, 1, 1, 200.0),  # the baseline: 2 GPUs on 1 node
        ("d", 4, 2, 1, 1, 380.0),
    ])
    assert got == [
        ("d", 2, 1, 200.0, 2, 200.0, 1.0, 1.0, False),
        ("d", 2, 2, 180.0, 2, 200.0, approx(0.9), approx(0.9), False),  # 180/200 = 0.9; 0.9/(2/2)
        ("d", 4, 2, 380.0, 2, 200.0, approx(1.9), approx(0.95), False),  # 380/200 = 1.9; 1.9/2 = 0.95
    ]



def scale_runs(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """runs -> configs -> scaling through the registered views."""
    con = duckdb.connect()
    con.register("runs", runs_table(rows))
    register_views(con, ["run_configs", "configs", "scaling"])
    return con.execute(f"SELECT {OUT} FROM scaling ORDER BY num_devices, num_nodes").fetchall()


def test_from_runs_repetitions_and_failed_run() -> None:
    cfg = {"model": "resnet50", "batch_size_per_device": 32, "device_model": "Tesla K80", "num_nodes": 1}
    got = scale_runs([
        {**cfg, "num_devices": 1, "images_per_sec": 100.0, "tags": {"repeat": "1"}},
        {**cfg, "num_devices": 1, "images_per_sec": 120.0, "tags": {"repeat": "2"}},
        {**cfg, "num_devices": 1, "status": "failed", "tags": {"repeat": "3"}},
        {**cfg, "num_devices": 2, "images_per_sec": 231.0},
    ])
    # 1 GPU: (100+120)/2 = 110 (the failed run as a zero would give 73.3); 2 GPUs: 231/110 = 2.1, 2.1/2 = 1.05.
    assert [r[1:] for r in got] == [
        (1, 1, 110.0, 1, 110.0, 1.0, 1.0, False),
        (2, 1, 231.0, 1, 110.0, approx(2.1), approx(1.05), True),
    ]
    assert got[0][0] == got[1][0]  # one config_id for both scale points


def test_cpu_and_tpu_runs_scale_like_gpu_runs() -> None:
    """CPU runs as tf_cnn and `bench run --device cpu` store them (tag device=cpu, one device per rank,
    num_gpus NULL) and TPU runs (device columns from an MLPerf system) reach `scaling` by num_devices;
    the device tag is not a configuration tag, and the two device types are two configurations."""
    cpu = {"model": "resnet50", "batch_size_per_device": 32, "num_nodes": 1, "tags": {"device": "cpu"}}
    tpu = {"model": "resnet50", "batch_size_per_device": 32, "num_nodes": 1, "device_type": "tpu",
           "device_model": "TPUv3"}
    got = scale_runs([
        {**cpu, "num_ranks": 1, "images_per_sec": 10.0},
        {**cpu, "num_ranks": 2, "images_per_sec": 19.0},
        {**tpu, "num_devices": 8, "images_per_sec": 8000.0},
        {**tpu, "num_devices": 32, "images_per_sec": 30000.0},
    ])
    # cpu: 19 / 10 = 1.9 on 2 devices, efficiency 0.95; tpu: 30000 / 8000 = 3.75 on 4x the devices, 0.9375.
    assert sorted(r[1:] for r in got) == [
        (1, 1, 10.0, 1, 10.0, 1.0, 1.0, False),
        (2, 1, 19.0, 1, 10.0, approx(1.9), approx(0.95), False),
        (8, 1, 8000.0, 8, 8000.0, 1.0, 1.0, False),
        (32, 1, 30000.0, 8, 8000.0, approx(3.75), approx(0.9375), False),
    ]
    assert len({r[0] for r in got}) == 2


def test_official_2017_sheet_inception3_bs64_synthetic_p100() -> None:
    if not REFERENCE.is_file():
        pytest.skip(f"reference sheet not present at {REFERENCE}")
    with REFERENCE.open() as f:
        sheet = list(csv.DictReader(line for line in f if not line.startswith("#")))
    row = next(r for r in sheet if (r["batch_size"], r["dataset"], r["model"], r["gpu"]) == ("64", "synthetic", "inception3", "P100"))
    runs = [{"framework": "tensorflow", "model": "inception3", "data": "synthetic", "batch_size_per_device": 64,
             "device_model": "Tesla P100-SXM2-16GB", "variable_update": "parameter_server", "data_format": "NCHW",
             "num_devices": n, "num_nodes": 1, "images_per_sec": float(row[f"gpus{n}"])} for n in (1, 2, 4, 8)]
    got = {r[1]: r for r in scale_runs(runs)}
    assert got[8][6] == approx(1131 / 142)  # 7.9648: the sheet's 7.96x
    assert round(got[8][6], 2) == 7.96
    assert got[4][7] == approx(596 / 142 / 4)  # 1.04930: the sheet's 104.93%
    assert round(got[4][7] * 100, 2) == 104.93
    assert got[4][8] is True and got[8][8] is False  # 4 GPUs superlinear; 8 GPUs 7.96/8 = 0.9956


def test_a_configuration_measured_at_one_device_count_has_no_efficiency() -> None:
    """Systems measured only at 8 GPUs showed efficiency 1.00 (their baseline is 8), so they topped a
    naive ranking. Nothing was scaled there: speedup and efficiency are NULL; the baseline is still said."""
    got = scale([
        ("e", 8, 1, 2, 2, 2000.0),  # 8 GPUs only
        ("f", 1, 1, 1, 1, 100.0),
        ("f", 2, 1, 2, 0, None),  # its 2-GPU runs all failed: one count with a mean
    ])
    assert got == [
        ("e", 8, 1, 2000.0, 8, 2000.0, None, None, None),
        ("f", 1, 1, 100.0, 1, 100.0, None, None, None),
        ("f", 2, 1, None, 1, 100.0, None, None, None),
    ]
