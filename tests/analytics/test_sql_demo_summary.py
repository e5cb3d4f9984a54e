"""Given/expect test of sql/demo_summary.sql on a hand-made runs table."""

from __future__ import annotations

from importlib.resources import files

import duckdb
import pyarrow as pa


def test_demo_summary_counts_failed_runs_and_never_averages_them() -> None:
    con = duckdb.connect()
    runs = pa.table(
        {
            "format": ["tf_cnn", "tf_cnn", "tf_cnn", "tf_cnn", "mxnet"],
            "model": ["resnet50", "resnet50", "resnet50", "vgg16", "resnet50"],
            "device_type": ["gpu", "gpu", "gpu", "gpu", None],
            "num_devices": pa.array([1, 1, 1, 2, None], pa.int64()),
            "status": ["ok", "ok", "oom", "failed", "ok"],
            "images_per_sec": [100.0, 300.0, None, None, 50.0],
        }
    )
    con.register("runs", runs)
    sql = files("bench.sql").joinpath("demo_summary.sql").read_text()
    assert con.execute(sql).fetchall() == [
        ("mxnet", "resnet50", None, None, 1, 1, None, 50.0),  # unknown devices kept as NULL
        ("tf_cnn", "resnet50", "gpu", 1, 3, 2, "oom", 200.0),  # the oom run counted, not averaged in
        ("tf_cnn", "vgg16", "gpu", 2, 1, 0, "failed", None),  # only a failed run: NULL, never 0
    ]
