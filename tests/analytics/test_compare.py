"""bench compare: pairing, value matching, ratio statistics, TOST, the CLI, and the official 2017 sheet.

The views ``configs`` and ``scaling`` are stood in for by small hand-made Arrow tables registered on a
fresh DuckDB connection; every expected number is worked out by hand in the comments.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
import typer
from logtools import runs_table
from scipy import stats
from typer.testing import CliRunner

from bench.analytics import compare as cmp
from bench.runner.commands.compare_cmd import compare_command
from bench.sql.errors import BenchError

P100, K80, P40 = "Tesla P100-SXM2-16GB", "Tesla K80", "Tesla P40"
OFFICIAL = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "tf-official-2017.csv"

_DEFAULTS: dict[str, Any] = {
    "framework": "tensorflow", "framework_version": "1.2", "model": "resnet50", "dataset": "imagenet",
    "data": "synthetic", "mode": "train", "precision": "fp32", "data_format": "NCHW",
    "variable_update": "parameter_server", "all_reduce": None, "batch_size_per_device": 64,
    "throughput_unit": "images/sec", "device_type": "gpu",
    "device_model": P100,
    "tags": {}, "num_devices": 1, "num_nodes": 1, "n_runs": 1, "n_ok": 1, "images_per_sec": 100.0,
}
_TYPES = {
    "batch_size_per_device": pa.int64(), "num_devices": pa.int64(), "num_nodes": pa.int64(), "n_runs": pa.int64(),
    "n_ok": pa.int64(), "images_per_sec": pa.float64(), "tags": pa.map_(pa.string(), pa.string()),
    "baseline_devices": pa.int64(), "speedup": pa.float64(), "efficiency": pa.float64(),
}


def _table(rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> pa.Table:
    """Rows over the default configuration; tags given as dicts."""
    cols = [*_DEFAULTS, *extra]
    full = [_DEFAULTS | r for r in rows]
    data = {c: [list(r[c].items()) if c == "tags" else r.get(c) for r in full] for c in cols}
    return pa.table({c: pa.array(v, _TYPES.get(c, pa.string())) for c, v in data.items()})


def _con(configs: list[dict[str, Any]] | None = None, scaling: list[dict[str, Any]] | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    if configs is not None:
        con.register("configs", _table(configs))
    if scaling is not None:
        con.register("scaling", _table(scaling, ("baseline_devices", "speedup", "efficiency")))
    return con


def test_ratios_2_and_8_have_median_5_and_geomean_4() -> None:
    con = _con([
        {"model": "resnet50", "device_model": P100, "images_per_sec": 200.0},
        {"model": "resnet50", "device_model": K80, "images_per_sec": 100.0},  # 200 / 100 = 2
        {"model": "inception3", "device_model": P100, "images_per_sec": 400.0},
        {"model": "inception3", "device_model": K80, "images_per_sec": 50.0},  # 400 / 50 = 8
    ])
    r = cmp.compare(con, "device_model", "P100", "K80")
    assert (r.a, r.b, r.metric) == (P100, K80, "images_per_sec")
    assert sorted(p.ratio for p in r.pairs) == [2.0, 8.0]
    s = r.summary
    assert (s.n, s.median, s.min, s.max) == (2, 5.0, 2.0, 8.0)
    assert s.geomean == pytest.approx(4.0)  # sqrt(2 * 8)
    assert r.unmatched == ()
    assert s.equivalence is None


def test_a_partner_must_agree_on_every_other_factor_tags_and_gpu_count() -> None:
    con = _con([
        {"device_model": P100, "num_devices": 1, "images_per_sec": 300.0},
        {"device_model": K80, "num_devices": 1, "images_per_sec": 100.0},  # the one pair: 3
        {"device_model": P100, "num_devices": 2, "images_per_sec": 500.0},  # K80 has no 2-GPU row
        {"device_model": P100, "tags": {"variant": "inference"}, "images_per_sec": 1.0},  # tags differ
        {"device_model": K80, "tags": {"variant": "distortions"}, "images_per_sec": 1.0},
        {"device_model": K80, "precision": "fp16", "images_per_sec": 1.0},  # another factor differs
    ])
    r = cmp.compare(con, "device_model", P100, K80)
    assert [(p.num_devices, p.ratio) for p in r.pairs] == [(1, 3.0)]
    lonely = sorted((u.side, u.num_devices, u.config["precision"], str(u.config["tags"]), u.reason) for u in r.unmatched)
    assert lonely == [
        ("a", 1, "fp32", "{'variant': 'inference'}", "no partner"),
        ("a", 2, "fp32", "{}", "no partner"),
        ("b", 1, "fp16", "{}", "no partner"),
        ("b", 1, "fp32", "{'variant': 'distortions'}", "no partner"),
    ]


def test_two_systems_pair_on_the_workload_at_equal_or_each_at_its_own_batch() -> None:
    """Device and system comparisons pair on the workload: the system tag and framework version may differ
    (and are listed); without a shared batch size each side is at its fastest ("own batch")."""
    con = _con([
        # resnet50: both ran batch 64 (the pair, 600/300 = 2) and A also 128 (no partner at that batch)
        {"device_model": P100, "batch_size_per_device": 64, "tags": {"system": "a1"}, "images_per_sec": 600.0},
        {"device_model": P100, "batch_size_per_device": 128, "tags": {"system": "a1"}, "images_per_sec": 650.0},
        {"device_model": K80, "batch_size_per_device": 64, "tags": {"system": "b1"}, "framework_version": "1.1",
         "images_per_sec": 300.0},
        {"device_model": K80, "batch_size_per_device": 64, "tags": {"system": "b2"}, "images_per_sec": 250.0},
        # vgg16: no shared batch: A's best is 256 (500), B's 32 (200): 2.5
        {"model": "vgg16", "device_model": P100, "batch_size_per_device": 128, "images_per_sec": 400.0},
        {"model": "vgg16", "device_model": P100, "batch_size_per_device": 256, "images_per_sec": 500.0},
        {"model": "vgg16", "device_model": K80, "batch_size_per_device": 32, "images_per_sec": 200.0},
        {"model": "vgg16", "device_model": K80, "batch_size_per_device": 16, "images_per_sec": 150.0},
    ])
    r = cmp.compare(con, "device_model", "P100", "K80")
    got = sorted((p.config["model"], p.a_batch, p.b_batch, p.own_batch, p.ratio) for p in r.pairs)
    assert got == [("resnet50", 64, 64, False, 2.0), ("vgg16", 256, 32, True, 2.5)]
    resnet = next(p for p in r.pairs if p.config["model"] == "resnet50")
    assert resnet.differs == {"framework_version": ("1.2", "1.1"), "system": ("a1", "b1")}
    reasons = sorted((u.side, u.config["batch_size_per_device"], u.reason) for u in r.unmatched)
    slower = "slower than its side's row of the pair"  # another system, or (vgg16) another batch size
    assert reasons == [("a", 128, "no partner at this batch size"), ("a", 128, slower), ("b", 16, slower), ("b", 64, slower)]
    assert r.summary.n == 2 and r.summary.geomean == pytest.approx((2.0 * 2.5) ** 0.5)


def test_factor_system_compares_two_systems_and_a_framework_blocks_until_ignored() -> None:
    con = _con([
        {"tags": {"system": "x"}, "images_per_sec": 300.0},
        {"tags": {"system": "y"}, "images_per_sec": 100.0},
        {"model": "vgg16", "tags": {"system": "x"}, "images_per_sec": 30.0},
        {"model": "vgg16", "tags": {"system": "y"}, "framework": "pytorch", "images_per_sec": 10.0},
    ])
    r = cmp.compare(con, "system", "x", "y")
    assert [(p.config["model"], p.ratio) for p in r.pairs] == [("resnet50", 3.0)]  # vgg16: frameworks differ
    assert sorted(u.reason for u in r.unmatched) == ["no partner", "no partner"]


def test_a_configuration_without_an_ok_run_is_never_a_ratio_of_zero() -> None:
    con = _con([
        {"model": "resnet50", "device_model": P100, "images_per_sec": 200.0},
        {"model": "resnet50", "device_model": K80, "images_per_sec": None, "n_ok": 0},  # only failed runs
        {"model": "inception3", "device_model": P100, "images_per_sec": 90.0},
        {"model": "inception3", "device_model": K80, "images_per_sec": 30.0},  # 3
    ])
    r = cmp.compare(con, "device_model", "P100", "K80")
    assert [p.ratio for p in r.pairs] == [3.0]
    assert (r.summary.n, r.summary.min) == (1, 3.0)
    assert (r.summary.ci95_low, r.summary.ci95_high) == (None, None)  # one pair: nothing to resample
    assert sorted((u.side, u.value, u.reason) for u in r.unmatched) == [
        ("a", 200.0, "partner has no value"), ("b", None, "no value")]


def test_substring_picks_the_one_matching_value_and_ambiguity_is_an_error() -> None:
    rows = [{"device_model": g, "images_per_sec": 10.0} for g in (P100, K80, P40)]
    assert cmp.compare(_con(rows), "device_model", "p100", "k80").a == P100  # case-insensitive
    with pytest.raises(BenchError, match="several") as e:
        cmp.compare(_con(rows), "device_model", "P", "K80")  # P100 and P40
    assert P100 in str(e.value) and P40 in str(e.value) and K80 not in str(e.value)
    with pytest.raises(BenchError, match="no value") as e:
        cmp.compare(_con(rows), "device_model", "V100", "K80")
    assert all(g in str(e.value) for g in (P100, K80, P40))


def test_an_exact_value_wins_over_substrings_and_null_selects_null() -> None:
    values = ["P100", "P100-PCIE", None]
    assert cmp.resolve_value(values, "device_model", "P100") == "P100"
    assert cmp.resolve_value(values, "device_model", "pcie") == "P100-PCIE"
    assert cmp.resolve_value(values, "device_model", "NULL") is None
    with pytest.raises(BenchError):
        cmp.resolve_value(["P100"], "device_model", "null")  # no NULL value present


def test_a_numeric_factor_takes_numbers_and_never_substrings() -> None:
    con = _con([
        {"batch_size_per_device": 64, "images_per_sec": 150.0},
        {"batch_size_per_device": 32, "images_per_sec": 100.0},
    ])
    r = cmp.compare(con, "batch_size_per_device", "64", "32")
    assert (r.a, r.b, [p.ratio for p in r.pairs]) == (64, 32, [1.5])
    for bad in ("6", "sixty-four"):
        with pytest.raises(BenchError, match="no value"):
            cmp.compare(con, "batch_size_per_device", bad, "32")


def test_where_filters_before_pairing_and_bad_input_is_a_bench_error() -> None:
    con = _con([
        {"device_model": P100, "num_devices": n, "images_per_sec": 40.0 * n} for n in (1, 2)
    ] + [{"device_model": K80, "num_devices": n, "images_per_sec": 10.0 * n} for n in (1, 2)])
    r = cmp.compare(con, "device_model", "P100", "K80", where="num_devices = 2")
    assert [(p.num_devices, p.a_value, p.b_value) for p in r.pairs] == [(2, 80.0, 20.0)]
    for kwargs, msg in [
        ({"where": "no_such_column = 1"}, "--where"),
        ({"factor": "num_devices"}, "unknown factor"),
        ({"metric": "latency"}, "unknown metric"),
        ({"equivalence": 5.0}, "fraction"),
        ({"b": "P100-SXM2"}, "both select"),
    ]:
        args = {"factor": "device_model", "a": "P100", "b": "K80"} | kwargs
        with pytest.raises(BenchError, match=msg):
            cmp.compare(con, **args)


def _scaling_rows() -> list[dict[str, Any]]:
    # batch 64 vs 32, speedups from 1 GPU: at 2 GPUs 1.9 / 1.8, at 4 GPUs 3.8 / 3.2 (ratios 1.0556, 1.1875)
    rows = []
    for bs, speedups in ((64, (1.0, 1.9, 3.8)), (32, (1.0, 1.8, 3.2))):
        for n, s in zip((1, 2, 4), speedups, strict=True):
            rows.append({"batch_size_per_device": bs, "num_devices": n, "baseline_devices": 1, "speedup": s, "efficiency": s / n})
    # inception3 measured from 2 GPUs at batch 64 but from 1 GPU at batch 32: different baselines, no pair
    rows.append({"model": "inception3", "batch_size_per_device": 64, "num_devices": 2, "baseline_devices": 2, "speedup": 1.0, "efficiency": 1.0})
    rows.append({"model": "inception3", "batch_size_per_device": 32, "num_devices": 2, "baseline_devices": 1, "speedup": 1.9, "efficiency": 0.95})
    # vgg16 from 8 GPUs on 1 node: the baseline pair (1 / 1) is left out, 8 GPUs on 2 nodes is a pair (0.9 / 0.8)
    for bs, s in ((64, 0.9), (32, 0.8)):
        rows.append({"model": "vgg16", "batch_size_per_device": bs, "num_devices": 8, "num_nodes": 1, "baseline_devices": 8, "speedup": 1.0, "efficiency": 1.0})
        rows.append({"model": "vgg16", "batch_size_per_device": bs, "num_devices": 8, "num_nodes": 2, "baseline_devices": 8, "speedup": s, "efficiency": s})
    return rows


def test_speedup_compares_scaling_and_leaves_out_the_baseline_pairs() -> None:
    r = cmp.compare(_con(scaling=_scaling_rows()), "batch_size_per_device", "64", "32", metric="speedup")
    assert [(p.config["model"], p.num_devices, p.a_value, p.b_value) for p in r.pairs] == [
        ("resnet50", 2, 1.9, 1.8), ("resnet50", 4, 3.8, 3.2), ("vgg16", 8, 0.9, 0.8)]
    assert [p.ratio for p in r.pairs] == pytest.approx([1.9 / 1.8, 3.8 / 3.2, 0.9 / 0.8])
    assert r.summary.n == 3 and r.summary.n_baseline_excluded == 2
    assert r.summary.median == pytest.approx(1.125)  # between 1.0556 and 1.1875
    assert sorted((u.side, u.reason) for u in r.unmatched) == [("a", "different baseline"), ("b", "different baseline")]
    eff = cmp.compare(_con(scaling=_scaling_rows()), "batch_size_per_device", "64", "32", metric="efficiency")
    assert [p.ratio for p in eff.pairs] == pytest.approx([1.9 / 1.8, 3.8 / 3.2, 0.9 / 0.8])  # same GPU count: same ratio


def test_compare_reads_the_shipped_configs_and_scaling_views() -> None:
    """End to end over sql/configs.sql and sql/scaling.sql: repeats are averaged, a failed run is left out."""
    from bench.sql.views import register_views

    runs = []
    for gpu, per_gpu in ((P100, 200.0), (K80, 50.0)):
        for n, eff in ((1, 1.0), (2, 0.9)):
            for rep, jitter in (("1", -1.0), ("2", 1.0)):
                runs.append({"device_model": gpu, "num_devices": n, "status": "ok", "tags": [("repeat", rep)],
                             "images_per_sec": per_gpu * n * eff + jitter})
    runs.append({"device_model": K80, "num_devices": 2, "status": "oom", "tags": [("repeat", "3")], "images_per_sec": None})
    factors = {c: _DEFAULTS[c] for c in cmp.FACTORS if c != "device_model"}
    con = duckdb.connect()
    con.register("runs", runs_table([{**factors, **r, "tags": dict(r["tags"]), "num_nodes": 1} for r in runs]))
    register_views(con, ["run_configs", "configs", "scaling"])
    r = cmp.compare(con, "device_model", "P100", "K80")
    assert [(p.num_devices, p.a_value, p.b_value, p.ratio) for p in r.pairs] == [(1, 200.0, 50.0, 4.0), (2, 360.0, 90.0, 4.0)]
    s = cmp.compare(con, "device_model", "P100", "K80", metric="speedup")
    assert [(p.num_devices, p.ratio) for p in s.pairs] == [(2, 1.0)] and s.summary.n_baseline_excluded == 1


def _tost_p(ratios: list[float], margin: float) -> float:
    """An independent paired TOST: two one-sided one-sample t tests on the log ratios."""
    d = np.log(ratios)
    n, bound = len(d), math.log(1 + margin)
    se = d.std(ddof=1) / math.sqrt(n)
    p_low = stats.t.sf((d.mean() + bound) / se, n - 1)  # H0: mean <= -bound
    p_upp = stats.t.cdf((d.mean() - bound) / se, n - 1)  # H0: mean >= +bound
    return float(max(p_low, p_upp))


def test_tost_says_yes_within_one_percent_and_no_at_ten_percent() -> None:
    close = [1.01, 0.99, 1.005, 0.995, 1.0, 1.008, 0.992, 1.002]
    eq = cmp.summarize(close, 0.05).equivalence
    assert eq is not None and (eq.verdict, eq.n, eq.margin) == ("yes", 8, 0.05)
    assert eq.p_value == pytest.approx(_tost_p(close, 0.05), rel=1e-9) and eq.p_value < 0.05
    far = [x * 1.10 for x in close]
    eq = cmp.summarize(far, 0.05).equivalence
    assert eq is not None and eq.verdict == "no"
    assert eq.p_value == pytest.approx(_tost_p(far, 0.05), rel=1e-9) and eq.p_value > 0.5
    few = cmp.summarize([1.0, 1.01], 0.05).equivalence
    assert few is not None and (few.verdict, few.p_value) == ("not enough data", None)
    same = cmp.summarize([1.02, 1.02, 1.02], 0.05).equivalence  # no spread: decided exactly
    assert same is not None and same.verdict == "yes"


def test_ci_is_the_t_interval_of_the_log_ratios_worked_by_hand() -> None:
    # logs of 1.3, 1.5: mean 0.33383, sd 0.10119, t(0.975, 1) = 12.7062; half = 12.7062 * 0.10119 / sqrt(2)
    s = cmp.summarize([1.3, 1.5])
    logs = [math.log(1.3), math.log(1.5)]
    mean, sd = sum(logs) / 2, abs(logs[1] - logs[0]) / math.sqrt(2)
    half = 12.706205 * sd / math.sqrt(2)
    assert (s.ci95_low, s.ci95_high) == (pytest.approx(math.exp(mean - half), rel=1e-6),
                                         pytest.approx(math.exp(mean + half), rel=1e-6))
    assert s.ci95_low is not None and s.ci95_low < 1.3 and s.ci95_high is not None and s.ci95_high > 1.5  # not [min, max]
    one = cmp.summarize([1.4])
    assert (one.ci95_low, one.ci95_high) == (None, None)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(compare_command)
    return app


def test_cli_json_is_one_object_with_the_documented_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    con = _con([
        {"model": "resnet50", "device_model": P100, "images_per_sec": 200.0},
        {"model": "resnet50", "device_model": K80, "images_per_sec": 100.0},
        {"model": "inception3", "device_model": P100, "images_per_sec": 400.0},
        {"model": "inception3", "device_model": K80, "images_per_sec": 50.0},
        {"model": "vgg16", "device_model": K80, "images_per_sec": 10.0},
    ])
    monkeypatch.setattr("bench.sql.read.connect", lambda root: con)
    res = CliRunner().invoke(_app(), ["--factor", "device_model", "--a", "P100", "--b", "K80", "--json", "--store", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert list(out) == ["factor", "a", "b", "metric", "pairs", "unmatched", "summary", "suspects"]
    assert (out["factor"], out["a"], out["b"], out["metric"]) == ("device_model", P100, K80, "images_per_sec")
    first = out["pairs"][0]
    assert "device_model" not in first and first["model"] == "inception3" and first["tags"] == {}
    assert (first["num_devices"], first["a_value"], first["b_value"], first["ratio"]) == (1, 400.0, 50.0, 8.0)
    assert [(u["side"], u["model"], u["reason"]) for u in out["unmatched"]] == [("b", "vgg16", "no partner")]
    s = out["summary"]
    assert (s["n"], s["median"], s["min"], s["max"], s["equivalence"]) == (2, 5.0, 2.0, 8.0, None)
    assert s["geomean"] == pytest.approx(4.0) and len(s["ci95"]) == 2


def test_cli_table_and_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    con = _con([{"device_model": g, "images_per_sec": v} for g, v in ((P100, 300.0), (K80, 100.0), (P40, 200.0))])
    monkeypatch.setattr("bench.sql.read.connect", lambda root: con)
    args = ["--factor", "device_model", "--b", "K80", "--equivalence", "0.05", "--store", str(tmp_path)]
    res = CliRunner().invoke(_app(), [*args, "--a", "P100"])
    assert res.exit_code == 0, res.output
    assert "3.00" in res.stdout and "n=1  median 3.000x" in res.stdout and "not enough data" in res.stdout
    res = CliRunner().invoke(_app(), [*args, "--a", "P"])
    assert isinstance(res.exception, BenchError) and "several" in str(res.exception)
    assert "Example:" in CliRunner().invoke(_app(), ["--help"]).stdout


def _official_configs() -> list[dict[str, Any]]:
    """The 64 published points as configs rows (one ok run each)."""
    lines = [ln for ln in OFFICIAL.read_text().splitlines() if not ln.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        for n in (1, 2, 4, 8):
            rows.append({"batch_size_per_device": int(r["batch_size"]), "data": r["dataset"], "model": r["model"],
                         "device_model": P100 if r["gpu"] == "P100" else K80, "num_devices": n,
                         "images_per_sec": float(r[f"gpus{n}"])})
    return rows


@pytest.mark.skipif(not OFFICIAL.exists(), reason=f"{OFFICIAL} is absent")
def test_the_official_2017_sheet_medians() -> None:
    rows = _official_configs()
    assert len(rows) == 64
    con = _con(rows)
    r = cmp.compare(con, "device_model", "P100", "K80")
    assert (r.summary.n, r.unmatched, round(r.summary.median or 0, 2)) == (32, (), 4.40)
    r = cmp.compare(con, "model", "resnet50", "inception3")
    assert (r.summary.n, round(r.summary.median or 0, 2)) == (32, 1.61)
    medians = [cmp.compare(con, "data", "synthetic", "real", where=f"num_devices = {n}").summary for n in (1, 2, 4, 8)]
    assert [(s.n, round(s.median or 0, 2)) for s in medians] == [(8, 1.00), (8, 1.00), (8, 1.01), (8, 1.02)]


def test_a_cpu_server_pairs_with_the_1_gpu_run_over_device_model() -> None:
    # "1 P100 is ~5.3x a two-socket Broadwell server": the CPU run is 1 cpu device whose model the log does
    # not name; over device_model (and its old name gpu_model) it pairs with the 1-GPU run, not the 2-GPU one.
    con = _con([
        {"device_type": "cpu", "device_model": None, "num_devices": 1, "images_per_sec": 40.0},
        {"device_model": P100, "num_devices": 1, "images_per_sec": 212.0},
        {"device_model": P100, "num_devices": 2, "images_per_sec": 420.0},
    ])
    for factor in ("device_model", "gpu_model"):
        result = cmp.compare(con, factor, "P100", "NULL")
        assert result.factor == "device_model"
        assert [(p.a_value, p.b_value, p.ratio) for p in result.pairs] == [(212.0, 40.0, 5.3)]
        assert [(u.side, u.num_devices) for u in result.unmatched] == [("a", 2)]
    assert cmp.compare(con, "device_type", "gpu", "cpu").pairs[0].ratio == 5.3


def test_no_pairs_is_explained_in_one_paragraph_naming_the_factors_that_differ(capsys: pytest.CaptureFixture[str]) -> None:
    """Every P100 row is fp16 and every K80 row fp32 (and their GPU counts never meet): no pair, and the
    text says so and why, listing at most 20 of the 30 unpartnered rows."""
    from bench.analytics.compare_text import MAX_UNMATCHED_SHOWN, no_pairs_reason, print_compare

    rows = ([{"device_model": P100, "precision": "fp16", "num_devices": 1, "batch_size_per_device": b} for b in range(1, 16)]
            + [{"device_model": K80, "precision": "fp32", "num_devices": 2, "batch_size_per_device": b} for b in range(1, 16)])
    result = cmp.compare(_con(rows), "device_model", "P100", "K80")
    assert result.pairs == () and len(result.unmatched) == 30
    reason = no_pairs_reason(result, {})
    assert "(15 rows)" in reason and "precision (fp16 vs fp32)" in reason and "num_devices (1 vs 2)" in reason
    assert "batch_size_per_device" not in reason  # shared values: not what prevents the pairs
    print_compare(result)
    out = capsys.readouterr().out
    assert "precision (fp16 vs fp32)" in out.replace("\n", " ")
    assert f"the first {MAX_UNMATCHED_SHOWN}; 10 more with --json" in out


def test_a_pair_far_below_the_others_is_named_and_left_out_unless_kept(capsys: pytest.CaptureFixture[str]) -> None:
    """Six models at 2x and one at 0.02x (a broken run): the median of the logs is log 2, their MAD 0, so the
    0.02x pair is below half the median and beyond 3 robust SDs: listed, and the summary is the six 2x pairs."""
    models = ["resnet50", "inception3", "vgg16", "alexnet", "googlenet", "resnet152", "trivial"]
    rows = []
    for m in models:
        rows += [{"model": m, "device_model": P100, "images_per_sec": 200.0 if m != "trivial" else 2.0},
                 {"model": m, "device_model": K80, "images_per_sec": 100.0}]
    r = cmp.compare(_con(rows), "device_model", "P100", "K80")
    assert len(r.pairs) == 7 and [p.config["model"] for p in r.suspects] == ["trivial"]
    assert (r.summary.n, r.summary.geomean, r.summary.min) == (6, pytest.approx(2.0), 2.0)
    kept = cmp.compare(_con(rows), "device_model", "P100", "K80", keep_suspects=True)
    assert kept.suspects == () and kept.summary.n == 7
    assert kept.summary.geomean == pytest.approx(math.exp((6 * math.log(2) + math.log(0.02)) / 7))
    from bench.analytics.compare_text import print_compare

    print_compare(r)
    assert ("1 suspect pair(s) left out of the summary, far below the others (model=trivial, precision=fp32 at 1: 0.02x)"
            in capsys.readouterr().out)
    assert r.to_json()["suspects"][0]["ratio"] == pytest.approx(0.02)
