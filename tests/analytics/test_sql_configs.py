"""Given/expect tests of sql/configs.sql on hand-made runs tables (expected values computed by hand)."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from logtools import runs_table

from bench.sql.views import register_views

P100 = "Tesla P100-SXM2-16GB"



def query(rows: list[dict[str, Any]], columns: str) -> list[tuple[Any, ...]]:
    """Run configs.sql over ``rows`` (a fresh connection) and return ``columns`` of its rows."""
    con = duckdb.connect()
    con.register("runs", runs_table(rows))
    register_views(con, ["run_configs", "configs"])
    return con.execute(f"SELECT {columns} FROM configs ORDER BY all").fetchall()


INCEPTION = {"framework": "tensorflow", "model": "inception3", "batch_size_per_device": 64, "gpu_model": P100,
             "data": "synthetic", "num_gpus": 1, "num_nodes": 1}


def test_repetitions_group_failed_run_counted_not_averaged_nulls_group_and_ci() -> None:
    rows = [
        # A: three ok repetitions and one failed; tags in different orders, `repeat` differs.
        {**INCEPTION, "tags": {"repeat": "1", "optimizer": "sgd", "device": "gpu"}, "images_per_sec": 100.0, "wall_time_s": 10.0},
        {**INCEPTION, "tags": {"device": "gpu", "repeat": "2", "optimizer": "sgd"}, "images_per_sec": 110.0, "wall_time_s": 12.0},
        {**INCEPTION, "tags": {"optimizer": "sgd", "device": "gpu", "repeat": "3"}, "images_per_sec": 120.0, "wall_time_s": 14.0},
        {**INCEPTION, "tags": {"optimizer": "sgd", "repeat": "4", "device": "gpu"}, "status": "failed", "images_per_sec": 5.0,
         "wall_time_s": 3.0},  # ingest leaves a failed run's metrics NULL; a number here must still be ignored
        # B: NULL framework, batch size and GPU model; tags NULL in one run and only `repeat` in the other.
        {"model": "inception3", "num_gpus": 1, "images_per_sec": 50.0},
        {"model": "inception3", "num_gpus": 1, "images_per_sec": 70.0, "tags": {"repeat": "2"}},
    ]
    got = query(rows, "framework, gpu_model, map_keys(tags), n_runs, n_ok, images_per_sec, median, min, max, "
                      "stddev, ci95_low, ci95_high, wall_time_s")
    assert len(got) == 2
    a = next(r for r in got if r[0] == "tensorflow")
    b = next(r for r in got if r[0] is None)
    # A: mean (100+110+120)/3 = 110; sample sd sqrt((10² + 0² + 10²)/2) = 10;
    # t(0.975, df=2) = 4.302653 (printed tables: 4.303); half-width 4.302653 · 10 / sqrt(3) = 24.8414.
    # The failed run is in n_runs (4) but not in the mean (as 0: 82.5; as its 5.0: 83.75), min (not 5.0),
    # nor wall time ((10+12+14)/3 = 12, not (10+12+14+3)/4 = 9.75).
    half_a = 4.302653 * 10 / 3**0.5
    assert a[1:] == (P100, ["optimizer"], 4, 3, 110.0, 110.0, 100.0, 120.0, pytest.approx(10.0),
                     pytest.approx(110 - half_a), pytest.approx(110 + half_a), 12.0)
    # B: the NULL factors and NULL/{} tags group together: n = 2, mean 60, sd sqrt((10²+10²)/1) = 14.1421;
    # t(0.975, df=1) = 12.706205; half-width 12.706205 · 14.1421 / sqrt(2) = 12.706205 · 10 = 127.06205.
    assert b[1:] == (None, [], 2, 2, 60.0, 60.0, 50.0, 70.0, pytest.approx(200**0.5),
                     pytest.approx(60 - 127.06205), pytest.approx(60 + 127.06205), None)


def test_scale_points_nodes_only_failed_and_config_id() -> None:
    rows = [
        {**INCEPTION, "images_per_sec": 142.0},
        {**INCEPTION, "num_gpus": 8, "num_nodes": 1, "images_per_sec": 1131.0},
        {**INCEPTION, "num_gpus": 8, "num_nodes": 2, "images_per_sec": 1000.0},
        {**INCEPTION, "num_gpus": 2, "status": "oom"},  # only a failed run: counted, every statistic NULL
        {**INCEPTION, "framework_version": "", "images_per_sec": 150.0},  # '' is not NULL: another config
        {**INCEPTION, "tags": {"optimizer": "momentum"}, "images_per_sec": 140.0},  # another tag set
    ]
    got = query(rows, "config_id, framework_version, tags, num_gpus, num_nodes, n_runs, n_ok, "
                      "images_per_sec, median, min, max, stddev, ci95_low, ci95_high")
    base = [r for r in got if r[1] is None and r[2] == {}]
    ids = {r[0] for r in base}
    assert len(ids) == 1  # one configuration across its scale points
    assert sorted(r[3:] for r in base) == [
        (1, 1, 1, 1, 142.0, 142.0, 142.0, 142.0, None, None, None),  # one ok run: no stddev, no CI
        (2, 1, 1, 0, None, None, None, None, None, None, None),  # no ok run: NULL, never 0
        (8, 1, 1, 1, 1131.0, 1131.0, 1131.0, 1131.0, None, None, None),
        (8, 2, 1, 1, 1000.0, 1000.0, 1000.0, 1000.0, None, None, None),  # same GPUs, more nodes: own row
    ]
    others = [r for r in got if r not in base]
    assert len(others) == 2
    assert len({r[0] for r in others} | ids) == 3  # framework_version '' and the other tags: own ids
    assert all(len(r[0]) == 32 for r in got)  # md5 hex


def test_t_quantile_matches_scipy_beyond_the_table() -> None:
    """The interval's t equals bench.analytics.intervals.t95(n - 1), the quantile of every other interval
    (scipy's), for n = 2..45 (table to df 30, expansion after)."""
    from bench.analytics.intervals import t95

    # Configuration n (num_gpus = n) has the runs 1..n: mean (n+1)/2, sample sd sqrt(n(n+1)/12).
    rows = [{**INCEPTION, "num_gpus": n, "images_per_sec": float(k)} for n in range(2, 46) for k in range(1, n + 1)]
    got = query(rows, "num_gpus, images_per_sec, ci95_high")
    assert [r[0] for r in got] == list(range(2, 46))
    for n, mean, high in got:
        assert mean == pytest.approx((n + 1) / 2)
        sd = (n * (n + 1) / 12) ** 0.5
        assert (high - mean) / (sd / n**0.5) == pytest.approx(t95(n - 1), abs=3e-6), n


def test_a_tag_that_restates_a_workload_column_never_splits_a_configuration() -> None:
    """{data_mode} (syn, real) restates data and {gpus} (1, 2) num_devices: left out of tags. The
    `system` tag maps one to one onto the batch sizes here too, but its values are not theirs: it stays, as
    does a tag with one value (optimizer), which restates nothing."""
    rows = [{**INCEPTION, "data": data, "num_gpus": n, "batch_size_per_device": batch, "images_per_sec": 100.0 * n,
             "tags": {"data_mode": mode, "gpus": str(n), "system": system, "optimizer": "sgd"}}
            for data, mode in (("synthetic", "syn"), ("real", "real"))
            for n in (1, 2)
            for batch, system in ((64, "box-a"), (128, "box-b"))]
    got = query(rows, "data, batch_size_per_device, num_devices, tags")
    assert len(got) == 8
    assert {tuple(sorted(r[3].items())) for r in got} == {(("optimizer", "sgd"), ("system", "box-a")),
                                                          (("optimizer", "sgd"), ("system", "box-b"))}
    # 1 and 2 devices are one configuration (one config_id) for each data and batch size: 4 curves
    assert len(query(rows, "DISTINCT config_id")) == 4
    # a tag value that is a number must equal the column's: "1" is not an abbreviation of 16
    odd = [{**INCEPTION, "num_gpus": n, "tags": {"gpus": g}} for n, g in ((16, "1"), (2, "2"))]
    assert len(query(odd, "DISTINCT config_id")) == 2


def test_a_run_cut_short_counts_in_the_one_configuration_it_agrees_with() -> None:
    """An interrupted run whose log never printed its model nor its tags joins the configuration of ok runs
    that agrees with every factor it has; one that agrees with two, or contradicts a factor, keeps its own."""
    ok = {**INCEPTION, "num_gpus": 2, "tags": {"num_batches": "10", "optimizer": "sgd"}}
    rows = [
        {**ok, "images_per_sec": 100.0}, {**ok, "images_per_sec": 110.0},
        {**ok, "model": None, "tags": {"cell": "x"}, "status": "interrupted"},  # adopted
        {**ok, "batch_size_per_device": 32, "tags": {}, "status": "failed"},    # no ok run at batch 32
    ]
    got = query(rows, "batch_size_per_device, model, n_runs, n_ok, images_per_sec")
    assert got == [(32, "inception3", 1, 0, None), (64, "inception3", 3, 2, 105.0)]
    # two ok configurations (optimizer sgd, momentum) hold the failed run's tags: it is not guessed
    other = {**ok, "tags": {"num_batches": "10", "optimizer": "momentum"}, "images_per_sec": 90.0}
    got = query([*rows[:3], other], "tags['optimizer'], n_runs, n_ok")
    assert got == [("momentum", 1, 1), ("sgd", 2, 2), (None, 1, 0)]
