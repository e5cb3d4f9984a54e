"""Amdahl and USL fits: exact synthetic data recovered, the baseline > 1 convention, and fit() over a view."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from bench.analytics.scaling_laws import FitReport, fit, fit_scaling, print_fits
from bench.ingest.errors import BenchError


def usl(n: float, alpha: float, beta: float) -> float:
    return n / (1 + alpha * (n - 1) + beta * n * (n - 1))


def amdahl(n: float, s: float) -> float:
    return 1 / (s + (1 - s) / n)


def test_usl_parameters_peak_and_extrapolation_are_recovered_from_exact_data() -> None:
    f = fit_scaling([(n, usl(n, 0.02, 0.001)) for n in (1, 2, 4, 8, 16)])
    assert f.alpha.estimate == pytest.approx(0.02, abs=1e-6)
    assert f.beta.estimate == pytest.approx(0.001, abs=1e-6)
    assert f.peak_devices == pytest.approx(math.sqrt(0.98 / 0.001), abs=1e-6)  # 31.30 GPUs
    assert f.usl_r2 == pytest.approx(1.0)
    assert f.alpha.ci95_low <= 0.02 <= f.alpha.ci95_high  # type: ignore[operator]
    p = f.predicted
    assert (p.num_devices, p.extrapolation) == (32, True)
    assert p.usl_speedup == pytest.approx(32 / (1 + 0.02 * 31 + 0.001 * 32 * 31))
    assert (f.baseline_devices, f.device_counts, f.n_points) == (1, (1, 2, 4, 8, 16), 4)


def test_amdahl_serial_fraction_is_recovered_from_exact_data() -> None:
    f = fit_scaling([(n, amdahl(n, 0.05)) for n in (1, 2, 4, 8)])
    assert f.serial_fraction.estimate == pytest.approx(0.05, abs=1e-9)
    assert f.serial_fraction.stderr == pytest.approx(0.0, abs=1e-9)
    assert f.amdahl_r2 == pytest.approx(1.0)
    assert f.predicted.amdahl_speedup == pytest.approx(1 / (0.05 + 0.95 / 16))


def test_baseline_above_one_gpu_fits_in_units_of_the_baseline_group() -> None:
    # Measured from 2 GPUs: speedups relative to 2 GPUs follow USL in n = N/2 with alpha=0.05, beta=0.002.
    f = fit_scaling([(2 * n, usl(n, 0.05, 0.002)) for n in (1, 2, 4, 8)])
    assert f.baseline_devices == 2
    assert (f.alpha.estimate, f.beta.estimate) == pytest.approx((0.05, 0.002), abs=1e-9)
    assert f.peak_devices == pytest.approx(2 * math.sqrt(0.95 / 0.002))
    assert f.predicted.num_devices == 32
    assert f.predicted.usl_speedup == pytest.approx(usl(16, 0.05, 0.002))


def test_three_device_counts_leave_usl_without_residual_degrees_of_freedom() -> None:
    f = fit_scaling([(1, 1.0), (2, 1.9), (4, 3.5)])
    assert f.n_points == 2
    assert (f.alpha.stderr, f.alpha.ci95_low, f.beta.ci95_high, f.predicted.ci95_low) == (None,) * 4
    # Two equations, two unknowns, solved by hand: 2/1.9-1 = a + 2b, 4/3.5-1 = 3a + 12b.
    y1, y2 = 2 / 1.9 - 1, 4 / 3.5 - 1
    b = (y2 - 3 * y1) / 6
    assert (f.alpha.estimate, f.beta.estimate) == pytest.approx((y1 - 2 * b, b))
    assert f.serial_fraction.ci95_low is not None  # Amdahl has one parameter, so one df left


def test_no_peak_without_positive_coherency_and_too_few_counts_refused() -> None:
    assert fit_scaling([(n, float(n)) for n in (1, 2, 4, 8)]).peak_devices is None  # linear: beta = 0
    assert fit_scaling([(n, usl(n, 0.1, -0.001)) for n in (1, 2, 4, 8)]).peak_devices is None
    with pytest.raises(ValueError, match="at least 3"):
        fit_scaling([(1, 1.0), (2, 1.9), (2, 1.95)])
    with pytest.raises(ValueError, match="positive"):
        fit_scaling([(1, 1.0), (2, 0.0), (4, 3.0)])


def _scaling_view(rows: list[tuple[object, ...]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    cols = ["config_id", "model", "device_model", "num_devices", "baseline_devices", "speedup", "efficiency"]
    data = dict(zip(cols, map(list, zip(*rows, strict=True)), strict=True))
    types = [pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64(), pa.float64(), pa.float64()]
    table = pa.table({c: pa.array(data[c], t) for c, t in zip(cols, types, strict=True)})
    tags = pa.array([[("kvstore", "device")]] * len(rows), pa.map_(pa.string(), pa.string()))
    con.register("scaling", table.append_column("config_tags", tags))
    return con


def test_fit_over_the_scaling_view_given_expect() -> None:
    rows = [(cid, "resnet50", "P100", n, 1, usl(n, 0.02, 0.001), usl(n, 0.02, 0.001) / n) for cid, n in
            [("a", 8), ("a", 1), ("a", 2), ("a", 4)]]
    rows += [("b", "inception3", "K80", n, 1, s, s / n) for n, s in [(1, 1.0), (2, 1.9)]]  # 2 counts
    rows += [("c", "inception3", "P100", n, 1, s, None) for n, s in [(1, 1.0), (2, 1.9), (4, None)]]
    rows += [("d", "vgg16", "P100", n, 2, amdahl(n / 2, 0.1), None) for n in (2, 4, 8, 16)]
    report = fit(_scaling_view(rows))
    assert [c.config_id for c in report.fits] == ["a", "d"]
    assert report.skipped == ("b", "c")  # c's 4-GPU point has no speedup (every run failed)
    a, d = report.fits
    assert a.factors == {"model": "resnet50", "device_model": "P100", "config_tags": {"kvstore": "device"}}
    assert (a.fit.alpha.estimate, a.fit.beta.estimate) == pytest.approx((0.02, 0.001), abs=1e-9)
    assert a.fit.device_counts == (1, 2, 4, 8)
    assert d.fit.serial_fraction.estimate == pytest.approx(0.1)
    # Amdahl is USL with alpha = s, beta = 0: n/S - 1 = s(n - 1).
    assert (d.fit.alpha.estimate, d.fit.beta.estimate) == pytest.approx((0.1, 0.0), abs=1e-12)
    assert (d.fit.baseline_devices, d.fit.predicted.num_devices) == (2, 32)
    only = fit(_scaling_view(rows), where="model = 'vgg16'")
    assert [c.config_id for c in only.fits] == ["d"]
    with pytest.raises(BenchError, match="no_such_column"):
        fit(_scaling_view(rows), where="no_such_column = 1")


def test_vectorised_fit_equals_statsmodels_on_noisy_configurations() -> None:
    rng = random.Random(42)
    rows = []
    for c in range(30):
        base = rng.choice([1, 2])
        counts = [base * m for m in (1, 2, 4, 8, 16)][: rng.choice([3, 4, 5])]
        for n in counts:
            noise = 1.0 if n == base else math.exp(rng.gauss(0, 0.03))
            rows.append((f"c{c:02d}", "m", "g", n, base, usl(n / base, 0.03, 0.002) * noise, None))
    report = fit(_scaling_view(rows))
    assert len(report.fits) == 30
    assert {cf.fit.alpha.stderr is None for cf in report.fits} == {True, False}  # both df = 0 and df > 0 seen
    for cf in report.fits:
        ref = fit_scaling([(r[3], r[5]) for r in rows if r[0] == cf.config_id])
        got = cf.fit
        for name in ("serial_fraction", "alpha", "beta"):
            for field in ("estimate", "stderr", "ci95_low", "ci95_high"):
                _same(getattr(getattr(got, name), field), getattr(getattr(ref, name), field))
        for name in ("amdahl_r2", "usl_r2", "peak_devices", "baseline_devices", "device_counts", "n_points"):
            _same(getattr(got, name), getattr(ref, name))
        for field in ("num_devices", "usl_speedup", "ci95_low", "ci95_high", "amdahl_speedup"):
            _same(getattr(got.predicted, field), getattr(ref.predicted, field))


def _same(got: object, want: object) -> None:
    if want is None or isinstance(want, tuple | int):
        assert got == want
    else:
        assert got == pytest.approx(want, rel=1e-7, abs=1e-12)


def _cli(monkeypatch: pytest.MonkeyPatch, con: duckdb.DuckDBPyConnection | None) -> typer.Typer:
    """A one-command app running ``bench fit``; the store's connection replaced by ``con`` when given."""
    from bench.analytics import cli, store

    if con is not None:
        monkeypatch.setattr(store, "connect", lambda root: con)
    app = typer.Typer()
    app.command()(cli.fit_command)
    return app


def test_cli_fit_table_json_and_user_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rows = [("a", "resnet50", "P100", n, 1, usl(n, 0.02, 0.001), None) for n in (1, 2, 4, 8, 16)]
    rows += [("b", "inception3", "K80", n, 1, s, None) for n, s in [(1, 1.0), (2, 1.9)]]
    runner = CliRunner()
    assert "Example: bench fit" in runner.invoke(_cli(monkeypatch, None), ["--help"]).output
    app = _cli(monkeypatch, _scaling_view(rows))
    table = runner.invoke(app, ["--store", str(tmp_path)])
    assert table.exit_code == 0, table.output
    assert "1 configuration(s) with fewer than 3 device counts not fitted" in table.output
    assert "1,2,4,8,16" in table.output and "31.3" in table.output  # the peak, sqrt(0.98/0.001)
    out = runner.invoke(app, ["--json"])  # (--where narrows runs, which this scaling-only view lacks)
    doc = json.loads(out.output)
    assert doc["skipped"] == ["b"]
    (only,) = doc["fits"]
    assert only["config_id"] == "a"
    assert only["fit"]["alpha"]["estimate"] == pytest.approx(0.02)
    assert only["fit"]["predicted"]["usl_speedup"] == pytest.approx(usl(32, 0.02, 0.001))
    assert (only["fit"]["predicted"]["num_devices"], only["fit"]["predicted"]["extrapolation"]) == (32, True)
    monkeypatch.undo()  # the real store.connect: a folder that is not a store is a user error
    missing = runner.invoke(_cli(monkeypatch, None), ["--store", str(tmp_path / "nowhere")])
    assert isinstance(missing.exception, BenchError) and "not a bench store" in str(missing.exception)


def test_fit_reads_the_curated_scaling_view_built_from_runs() -> None:
    """Contract with sql/configs.sql and sql/scaling.sql: the columns fit() needs, factors, config_tags."""
    from bench.analytics.views import register_views
    from bench.ingest.schema import RUNS

    rows = [{"run_id": f"{n}-{rep}", "model": "resnet50", "framework": "tensorflow", "device_model": "P100",
             "num_devices": n, "num_nodes": 1, "status": "ok", "batch_size_per_device": 64,
             "images_per_sec": 100.0 * usl(n, 0.02, 0.001), "tags": [("repeat", str(rep)), ("site", "lab")]}
            for n in (1, 2, 4, 8) for rep in range(2)]
    rows.append({"run_id": "oom", "model": "resnet50", "framework": "tensorflow", "device_model": "P100",
                 "num_devices": 16, "num_nodes": 2, "status": "oom", "batch_size_per_device": 64,
                 "tags": [("repeat", "0"), ("site", "lab")]})  # a failed count: not a point
    con = duckdb.connect()
    con.register("runs", pa.Table.from_pylist(rows, schema=RUNS))
    register_views(con, ["configs", "scaling"])
    (only,) = fit(con).fits
    assert only.fit.device_counts == (1, 2, 4, 8)
    assert (only.fit.alpha.estimate, only.fit.beta.estimate) == pytest.approx((0.02, 0.001), abs=1e-9)
    assert only.factors["model"] == "resnet50" and only.factors["config_tags"] == {"site": "lab"}


def test_fit_of_an_empty_or_unfittable_view_is_empty_not_an_error() -> None:
    assert fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0)]), where="false") == FitReport((), ())
    assert fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0), ("x", "m", "g", 2, 1, 1.9, 0.95)])).skipped == ("x",)


def test_a_superlinear_fit_and_its_extrapolation_are_called_so(capsys: pytest.CaptureFixture[str]) -> None:
    """β < 0 (speedup 1, 2.01, 4.10, 9.01 at 1-8 devices, exact USL with α = 0, β = -0.002): the USL has no
    peak and "predicts" 30.8 at 16 devices; bench fit flags it instead of extrapolating silently."""
    rows = [("s", "resnet50", "P100", n, 1, usl(n, 0.0, -0.002), None) for n in (1, 2, 4, 8)]
    rows += [("l", "vgg16", "P100", n, 1, usl(n, 0.02, 0.001), None) for n in (1, 2, 4, 8)]
    report = fit(_scaling_view(rows))
    flags = {c.config_id: c.fit.superlinear for c in report.fits}
    assert flags == {"s": True, "l": False}
    s = next(c.fit for c in report.fits if c.config_id == "s")
    assert s.beta.estimate == pytest.approx(-0.002, abs=1e-9)
    assert s.predicted.usl_speedup == pytest.approx(16 / (1 - 0.002 * 16 * 15))  # 30.77
    print_fits(report)
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "superlinear" in out.split("1 fit(s) are superlinear")[0] and "1 fit(s) are superlinear" in flat
    assert "at most 8 measured here" in flat


def test_fit_on_nothing_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    print_fits(fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0)]), where="false"))
    assert "No configuration to fit" in capsys.readouterr().out
