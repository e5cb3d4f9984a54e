"""``bench fit``'s terminal output: one table row per fitted configuration (bench.analytics.scaling_laws),
then what the fits cannot say (no test of the law, superlinear points)."""

from __future__ import annotations

from bench.analytics import render
from bench.analytics.scaling_laws import Estimate, FitReport


def print_fits(report: FitReport) -> None:
    """One table row per configuration: parameters with their 95% CIs, the USL peak, the extrapolation."""

    if report.skipped:
        print(f"{len(report.skipped)} configuration(s) with fewer than 3 device counts not fitted.")
    if not report.fits:
        if not report.skipped:
            print("No configuration to fit: the selection has no speedups (an empty store, or a --where that "
                  "selects nothing).")
        return
    first = report.fits[0].factors
    # Label a configuration by the factors that differ between the fitted ones (all of them if one); an
    # MLPerf row always names its submitter, framework and benchmark.
    always = _ALWAYS if "submitter" in first else ()
    names = [k for k in first if len({repr(c.factors.get(k)) for c in report.fits}) > 1 or k in always] or \
        [k for k, v in first.items() if v not in (None, {})]
    rows = []
    for c in report.fits:
        f, p = c.fit, c.fit.predicted
        rows.append((" ".join(str(c.factors.get(k)) for k in names), ",".join(map(str, f.device_counts)),
                     _fmt_estimate(f.serial_fraction), _fmt_num(f.amdahl_r2), _fmt_estimate(f.alpha),
                     _fmt_estimate(f.beta), _fmt_num(f.usl_r2), _fmt_num(f.peak_devices),
                     f"{_fmt_num(p.usl_speedup)} at {p.num_devices} devices" if f.testable else "-",
                     "; ".join(f.notes + (("superlinear: efficiency > 1 beyond its CI",) if f.superlinear else ()))
                     or "-"))
    cols = ["configuration", "devices", "Amdahl s [95% CI]", "Amdahl R²", "USL α [95% CI]", "USL β [95% CI]",
            "USL R²", "USL peak (devices)", "USL speedup, extrapolated", "note"]
    render.print_table(cols, rows, title="Scaling laws (speedup relative to each configuration's smallest device count)")
    largest = max(max(c.fit.device_counts) for c in report.fits)
    print(f"Each extrapolation is at twice the configuration's largest measured device count (at most {largest} "
          "measured here): beyond the data, a prediction of the fitted law, not a measurement. R² is on the "
          "speedup scale; s, α and β are held >= 0, as the laws define them.")
    untested = sum(not c.fit.testable for c in report.fits)
    if untested:
        print(f"{untested} fit(s) have no more points than USL's 2 parameters: the curve passes through them "
              "whatever the law, so there is no test of the law, no CI and no extrapolation.")
    superlinear = sum(c.fit.superlinear for c in report.fits)
    if superlinear:
        print(f"{superlinear} configuration(s) have a point whose efficiency is above 1 beyond its CI "
              "(superlinear, measured): check those runs (bench report flags them).")


#: factors an MLPerf fit row always names (columns of mlperf_scaling)
_ALWAYS = ("submitter", "framework", "benchmark")


def _fmt_num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _fmt_estimate(e: Estimate) -> str:
    ci = "" if e.ci95_low is None else f" [{_fmt_num(e.ci95_low)}, {_fmt_num(e.ci95_high)}]"
    return _fmt_num(e.estimate) + ci
