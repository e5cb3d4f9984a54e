"""Scaling laws fitted to a configuration's speedups: Amdahl's serial fraction and the Universal
Scalability Law (USL), each by plain OLS through the origin on a linearising transform.

Units and normalisation. Speedups come from the ``scaling`` view: S = throughput(N) / throughput(b),
where b = ``baseline_devices`` is the configuration's smallest device count. The laws are stated relative to
one unit of work, S(1) = 1; we take the baseline group of b devices as that unit, n = N / b, and fit
S(n). With b = 1 these are the textbook parameters. With b > 1 they describe groups of b devices (the
serial fraction of a b-device job), which is all the data can say: throughput at 1 device was not measured.
Results (the peak, the extrapolated count) are converted back to devices.

- Amdahl: S(n) = 1 / (s + (1 - s)/n)  <=>  1/S - 1/n = s (1 - 1/n): one regressor, no intercept.
- USL (Gunther): S(n) = n / (1 + a(n-1) + b n(n-1))  <=>  n/S - 1 = a (n-1) + b n(n-1): two regressors,
  no intercept. Peak at n* = sqrt((1 - a)/b) when b > 0 and a < 1, else none.

The baseline point (n = 1) is left out of both regressions: it is 1 by construction, both sides of each
transform are 0 there, and counting it would add a residual degree of freedom that measures nothing. So a
configuration needs at least 3 device counts (the baseline and two more); with exactly 3, USL has 0 residual
degrees of freedom and its standard errors and CIs are None. R² is statsmodels' R² for a model without a
constant, i.e. uncentered (1 - SSR / sum y²) on the transformed scale; None when sum y² = 0 (exactly linear).

:func:`fit_scaling` fits one configuration with statsmodels. :func:`fit` fits every configuration of the
``scaling`` view with the same OLS in closed form, vectorised with numpy (tested equal to statsmodels):
50,000 configurations take ~0.7 s on a 2-core machine (half of it building the result dataclasses),
where statsmodels takes ~1 ms per configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.analytics import render
from bench.analytics.store import view_error
from bench.ingest.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import numpy as np

MIN_DEVICE_COUNTS = 3  #: the baseline and at least two more counts


@dataclass(frozen=True)
class Estimate:
    """A fitted parameter; stderr and the 95% CI (Student t) are None with 0 residual degrees of freedom."""

    estimate: float
    stderr: float | None
    ci95_low: float | None
    ci95_high: float | None


@dataclass(frozen=True)
class Prediction:
    """USL (with the 95% CI of the fitted mean) and Amdahl speedup at ``num_devices``, relative to the baseline."""

    num_devices: int
    usl_speedup: float | None  # None where the fitted USL denominator is not positive
    ci95_low: float | None
    ci95_high: float | None
    amdahl_speedup: float | None
    extrapolation: bool


@dataclass(frozen=True)
class ScalingFit:
    """Amdahl and USL fitted to one configuration. ``n_points`` counts the non-baseline points used."""

    baseline_devices: int
    device_counts: tuple[int, ...]
    n_points: int
    serial_fraction: Estimate  # Amdahl s, per baseline group
    amdahl_r2: float | None
    alpha: Estimate  # USL contention
    beta: Estimate  # USL coherency
    usl_r2: float | None
    peak_devices: float | None  # where USL peaks, in devices (b * n*)
    predicted: Prediction  # at twice the largest measured count: always an extrapolation
    #: USL α < 0 or β < 0: the points rise faster than linear (efficiency above 1, or growing), a curve
    #: the law cannot hold beyond the measured counts; its extrapolation is not evidence.
    superlinear: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "superlinear", self.alpha.estimate < 0 or self.beta.estimate < 0)


@dataclass(frozen=True)
class ConfigFit:
    """One configuration of the ``scaling`` view: its id, factor values and fit."""

    config_id: Any
    factors: dict[str, Any]
    fit: ScalingFit


@dataclass(frozen=True)
class FitReport:
    """Every fitted configuration, and the ids of those with fewer than 3 device counts (not fitted)."""

    fits: tuple[ConfigFit, ...]
    skipped: tuple[Any, ...]


class _Ols(NamedTuple):
    """OLS fits through the origin of k groups: params (k, p), cov (k, p, p), df (k,), uncentered R² (k,).

    cov is NaN where df = 0 and R² is NaN where sum y² = 0: both undefined, reported as None.
    """

    params: np.ndarray
    cov: np.ndarray
    df: np.ndarray
    r2: np.ndarray


def _transform(num_devices: np.ndarray, speedup: np.ndarray, baseline: np.ndarray | float) -> dict[str, Any]:
    """Regressors and responses of both laws at n = num_devices / baseline (see module doc)."""
    n = num_devices / baseline
    return {"amdahl_x": 1 - 1 / n, "amdahl_y": 1 / speedup - 1 / n,
            "usl_x1": n - 1, "usl_x2": n * (n - 1), "usl_y": n / speedup - 1}


def fit_scaling(points: Sequence[tuple[float, float]], baseline_devices: int | None = None) -> ScalingFit:
    """Fit Amdahl and USL with statsmodels to (num_devices, speedup relative to the baseline) points.

    ``baseline_devices`` defaults to the smallest num_devices; points at the baseline are not used (see module
    doc). Raises ValueError with fewer than 3 distinct device counts, or a non-positive count or speedup.
    """
    import numpy as np

    gpus = np.array([p[0] for p in points], dtype=np.float64)
    speedup = np.array([p[1] for p in points], dtype=np.float64)
    base = int(baseline_devices if baseline_devices is not None else gpus.min())
    if not (np.all(gpus > 0) and np.all(speedup > 0) and base > 0):
        raise ValueError("device counts and speedups must be positive")
    keep = gpus != base
    counts = sorted({base, *(int(g) for g in gpus)})
    if len(counts) < MIN_DEVICE_COUNTS:
        raise ValueError(f"need at least {MIN_DEVICE_COUNTS} device counts (baseline included), got {counts}")
    t = _transform(gpus[keep], speedup[keep], base)
    amdahl = _sm_ols(t["amdahl_y"], t["amdahl_x"][:, None])
    usl = _sm_ols(t["usl_y"], np.column_stack([t["usl_x1"], t["usl_x2"]]))
    return _assemble(np.array([base]), [tuple(counts)], [int(keep.sum())], amdahl, usl)[0]


def _sm_ols(y: np.ndarray, x: np.ndarray) -> _Ols:
    """statsmodels OLS without a constant, as one group; reads cov/R² only where defined (a 0/0 there
    would warn, and warnings are errors in the tests)."""
    import numpy as np
    import statsmodels.api as sm

    res = sm.OLS(y, x).fit()
    df = round(float(res.df_resid))
    p = x.shape[1]
    cov = res.cov_params() if df > 0 else np.full((p, p), np.nan)
    r2 = float(res.rsquared) if float(np.dot(y, y)) > 0 else np.nan
    return _Ols(np.asarray(res.params)[None, :], np.asarray(cov)[None, :, :], np.array([df]), np.array([r2]))


def _estimates(ols: _Ols, i: int) -> list[Estimate]:
    """Parameter i of every group, with a Student-t 95% CI."""
    import numpy as np
    from scipy import stats

    est = ols.params[:, i]
    se = np.sqrt(np.maximum(ols.cov[:, i, i], 0.0))
    half = stats.t.ppf(0.975, np.maximum(ols.df, 1)) * se
    return [Estimate(*row) for row in zip(est.tolist(), *map(_none, (se, est - half, est + half)), strict=True)]


def _none(a: np.ndarray) -> list[float | None]:
    """NaN (undefined) -> None, as a plain list."""
    return [None if v != v else v for v in a.tolist()]


def _assemble(base: np.ndarray, counts: list[tuple[int, ...]], n_points: list[int], amdahl: _Ols,
              usl: _Ols) -> list[ScalingFit]:
    """The result dataclasses of k groups: estimates, peak and the extrapolated prediction (vectorised)."""
    import numpy as np
    from scipy import stats

    s, alpha, beta = amdahl.params[:, 0], usl.params[:, 0], usl.params[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = np.where((beta > 0) & (alpha < 1), base * np.sqrt((1 - alpha) / beta), np.nan)
        target = 2 * np.array([c[-1] for c in counts], dtype=np.int64)
        n2 = target / base
        x1, x2 = n2 - 1, n2 * (n2 - 1)
        denom = 1 + alpha * x1 + beta * x2
        # CI of the fitted mean of y = n/S - 1 (linear in alpha, beta), mapped through S = n / (1 + y).
        var = x1 * x1 * usl.cov[:, 0, 0] + 2 * x1 * x2 * usl.cov[:, 0, 1] + x2 * x2 * usl.cov[:, 1, 1]
        half = stats.t.ppf(0.975, np.maximum(usl.df, 1)) * np.sqrt(np.maximum(var, 0.0))
        ok = denom - half > 0
        low, high = np.where(ok, n2 / (denom + half), np.nan), np.where(ok, n2 / (denom - half), np.nan)
        usl_s = np.where(denom > 0, n2 / denom, np.nan)
        amdahl_denom = s + (1 - s) / n2
        amdahl_s = np.where(amdahl_denom > 0, 1 / amdahl_denom, np.nan)
    preds = [Prediction(t, u, lo, hi, a, extrapolation=True) for t, u, lo, hi, a in
             zip(target.tolist(), *map(_none, (usl_s, low, high, amdahl_s)), strict=True)]
    return [ScalingFit(*row) for row in zip(
        base.astype(int).tolist(), counts, n_points, _estimates(amdahl, 0), _none(amdahl.r2),
        _estimates(usl, 0), _estimates(usl, 1), _none(usl.r2), _none(peak), preds, strict=True)]


#: Columns of ``scaling`` that are measurements of one device count, not factors of the configuration.
MEASURES = frozenset({
    "config_id", "num_devices", "num_nodes", "baseline_devices", "baseline_images_per_sec", "speedup",
    "efficiency", "superlinear", "images_per_sec", "n_runs", "n_ok", "median", "min", "max", "stddev",
    "ci95_low", "ci95_high", "wall_time_s", "global_batch_size",
    "num_gpus", "gpu_model",  # the device columns again, for GPU runs: not factors of their own
    "system", "score_min", "baseline_score_min",  # mlperf_scaling: each point's system and time
})


#: The views fit reads: weak scaling over throughput, and MLPerf scaling over time to train.
FIT_VIEWS = ("scaling", "mlperf_scaling")


def fit(con: duckdb.DuckDBPyConnection, where: str | None = None, view: str = "scaling") -> FitReport:
    """Fit every configuration of ``view`` (``scaling``, or ``mlperf_scaling``: speedup T(base) / T(N) of
    times to train) on ``con`` (rows filtered by the SQL ``where``).

    Points with a NULL, non-finite or non-positive speedup are not points; rows of one device count on
    different node counts are separate points, like repetitions. Factors are the view's columns outside
    :data:`MEASURES`, read from the configuration's smallest-device-count row (a MAP becomes a dict).
    Raises BenchError when the query fails (e.g. a bad ``where``).
    """
    import duckdb
    import numpy as np

    if view not in FIT_VIEWS:
        raise UsageError(f"bench fit reads one of {', '.join(FIT_VIEWS)}, not {view!r}")
    sql = f"SELECT * FROM {view} WHERE ({where or 'true'}) ORDER BY config_id, num_devices"
    try:
        tab = con.sql(sql).to_arrow_table()
    except duckdb.Error as e:
        raise view_error(e, view, where) from e
    cfg = np.asarray(tab.column("config_id").to_pylist(), dtype=object)
    col = {c: tab.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
           for c in ("num_devices", "baseline_devices", "speedup")}
    gpus, base, speedup = col["num_devices"], col["baseline_devices"], col["speedup"]
    valid = np.isfinite(speedup) & (speedup > 0) & (gpus > 0) & (base > 0)
    new_cfg = np.r_[True, cfg[1:] != cfg[:-1]] if len(cfg) else np.zeros(0, bool)
    starts, group = np.flatnonzero(new_cfg), np.cumsum(new_cfg) - 1
    fitted, bases, counts, n_points, amdahl, usl = _fit_groups(group, len(starts), gpus, base, speedup, valid)
    names = [c for c in tab.column_names if c not in MEASURES]
    factors = _factor_rows(tab.select(names).take(starts[fitted])) if names else [{} for _ in fitted]
    fits = _assemble(bases, counts, n_points, amdahl, usl)
    ids = cfg[starts].tolist()
    return FitReport(
        tuple(ConfigFit(ids[g], f, r) for g, f, r in zip(fitted.tolist(), factors, fits, strict=True)),
        tuple(ids[g] for g in np.flatnonzero(~np.isin(np.arange(len(starts)), fitted)).tolist()),
    )


def _factor_rows(tab: Any) -> list[dict[str, Any]]:
    """Rows of an Arrow table as dicts; a MAP column (config_tags) becomes a dict, not a list of pairs."""
    import pyarrow as pa

    maps = [f.name for f in tab.schema if pa.types.is_map(f.type)]
    rows = tab.to_pylist()
    for row in rows:
        for name in maps:
            row[name] = None if row[name] is None else dict(row[name])
    return rows


def _fit_groups(group: np.ndarray, k: int, gpus: np.ndarray, base: np.ndarray, speedup: np.ndarray,
                valid: np.ndarray) -> tuple[Any, ...]:
    """OLS of both laws for the groups 0..k-1 that have >= 2 non-baseline device counts.

    Returns (fitted group indices, their baselines, device counts (baseline first), n_points, amdahl _Ols,
    usl _Ols), rows aligned with the fitted indices. Rows are sorted by (group, num_devices).
    """
    import numpy as np

    use = valid & (gpus != base)
    g, n = group[use], gpus[use]
    new = np.r_[True, (g[1:] != g[:-1]) | (n[1:] != n[:-1])] if len(g) else np.zeros(0, bool)
    fitted = np.flatnonzero(np.bincount(g[new], minlength=k) >= MIN_DEVICE_COUNTS - 1)
    keep = use & np.isin(group, fitted)
    g = np.searchsorted(fitted, group[keep])  # renumber the fitted groups 0..len(fitted)-1
    t = _transform(gpus[keep], speedup[keep], base[keep])
    npts = np.bincount(g, minlength=len(fitted))
    amdahl = _ols_origin(g, len(fitted), t["amdahl_y"], [t["amdahl_x"]], npts)
    usl = _ols_origin(g, len(fitted), t["usl_y"], [t["usl_x1"], t["usl_x2"]], npts)
    bases = np.zeros(len(fitted))
    bases[g] = base[keep]
    counts: list[list[int]] = [[int(b)] for b in bases.tolist()]
    distinct = np.r_[True, (g[1:] != g[:-1]) | (gpus[keep][1:] != gpus[keep][:-1])] if len(g) else g > 0
    for gi, ni in zip(g[distinct].tolist(), gpus[keep][distinct].tolist(), strict=True):
        counts[gi].append(int(ni))
    return fitted, bases, [tuple(c) for c in counts], npts.tolist(), amdahl, usl


def _ols_origin(g: np.ndarray, k: int, y: np.ndarray, xs: list[np.ndarray], npts: np.ndarray) -> _Ols:
    """Per-group OLS of y on 1 or 2 regressors without a constant, for groups 0..k-1.

    Same estimator as statsmodels OLS: beta = (X'X)^-1 X'y, sigma² = SSR/(n-p), cov = sigma² (X'X)^-1,
    uncentered R² = 1 - SSR / y'y. Residuals are formed explicitly so a near-exact fit keeps its accuracy.
    """
    import numpy as np

    p = len(xs)
    xx = np.stack([np.stack([np.bincount(g, xs[i] * xs[j], minlength=k) for j in range(p)], -1)
                   for i in range(p)], -2)  # (k, p, p)
    xy = np.stack([np.bincount(g, xs[i] * y, minlength=k) for i in range(p)], -1)  # (k, p)
    inv = np.linalg.inv(xx)  # every fitted group has >= 2 distinct n != 1: X'X is regular
    params = np.einsum("kij,kj->ki", inv, xy)
    resid = y - sum(params[g, i] * xs[i] for i in range(p))
    ssr = np.bincount(g, resid * resid, minlength=k)
    yy = np.bincount(g, y * y, minlength=k)
    df = npts - p
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma2 = np.where(df > 0, ssr / df, np.nan)
        r2 = np.where(yy > 0, 1 - ssr / yy, np.nan)
    return _Ols(params, sigma2[:, None, None] * inv, df, r2)


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
                     f"{_fmt_num(p.usl_speedup)} at {p.num_devices} devices"
                     + (" (superlinear fit)" if f.superlinear else "")))
    cols = ["configuration", "devices", "Amdahl s [95% CI]", "Amdahl R²", "USL α [95% CI]", "USL β [95% CI]",
            "USL R²", "USL peak (devices)", "USL speedup, extrapolated"]
    render.print_table(cols, rows, title="Scaling laws (speedup relative to each configuration's smallest device count)")
    largest = max(max(c.fit.device_counts) for c in report.fits)
    print(f"Each extrapolation is at twice the configuration's largest measured device count (at most {largest} "
          "measured here): beyond the data, a prediction of the fitted law, not a measurement.")
    superlinear = [c for c in report.fits if c.fit.superlinear]
    if superlinear:
        print(f"{len(superlinear)} fit(s) are superlinear (USL α < 0 or β < 0: speedup grows faster than the "
              "device count): the law cannot hold past the measured counts, so their extrapolations say nothing; "
              "check those runs (bench report flags superlinear points).")


#: factors an MLPerf fit row always names (columns of mlperf_scaling)
_ALWAYS = ("submitter", "framework", "benchmark")


def _fmt_num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _fmt_estimate(e: Estimate) -> str:
    ci = "" if e.ci95_low is None else f" [{_fmt_num(e.ci95_low)}, {_fmt_num(e.ci95_high)}]"
    return _fmt_num(e.estimate) + ci
