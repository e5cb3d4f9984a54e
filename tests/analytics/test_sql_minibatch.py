"""Given/expect tests of sql/minibatch.sql: ms per image against batch size, curvature sign, OOM points."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from logtools import runs_table

from bench.sql.views import register_views

approx = pytest.approx



def minibatch(rows: list[dict[str, Any]], columns: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.register("runs", runs_table(rows))
    register_views(con, ["run_configs", "minibatch"])
    return con.execute(f"SELECT {columns} FROM minibatch ORDER BY num_gpus, batch_size_per_device").fetchall()


def test_throughput_curve_oom_marked_failed_not_averaged() -> None:
    tf = {"framework": "tensorflow", "model": "resnet50", "gpu_model": "Tesla P100", "mode": "train", "num_gpus": 1}
    got = minibatch([
        {**tf, "batch_size_per_device": 16, "images_per_sec": 400.0, "tags": {"repeat": "1"}},  # 2.5 ms/image
        {**tf, "batch_size_per_device": 16, "images_per_sec": 800.0, "tags": {"repeat": "2"}},  # 1.25 ms/image
        {**tf, "batch_size_per_device": 32, "images_per_sec": 500.0},  # 2.0 ms/image
        {**tf, "batch_size_per_device": 64, "images_per_sec": 640.0},  # 1.5625 ms/image
        {**tf, "batch_size_per_device": 64, "status": "failed"},
        {**tf, "batch_size_per_device": 128, "status": "oom"},
    ], "batch_size_per_device, n_runs, n_ok, n_oom, oom, ms_per_image, forward_ms_per_image, images_per_sec, curvature_sign")
    # bs 16: mean of per-run times (2.5 + 1.25)/2 = 1.875 ms; mean throughput (400+800)/2 = 600.
    # Slopes: 16->32 (2.0 - 1.875)/16 = +0.0078125, 32->64 (1.5625 - 2.0)/32 = -0.013671875: the slope
    # falls, concave at 32 (-1). 64 is the last measured point (128 ran out of memory): NULL, as is 16.
    assert got == [
        (16, 2, 2, 0, False, 1.875, None, 600.0, None),
        (32, 1, 1, 0, False, 2.0, None, 500.0, -1),
        (64, 2, 1, 0, False, 1.5625, None, 640.0, None),  # the failed run counted, not averaged
        (128, 1, 0, 1, True, None, None, None, None),  # OOM kept as a row, marked
    ]


def test_caffe_time_forward_backward_null_factors_and_straight_segment() -> None:
    caffe = {"framework": "caffe", "num_gpus": 1, "tags": {"device": "gpu"}}  # model and gpu_model NULL
    got = minibatch([
        {**caffe, "batch_size_per_device": 10, "forward_ms": 20.0, "forward_backward_ms": 60.0, "images_per_sec": 10_000 / 60},
        {**caffe, "batch_size_per_device": 20, "forward_ms": 30.0, "forward_backward_ms": 100.0, "images_per_sec": 20_000 / 100},
        {**caffe, "batch_size_per_device": 30, "forward_ms": 39.0, "forward_backward_ms": 135.0, "images_per_sec": 30_000 / 135},
        {**caffe, "batch_size_per_device": 40, "forward_ms": 48.0, "forward_backward_ms": 160.0, "images_per_sec": 40_000 / 160},
        {**caffe, "num_gpus": 2, "batch_size_per_device": 10, "forward_ms": 20.0, "forward_backward_ms": 62.0},
    ], "curve_id, num_gpus, batch_size_per_device, ms_per_image, forward_ms_per_image, curvature_sign")
    # ms/image = forward_backward_ms / batch: 60/10 = 6, 100/20 = 5, 135/30 = 4.5, 160/40 = 4;
    # forward: 20/10 = 2, 30/20 = 1.5, 39/30 = 1.3, 48/40 = 1.2.
    # Slopes: -0.1, -0.05, -0.05: convex at 20 (+1), straight at 30 (0); the ends 10 and 40 NULL.
    assert [r[1:] for r in got] == [
        (1, 10, 6.0, 2.0, None),
        (1, 20, 5.0, 1.5, 1),
        (1, 30, 4.5, approx(1.3), 0),
        (1, 40, 4.0, 1.2, None),
        (2, 10, 6.2, 2.0, None),  # another GPU count is another curve: a single point, no neighbours
    ]
    assert len({r[0] for r in got[:4]}) == 1 and got[4][0] != got[0][0]


def test_unevenly_spaced_batch_sizes_use_slopes() -> None:
    """Batch 1, 2, 4 with 10, 8, 5 ms/image: the plain second difference 5 - 2·8 + 10 = -1 says concave, but
    the slopes -2 (1->2) and -1.5 (2->4) rise: convex (+1)."""
    got = minibatch([
        {"model": "vgg16", "num_gpus": 1, "batch_size_per_device": bs, "images_per_sec": ips}
        for bs, ips in ((1, 100.0), (2, 125.0), (4, 200.0))  # 1000/100 = 10, 1000/125 = 8, 1000/200 = 5 ms
    ], "batch_size_per_device, ms_per_image, curvature_sign")
    assert got == [(1, 10.0, None), (2, 8.0, 1), (4, 5.0, None)]
