"""bench compare --metric mlperf_score: pairs of MLPerf result sets, the ratio a speedup (T_B / T_A).

The view ``mlperf_scores`` is stood in for by a hand-made table; each expected ratio is worked out by hand."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest

from bench.analytics.compare_mlperf import compare_scores
from bench.sql.errors import BenchError

_BASE: dict[str, Any] = {"round": "1.0", "division": "closed", "submitter": "S", "benchmark": "resnet",
                         "framework": "mxnet", "num_nodes": 1, "num_devices": 8, "device_type": "gpu",
                         "host_processor_model": "x", "availability": "available", "verdict": "scored", "n_ok": 5}


def _con(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    full = [_BASE | r for r in rows]
    types = {"num_nodes": pa.int64(), "num_devices": pa.int64(), "score_min": pa.float64(),
             "time_to_train_min": pa.float64(), "n_ok": pa.int64()}
    cols = [*_BASE, "system", "device_model", "score_min", "time_to_train_min", "n_ok"]
    con = duckdb.connect()
    con.register("mlperf_scores", pa.table({c: pa.array([r.get(c) for r in full], types.get(c, pa.string()))
                                            for c in cols}))
    return con


def test_a_speedup_of_a_over_b_across_model_variants_and_framework_releases() -> None:
    con = _con([
        {"system": "new", "device_model": "NVIDIA A100-SXM4-80GB", "score_min": 10.0},
        {"system": "new", "device_model": "NVIDIA A100-SXM4-80GB", "benchmark": "bert", "score_min": 20.0,
         "framework": "PyTorch NVIDIA Release 21.05"},
        {"system": "old", "device_model": "Tesla V100-SXM2-32GB", "score_min": 25.0},
        {"system": "old", "device_model": "Tesla V100-SXM2-32GB", "benchmark": "bert", "score_min": 30.0,
         "framework": "PyTorch 1.9.0"},  # the same framework family as the A100 run's
        {"system": "old", "device_model": "Tesla V100-SXM2-32GB", "benchmark": "ssd", "score_min": None,
         "verdict": "too many failed runs"},
        {"system": "new2", "device_model": "NVIDIA A100-PCIE-40GB", "benchmark": "ssd", "score_min": 4.0},
    ])
    r = compare_scores(con, "device_model", "A100", "V100")
    assert sorted((p.config["benchmark"], p.ratio) for p in r.pairs) == [("bert", 1.5), ("resnet", 2.5)]
    assert r.summary.median == pytest.approx(2.0)  # the median of 1.5 and 2.5
    assert sorted((u.side, u.config["benchmark"], u.reason) for u in r.unmatched) == [
        ("a", "ssd", "partner: too many failed runs"), ("b", "ssd", "too many failed runs")]


def test_two_systems_of_one_side_with_one_key_ask_for_a_narrower_selection() -> None:
    con = _con([{"system": "x", "device_model": "A100-SXM4-40GB", "score_min": 10.0},
                {"system": "y", "device_model": "A100 80GB", "score_min": 11.0},
                {"system": "z", "device_model": "V100", "score_min": 20.0}])
    with pytest.raises(BenchError, match="narrow the selection with --where"):
        compare_scores(con, "device_model", "A100", "V100")
    r = compare_scores(con, "device_model", "A100", "V100", where="system <> 'y'")
    assert [p.ratio for p in r.pairs] == [2.0]
    r = compare_scores(con, "device_model", "A100", "V100", best=True)  # each side's fastest: x at 10
    assert [(p.config["system"], p.ratio) for p in r.pairs] == [("x", 2.0)]


def test_time_to_train_pairs_sets_without_a_score_on_their_mean_time() -> None:
    """--metric time_to_train compares the plain mean of ok runs' times: a set with too few runs for a
    score (verdict) still has one; a set with no ok run has none."""
    con = _con([
        {"system": "a", "device_model": "A100", "score_min": None, "time_to_train_min": 12.0, "verdict": "too few runs"},
        {"system": "v", "device_model": "V100", "score_min": 30.0, "time_to_train_min": 30.0},
        {"system": "a", "device_model": "A100", "benchmark": "bert", "score_min": None, "time_to_train_min": None,
         "verdict": "too many failed runs", "n_ok": 0},
        {"system": "v", "device_model": "V100", "benchmark": "bert", "score_min": 50.0, "time_to_train_min": 50.0},
    ])
    r = compare_scores(con, "device_model", "A100", "V100", metric="time_to_train")
    assert [(p.config["benchmark"], p.ratio) for p in r.pairs] == [("resnet", 2.5)]  # 30 / 12
    assert sorted((u.side, u.reason) for u in r.unmatched) == [("a", "too many failed runs"),
                                                               ("b", "partner: too many failed runs")]
    assert compare_scores(con, "device_model", "A100", "V100").pairs == ()  # no A100 score at all
