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

from bench.analytics.scaling_laws import (
    AMDAHL_DOES_NOT_DESCRIBE,
    USL_DOES_NOT_DESCRIBE,
    FitReport,
    fit,
    fit_scaling,
)
from bench.analytics.scaling_text import print_fits
from bench.sql.errors import BenchError


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


def test_three_device_counts_leave_no_test_of_usl() -> None:
    f = fit_scaling([(1, 1.0), (2, 1.9), (4, 3.5)])
    assert f.n_points == 2 and not f.testable
    assert (f.alpha.stderr, f.alpha.ci95_low, f.beta.ci95_high, f.predicted.ci95_low) == (None,) * 4
    assert (f.predicted.usl_speedup, f.peak_devices) == (None, None)  # no extrapolation without a test
    assert f.notes[0] == "no test of the law possible: 2 points for USL's 2 parameters"
    # Unconstrained, two equations in two unknowns: 2/1.9-1 = a + 2b, 4/3.5-1 = 3a + 12b give b < 0, so b is
    # held at 0 and a is the one-regressor weighted fit sum(w² x y) / sum(w² x²), x = n - 1 = 1, 3 and the
    # weights w = S / n = 1.9/2, 3.5/4.
    y1, y2 = 2 / 1.9 - 1, 4 / 3.5 - 1
    assert (y2 - 3 * y1) / 6 < 0
    w1, w2 = 1.9 / 2, 3.5 / 4
    alpha = (w1**2 * y1 + w2**2 * 3 * y2) / (w1**2 + w2**2 * 9)
    assert (f.alpha.estimate, f.beta.estimate) == pytest.approx((alpha, 0.0))
    assert "USL reduces to Amdahl (β would be negative; held at 0)" in f.notes
    assert f.serial_fraction.ci95_low is not None  # Amdahl has one parameter, so one df left


def test_usl_parameters_are_never_negative_and_say_why() -> None:
    # Google's MLPerf v1.0 ResNet shape: 64, 2048, 3456 TPUs, efficiency falling to about a third. The
    # unconstrained USL through these points has beta < 0 ("superlinear"); the law's domain says beta >= 0.
    pts = [(64, 1.0), (2048, 32 * 0.5), (3456, 54 * 0.35)]
    f = fit_scaling(pts)
    assert f.alpha.estimate >= 0 and f.beta.estimate >= 0 and not f.superlinear
    assert not f.testable and f.predicted.usl_speedup is None
    # Points that rise faster than linear (efficiency 1.1, 1.2): no non-negative USL describes them.
    up = fit_scaling([(1, 1.0), (2, 2.2), (4, 4.8), (8, 9.8)])
    assert (up.alpha.estimate, up.beta.estimate, up.serial_fraction.estimate) == (0.0, 0.0, 0.0)
    assert USL_DOES_NOT_DESCRIBE in up.notes and AMDAHL_DOES_NOT_DESCRIBE in up.notes
    assert up.alpha.ci95_low is None  # a held parameter has no CI


def test_r2_is_on_the_speedup_scale_worked_by_hand() -> None:
    # Linear points S = n: USL with alpha = beta = 0 fits exactly; Amdahl's s = 0 too.
    f = fit_scaling([(1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0)])
    assert (f.usl_r2, f.amdahl_r2) == (pytest.approx(1.0), pytest.approx(1.0))
    # Noisy points, R² = 1 - SSR/SST over the non-baseline speedups, with the fit's own curve.
    pts = [(1, 1.0), (2, 1.8), (4, 3.6), (8, 5.0), (16, 7.5)]
    g = fit_scaling(pts)
    s_hat = [n / (1 + g.alpha.estimate * (n - 1) + g.beta.estimate * n * (n - 1)) for n, _ in pts[1:]]
    obs = [s for _, s in pts[1:]]
    mean = sum(obs) / len(obs)
    want = 1 - sum((o - h) ** 2 for o, h in zip(obs, s_hat, strict=True)) / sum((o - mean) ** 2 for o in obs)
    assert g.usl_r2 == pytest.approx(want) and 0.9 < want < 1


def test_noisy_amdahl_and_usl_curves_recover_their_parameters() -> None:
    rng = random.Random(7)
    counts = (1, 2, 4, 8, 16, 32, 64)
    for a, b in ((0.05, 0.0005), (0.02, 0.0001)):
        f = fit_scaling([(n, usl(n, a, b) * (1 if n == 1 else math.exp(rng.gauss(0, 0.005)))) for n in counts])
        assert (f.alpha.estimate, f.beta.estimate) == (pytest.approx(a, rel=0.05), pytest.approx(b, rel=0.1))
        assert f.notes == () and f.testable
    f = fit_scaling([(n, amdahl(n, 0.08) * (1 if n == 1 else math.exp(rng.gauss(0, 0.005)))) for n in counts])
    assert f.serial_fraction.estimate == pytest.approx(0.08, rel=0.05)


def _scaling_view(rows: list[tuple[object, ...]]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    cols = ["config_id", "model", "device_model", "num_devices", "baseline_devices", "speedup", "efficiency"]
    data = dict(zip(cols, map(list, zip(*rows, strict=True)), strict=True))
    types = [pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64(), pa.float64(), pa.float64()]
    table = pa.table({c: pa.array(data[c], t) for c, t in zip(cols, types, strict=True)})
    tags = pa.array([[("kvstore", "device")]] * len(rows), pa.map_(pa.string(), pa.string()))
    con.register("scaling", table.append_column("tags", tags))
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
    assert a.factors == {"model": "resnet50", "device_model": "P100", "tags": {"kvstore": "device"}}
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
    from bench.runner.commands import fit_cmd as cli
    from bench.sql import read as store

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
    """Contract with sql/configs.sql and sql/scaling.sql: the columns fit() needs, factors, tags."""
    from bench.sql.schema import RUNS
    from bench.sql.views import register_views

    rows = [{"run_id": f"{n}-{rep}", "model": "resnet50", "framework": "tensorflow", "device_model": "P100",
             "num_devices": n, "num_nodes": 1, "status": "ok", "batch_size_per_device": 64,
             "images_per_sec": 100.0 * usl(n, 0.02, 0.001), "tags": [("repeat", str(rep)), ("site", "lab")]}
            for n in (1, 2, 4, 8) for rep in range(2)]
    rows.append({"run_id": "oom", "model": "resnet50", "framework": "tensorflow", "device_model": "P100",
                 "num_devices": 16, "num_nodes": 2, "status": "oom", "batch_size_per_device": 64,
                 "tags": [("repeat", "0"), ("site", "lab")]})  # a failed count: not a point
    con = duckdb.connect()
    con.register("runs", pa.Table.from_pylist(rows, schema=RUNS))
    register_views(con, ["run_configs", "configs", "scaling"])
    (only,) = fit(con).fits
    assert only.fit.device_counts == (1, 2, 4, 8)
    assert (only.fit.alpha.estimate, only.fit.beta.estimate) == pytest.approx((0.02, 0.001), abs=1e-9)
    assert only.factors["model"] == "resnet50" and only.factors["tags"] == {"site": "lab"}


def test_fit_of_an_empty_or_unfittable_view_is_empty_not_an_error() -> None:
    assert fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0)]), where="false") == FitReport((), ())
    assert fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0), ("x", "m", "g", 2, 1, 1.9, 0.95)])).skipped == ("x",)


def test_points_above_linear_are_not_extrapolated_and_superlinear_needs_the_ci(capsys: pytest.CaptureFixture[str]) -> None:
    """Speedup 1, 2.01, 4.10, 9.01 at 1-8 devices (exact USL with α = 0, β = -0.002): β is held at 0, not a
    "prediction" of 30.8 at 16 devices. Superlinear is said only where a point's efficiency is above 1
    beyond its CI: "s" has CIs whose low end is above the baseline's per-device rate, "t" the same speedups
    with CIs that reach below it."""
    rows = [("s", "resnet50", "P100", n, 1, usl(n, 0.0, -0.002), None) for n in (1, 2, 4, 8)]
    rows += [("t", "inception3", "P100", n, 1, usl(n, 0.0, -0.002), None) for n in (1, 2, 4, 8)]
    rows += [("l", "vgg16", "P100", n, 1, usl(n, 0.02, 0.001), None) for n in (1, 2, 4, 8)]
    con = _scaling_view(rows)
    speed = [r[5] for r in rows]
    low = [100 * v * (0.99 if r[0] == "s" else 0.85) for v, r in zip(speed, rows, strict=True)]
    tab = con.sql("SELECT * FROM scaling").to_arrow_table()
    tab = tab.append_column("ci95_low", pa.array(low)).append_column("baseline_images_per_sec", pa.array([100.0] * len(rows)))
    con.register("scaling", tab)
    report = fit(con)
    assert {c.config_id: c.fit.superlinear for c in report.fits} == {"s": True, "t": False, "l": False}
    s = next(c.fit for c in report.fits if c.config_id == "s")
    assert (s.alpha.estimate, s.beta.estimate) == (0.0, 0.0) and USL_DOES_NOT_DESCRIBE in s.notes
    assert s.predicted.usl_speedup == pytest.approx(16.0)  # the linear law at its bound, not 30.8
    print_fits(report)
    flat = " ".join(capsys.readouterr().out.split())
    assert "1 configuration(s) have a point whose efficiency is above 1 beyond its CI" in flat and "at most 8 measured here" in flat


def test_fit_on_nothing_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    print_fits(fit(_scaling_view([("x", "m", "g", 1, 1, 1.0, 1.0)]), where="false"))
    assert "No configuration to fit" in capsys.readouterr().out
