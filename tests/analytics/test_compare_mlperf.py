"""bench compare --metric mlperf_score: pairs of MLPerf result sets, the ratio a speedup (T_B / T_A).

The view ``mlperf_scores`` is stood in for by a hand-made table; each expected ratio is worked out by hand."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest

from bench.analytics.compare_mlperf import compare_scores
from bench.ingest.errors import BenchError

_BASE: dict[str, Any] = {"round": "1.0", "division": "closed", "submitter": "S", "benchmark": "resnet",
                         "framework": "mxnet", "num_nodes": 1, "num_devices": 8, "device_type": "gpu",
                         "host_processor_model": "x", "availability": "available", "verdict": "scored"}


def _con(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    full = [_BASE | r for r in rows]
    types = {"num_nodes": pa.int64(), "num_devices": pa.int64(), "score_min": pa.float64()}
    cols = [*_BASE, "system", "device_model", "score_min"]
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
