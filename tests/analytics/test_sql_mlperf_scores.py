"""sql/mlperf_scores.sql, given/expect: the summarizer's olympic rule worked by hand on small result sets."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from bench.sql.schema import SCORE_SCALES
from bench.sql.views import register_views


def _runs(sets: dict[tuple[str, str], list[float | None]], scales: pa.Table | None = None,
          divisions: list[str] | None = None, unreadable: tuple[int, ...] = ()) -> duckdb.DuckDBPyConnection:
    """One run per time (minutes; None: a run that did not end ok) of each (system, benchmark); the logs'
    division is ``divisions[i]`` for run i (default closed); system a is described as closed; the logs of
    the runs ``unreadable`` hold a compliance line that cannot be read."""
    rows = []
    for (system, benchmark), minutes in sets.items():
        for i, m in enumerate(minutes):
            rows.append({"run_id": f"{system}-{benchmark}-{i}", "format": "mlperf", "framework": "mxnet",
                         "status": "ok" if m is not None else "failed",
                         "time_to_train_s": None if m is None else m * 60.0,
                         "tags": [("round", "1.0"), ("submission_division", divisions[i] if divisions else "closed"),
                                  ("submitter", "S"), ("system", system), ("benchmark", benchmark),
                                  ("repeat", str(i))],
                         "details": [("unreadable_compliance_lines", "1")] if i in unreadable else []})
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("run_id", pa.string()), ("format", pa.string()), ("framework", pa.string()), ("status", pa.string()),
        ("time_to_train_s", pa.float64()), ("tags", pa.map_(pa.string(), pa.string())),
        ("details", pa.map_(pa.string(), pa.string()))]))
    systems = pa.Table.from_pylist(
        [{"round": "1.0", "submitter": "S", "system": "a", "num_nodes": 2, "num_devices": 16, "device_type": "gpu",
          "device_model": "NVIDIA A100", "host_processor_model": "AMD EPYC", "availability": "available",
          "framework": "MXNet 21.05", "division": "closed"},
         {"round": "0.7", "submitter": "S", "system": "b", "num_nodes": 9, "num_devices": 9, "device_type": "cpu",
          "device_model": "Xeon", "host_processor_model": "Xeon", "availability": "preview", "framework": None,
          "division": "open"}],
        schema=pa.schema([("round", pa.string()), ("submitter", pa.string()), ("system", pa.string()),
                          ("division", pa.string()),
                          ("num_nodes", pa.int64()), ("num_devices", pa.int64()), ("device_type", pa.string()),
                          ("device_model", pa.string()), ("host_processor_model", pa.string()),
                          ("availability", pa.string()), ("framework", pa.string())]))
    con = duckdb.connect()
    con.register("runs", table)
    con.register("systems", systems)
    con.register("score_scales", scales if scales is not None else SCORE_SCALES.empty_table())
    register_views(con, ["mlperf_runs", "mlperf_scores"])
    return con


def test_olympic_scores_dropped_runs_and_verdicts() -> None:
    con = _runs({
        ("a", "resnet"): [10.0, 12.0, 11.0, 30.0, 9.0],  # drop 9 and 30: mean(10, 11, 12) = 11
        ("b", "resnet"): [10.0, None, 11.0, 12.0, 13.0],  # one failed counts as the slowest: drop 10: mean(11, 12, 13)
        ("c", "resnet"): [10.0, None, None, 12.0, 13.0],  # two failed > 1: no score
        ("d", "unet3d"): [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, None, None],  # drop 4 fastest, 2 slowest: 5, 6
        ("e", "bert"): [10.0, 11.0],  # drop the fastest and the slowest: nothing left
    })
    got = {r[0]: r[1:] for r in con.sql(
        "SELECT system, score_min, n_runs, n_ok, verdict FROM mlperf_scores ORDER BY system").fetchall()}
    assert got["a"] == (pytest.approx(11.0), 5, 5, "scored")
    assert got["b"] == (pytest.approx(12.0), 5, 4, "scored")
    assert got["c"] == (None, 5, 3, "too many failed runs")
    assert got["d"] == (pytest.approx(5.5), 10, 8, "scored")
    assert got["e"] == (None, 2, 2, "too few runs")
    ttt = dict(con.sql("SELECT system, time_to_train_min FROM mlperf_scores").fetchall())
    # the plain mean of the ok runs, a score or not: a (9+10+11+12+30)/5 = 14.4, c (10+12+13)/3, e 10.5
    assert ttt == {"a": pytest.approx(14.4), "b": pytest.approx(11.5), "c": pytest.approx(35 / 3),
                   "d": pytest.approx(4.5), "e": pytest.approx(10.5)}


def test_the_system_description_of_the_same_round_gives_devices_and_framework() -> None:
    """System a is described for round 1.0: its devices (its framework text gives way to the logs').
    System b's description is of round 0.7, not the results' 1.0: no devices."""
    con = _runs({("a", "resnet"): [10.0, 11.0, 12.0], ("b", "resnet"): [10.0, 11.0, 12.0]})
    got = con.sql("SELECT system, num_nodes, num_devices, device_type, device_model, framework "
                  "FROM mlperf_scores ORDER BY system").fetchall()
    assert got == [("a", 2, 16, "gpu", "NVIDIA A100", "mxnet"), ("b", None, None, None, None, "mxnet")]


def test_the_division_is_the_system_descriptions_where_the_logs_disagree() -> None:
    """One result set whose logs say open once and closed four times (SIAT's v0.7 modelarts_512 set) is one
    set, of its description's division, as the summarizer reports it; undescribed sets keep the logs'."""
    con = _runs({("a", "resnet"): [10.0, 12.0, 11.0, 30.0, 9.0], ("z", "resnet"): [10.0, 12.0, 11.0, 30.0, 9.0]},
                divisions=["open", "closed", "closed", "closed", "closed"])
    got = con.sql("SELECT system, division, n_runs, score_min FROM mlperf_scores ORDER BY ALL").fetchall()
    assert got == [("a", "closed", 5, pytest.approx(11.0)), ("z", "closed", 4, pytest.approx(11.5)),
                   ("z", "open", 1, None)]


def test_a_run_with_an_unreadable_compliance_line_counts_as_failed() -> None:
    """The summarizer's checker drops a run whose log has a line it cannot parse, as non-converged (v4.1:
    three of Lambda's sets): it counts as the slowest, as a failed run does."""
    con = _runs({("a", "resnet"): [10.0, 12.0, 11.0, 30.0, 9.0]}, unreadable=(4,))
    got = con.sql("SELECT n_runs, n_ok, score_min FROM mlperf_scores").fetchall()
    # 9 is out, as the slowest: of the ok 10, 11, 12, 30 the fastest is dropped: mean(11, 12, 30)
    assert got == [(5, 4, pytest.approx(53 / 3))]


def test_mlperf_scaling_over_time_to_train_and_its_fit() -> None:
    """mlperf_scaling: speedup = T(smallest device count) / T(N) within one submitter, benchmark,
    framework family and device model; a set without a score or without devices is no point."""
    from bench.analytics.scaling_laws import fit

    cols = ["round", "division", "submitter", "system", "benchmark", "framework", "device_type", "device_model",
            "num_devices", "num_nodes", "score_min"]
    rows = [  # (system, framework, devices, nodes, minutes)
        ("n1", "MXNet NVIDIA Release 21.05", 8, 1, 40.0),
        ("n8", "mxnet", 64, 8, 6.0),  # 40 / 6 = 6.667 on 8x the devices: efficiency 0.8333
        ("n64", "mxnet", 512, 64, 1.25),  # 40 / 1.25 = 32 on 64x: 0.5
        ("n2", "mxnet", 16, 2, None),  # no score: not a point
        ("x", "mxnet", None, None, 10.0),  # no system description: no scale
    ]
    table = pa.table({c: pa.array([("1.0", "closed", "S", s, "resnet", f, "gpu", "A100", d, n, m)[i]
                                   for s, f, d, n, m in rows],
                                  pa.int64() if c in ("num_devices", "num_nodes") else
                                  pa.float64() if c == "score_min" else pa.string())
                      for i, c in enumerate(cols)})
    con = duckdb.connect()
    con.register("mlperf_scores", table)
    register_views(con, ["mlperf_scaling"])
    got = con.sql("SELECT system, num_devices, baseline_devices, speedup, efficiency, superlinear "
                  "FROM mlperf_scaling ORDER BY num_devices").fetchall()
    assert got == [("n1", 8, 8, 1.0, 1.0, False),
                   ("n8", 64, 8, pytest.approx(40 / 6), pytest.approx(40 / 6 / 8), False),
                   ("n64", 512, 8, 32.0, 0.5, False)]
    (cf,) = fit(con, view="mlperf_scaling").fits
    assert cf.factors["framework"] == "mxnet" and cf.fit.device_counts == (8, 64, 512)


def test_the_round_is_the_trees_else_the_logs_own_version() -> None:
    """A set ingested outside a training_results_v<round> folder takes its round from the log's version
    (v0.5's :::MLPv0.5.0 gives 0.5.0: round 0.5); v0.7+ logs name none: NULL."""
    rows = [{"run_id": sys, "format": "mlperf", "status": "ok", "time_to_train_s": 600.0,
             "tags": [("submitter", "S"), ("system", sys), ("benchmark", "resnet"), *extra]}
            for sys, extra in (("a", [("mlperf_version", "0.5.0")]), ("b", [("mlperf_version", "0.5.0"), ("round", "0.6")]),
                               ("c", []))]
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("run_id", pa.string()), ("format", pa.string()), ("framework", pa.string()), ("status", pa.string()),
        ("time_to_train_s", pa.float64()), ("tags", pa.map_(pa.string(), pa.string())),
        ("details", pa.map_(pa.string(), pa.string()))]))
    con = duckdb.connect()
    con.register("runs", table)
    con.register("score_scales", SCORE_SCALES.empty_table())
    con.register("systems", pa.table({c: pa.array([], pa.string()) for c in (
        "round", "submitter", "system", "division", "device_type", "device_model", "host_processor_model", "availability",
        "framework")}).append_column("num_nodes", pa.array([], pa.int64())).append_column("num_devices", pa.array([], pa.int64())))
    register_views(con, ["mlperf_runs", "mlperf_scores"])
    assert con.sql("SELECT system, round FROM mlperf_scores ORDER BY system").fetchall() == [
        ("a", "0.5"), ("b", "0.6"), ("c", None)]


def test_a_scaling_json_multiplies_the_olympic_mean_and_names_the_rule() -> None:
    """The summarizer multiplies a set's olympic mean by the scaling_factor of its folder's scaling.json."""
    scales = pa.Table.from_pylist([{"round": "1.0", "submitter": "S", "system": "a", "benchmark": "resnet",
                                    "scaling_factor": 1.25}], schema=SCORE_SCALES)
    con = _runs({("a", "resnet"): [10.0, 12.0, 11.0, 30.0, 9.0], ("a", "bert"): [10.0, 11.0, 12.0]}, scales)
    got = {r[0]: r[1:] for r in con.sql(
        "SELECT benchmark, score_min, score_rule, scaling_factor FROM mlperf_scores").fetchall()}
    assert got["resnet"] == (pytest.approx(11.0 * 1.25), "olympic x scaling.json", 1.25)  # mean(10, 11, 12) x 1.25
    assert got["bert"] == (pytest.approx(11.0), "olympic", None)
