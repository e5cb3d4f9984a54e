"""Scaling laws fitted to a configuration's speedups: Amdahl's serial fraction and the Universal
Scalability Law (USL), each by weighted least squares through the origin on a linearising transform, with
the parameters held to the laws' own domain (s, alpha, beta >= 0).

Units and normalisation. Speedups come from the ``scaling`` view: S = throughput(N) / throughput(b),
where b = ``baseline_devices`` is the configuration's smallest device count. The laws are stated relative to
one unit of work, S(1) = 1; we take the baseline group of b devices as that unit, n = N / b, and fit
S(n). With b = 1 these are the textbook parameters. With b > 1 they describe groups of b devices (the
serial fraction of a b-device job), which is all the data can say: throughput at 1 device was not measured.
Results (the peak, the extrapolated count) are converted back to devices.

- Amdahl: S(n) = 1 / (s + (1 - s)/n)  <=>  1/S - 1/n = s (1 - 1/n): one regressor, no intercept.
- USL (Gunther): S(n) = n / (1 + a(n-1) + b n(n-1))  <=>  n/S - 1 = a (n-1) + b n(n-1): two regressors,
  no intercept. Peak at n* = sqrt((1 - a)/b) when b > 0 and a < 1, else none.

Constraints. The laws define s, a, b >= 0; a negative value describes a curve that rises faster than the law
allows. The fit is non-negative least squares: where the unconstrained optimum has a negative parameter,
that parameter is *held at 0* (its estimate is 0, with no CI) and the others are refitted, and the fit says
so: USL with b held at 0 is Amdahl (S = n / (1 + a(n-1)) is Amdahl with s = a); USL with a held at 0, or
Amdahl with s held at 0, is "the law does not describe these points". The CIs of the free parameters are
the Student-t intervals of the refitted model (residual df = points - free parameters).

Weights. Measured speedups carry multiplicative noise (a few % of S at every count), which the transforms
turn into errors that grow with n: n/S - 1 has a standard deviation of about sigma n / S. Ordinary least
squares then lets the largest counts decide and its CIs undercover (measured on USL with 2% noise at 1-64
devices, 2,000 replicates: 74% for alpha, 53% for beta). Each row is therefore divided by its transform's
standard deviation (weighted least squares, up to the common sigma), which brings those to 95% and 95%
(tests/analytics/test_coverage.py).

The baseline point (n = 1) is left out of both regressions: it is 1 by construction, both sides of each
transform are 0 there. So a configuration needs at least 3 device counts (the baseline and two more). With
no more points than USL's two parameters, the curve passes through every point whatever the law: there is
no test of the law, and USL gets no CI, no peak and no extrapolation (Amdahl, with one parameter, still
has one residual df). R² is on the speedup scale: 1 - sum (S - S_fit)² / sum (S - mean S)² over the
non-baseline points; None where the speedups do not vary.

Superlinear is a measured fact, not a fitted one: a point whose efficiency exceeds 1 beyond its CI (the
view's ``ci95_low`` of the point's throughput over the baseline's mean). A view without CIs
(``mlperf_scaling``) never claims it.

:func:`fit_scaling` fits one configuration with scipy's NNLS and statsmodels' OLS. :func:`fit` fits every
configuration of a view with the same estimator in closed form, vectorised with numpy (tested equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from bench.analytics.intervals import t95s
from bench.analytics.query import view_error
from bench.sql.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import numpy as np

MIN_DEVICE_COUNTS = 3  #: the baseline and at least two more counts
FEASIBLE_TOL = 1e-12  #: an unconstrained estimate above -FEASIBLE_TOL is within the law's domain (rounding)


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


#: What a fit says when the law cannot be tested or does not describe the points (``ScalingFit.notes``).
NO_TEST = "no test of the law possible: {k} points for USL's 2 parameters"
USL_IS_AMDAHL = "USL reduces to Amdahl (β would be negative; held at 0)"
USL_DOES_NOT_DESCRIBE = "USL does not describe these points (α would be negative; held at 0)"
AMDAHL_DOES_NOT_DESCRIBE = "Amdahl does not describe these points (s would be negative; held at 0)"


@dataclass(frozen=True)
class ScalingFit:
    """Amdahl and USL fitted to one configuration. ``n_points`` counts the non-baseline points used."""

    baseline_devices: int
    device_counts: tuple[int, ...]
    n_points: int
    serial_fraction: Estimate  # Amdahl s, per baseline group
    amdahl_r2: float | None  # on the speedup scale
    alpha: Estimate  # USL contention
    beta: Estimate  # USL coherency
    usl_r2: float | None  # on the speedup scale
    peak_devices: float | None  # where USL peaks, in devices (b * n*); None without a test of the law
    predicted: Prediction  # at twice the largest measured count: always an extrapolation
    notes: tuple[str, ...] = ()  # NO_TEST, USL_IS_AMDAHL, ... (see the module doc)
    #: a point's efficiency exceeds 1 beyond its CI (measured, see the module doc)
    superlinear: bool = False

    @property
    def testable(self) -> bool:
        """More points than USL's parameters: the residuals test the law."""
        return self.n_points > 2


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
    """Non-negative least-squares fits through the origin of k groups: params (k, p), cov (k, p, p), df (k,),
    held (k, p): the parameter was held at 0 because the unconstrained optimum is infeasible.

    cov is NaN where df = 0 and on the rows and columns of held parameters: undefined, reported as None.
    """

    params: np.ndarray
    cov: np.ndarray
    df: np.ndarray
    held: np.ndarray


def _transform(num_devices: np.ndarray, speedup: np.ndarray, baseline: np.ndarray | float) -> dict[str, Any]:
    """Regressors and responses of both laws at n = num_devices / baseline, each row weighted (see module
    doc): multiplied by S for Amdahl (1/S has sd ~ sigma / S) and by S / n for USL (n/S has sd ~ sigma n / S)."""
    n = num_devices / baseline
    wa, wu = speedup, speedup / n
    return {"amdahl_x": (1 - 1 / n) * wa, "amdahl_y": (1 / speedup - 1 / n) * wa,
            "usl_x1": (n - 1) * wu, "usl_x2": n * (n - 1) * wu, "usl_y": (n / speedup - 1) * wu}


def fit_scaling(points: Sequence[tuple[float, float]], baseline_devices: int | None = None) -> ScalingFit:
    """Fit Amdahl and USL to (num_devices, speedup relative to the baseline) points with scipy's NNLS (the
    estimates) and statsmodels' OLS (the unconstrained optimum and its covariance): the reference for
    :func:`fit`. ``superlinear`` is False: the points carry no CI.

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
    amdahl = _sm_nnls(t["amdahl_y"], t["amdahl_x"][:, None])
    usl = _sm_nnls(t["usl_y"], np.column_stack([t["usl_x1"], t["usl_x2"]]))
    g = np.zeros(int(keep.sum()), dtype=np.int64)
    r2 = _speedup_r2(g, 1, gpus[keep] / base, speedup[keep], amdahl.params, usl.params)
    return _assemble(np.array([base]), [tuple(counts)], [int(keep.sum())], amdahl, usl, r2, np.zeros(1, bool))[0]


def _sm_nnls(y: np.ndarray, x: np.ndarray) -> _Ols:
    """One group: statsmodels OLS without a constant where its optimum is feasible (>= 0), else scipy's NNLS
    with sigma² = SSR / (points - parameters) and the covariance of the free columns."""
    import numpy as np
    import statsmodels.api as sm
    from scipy.optimize import nnls

    n, p = x.shape
    df = n - p
    res = sm.OLS(y, x).fit()
    free = np.ones(p, dtype=bool)
    if np.all(np.asarray(res.params) >= -FEASIBLE_TOL):
        params = np.maximum(np.asarray(res.params), 0.0)
        cov = np.asarray(res.cov_params()) if df > 0 else np.full((p, p), np.nan)
    else:
        params = nnls(x, y)[0]
        free = params > 0
        resid = y - x @ params
        cov = np.full((p, p), np.nan)
        if df > 0 and free.any():
            xf = x[:, free]
            cov[np.ix_(free, free)] = float(resid @ resid) / df * np.linalg.inv(xf.T @ xf)
    return _Ols(params[None, :], cov[None, :, :], np.array([df]), ~free[None, :])


def _estimates(ols: _Ols, i: int) -> list[Estimate]:
    """Parameter i of every group, with a Student-t 95% CI (None where held at 0 or with df = 0)."""
    import numpy as np

    est = ols.params[:, i]
    se = np.sqrt(np.maximum(ols.cov[:, i, i], 0.0))  # NaN stays NaN
    half = t95s(np.maximum(ols.df, 1)) * se
    return [Estimate(*row) for row in zip(est.tolist(), *map(_none, (se, est - half, est + half)), strict=True)]


def _none(a: np.ndarray) -> list[float | None]:
    """NaN (undefined) -> None, as a plain list."""
    return [None if v != v else v for v in a.tolist()]


def _speedup_r2(g: np.ndarray, k: int, n: np.ndarray, speedup: np.ndarray, amdahl: np.ndarray,
                usl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R² on the speedup scale of both laws for groups 0..k-1 (points n = N / baseline, group g): NaN where
    the group's speedups do not vary."""
    import numpy as np

    s, a, b = amdahl[g, 0], usl[g, 0], usl[g, 1]
    count = np.bincount(g, minlength=k)
    mean = np.bincount(g, speedup, minlength=k) / np.maximum(count, 1)
    sst = np.bincount(g, (speedup - mean[g]) ** 2, minlength=k)
    out = []
    for fitted in (1 / (s + (1 - s) / n), n / (1 + a * (n - 1) + b * n * (n - 1))):
        ssr = np.bincount(g, (speedup - fitted) ** 2, minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            out.append(np.where(sst > 1e-12 * np.maximum(mean * mean, 1.0), 1 - ssr / sst, np.nan))
    return out[0], out[1]


def _assemble(base: np.ndarray, counts: list[tuple[int, ...]], n_points: list[int], amdahl: _Ols,
              usl: _Ols, r2: tuple[np.ndarray, np.ndarray], superlinear: np.ndarray) -> list[ScalingFit]:
    """The result dataclasses of k groups: estimates, peak, the extrapolated prediction and the notes
    (vectorised). USL's peak and prediction are None where the law has no test (n_points <= 2)."""
    import numpy as np

    s, alpha, beta = amdahl.params[:, 0], usl.params[:, 0], usl.params[:, 1]
    testable = np.asarray(n_points) > 2
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = np.where(testable & (beta > 0) & (alpha < 1), base * np.sqrt((1 - alpha) / beta), np.nan)
        target = 2 * np.array([c[-1] for c in counts], dtype=np.int64)
        n2 = target / base
        x1, x2 = n2 - 1, n2 * (n2 - 1)
        denom = 1 + alpha * x1 + beta * x2
        # CI of the fitted mean of y = n/S - 1 (linear in alpha, beta), mapped through S = n / (1 + y); a held
        # parameter is a constant 0 (its variance NaN counts as 0), the CI needs the free ones' covariance.
        cov = np.nan_to_num(usl.cov)
        var = x1 * x1 * cov[:, 0, 0] + 2 * x1 * x2 * cov[:, 0, 1] + x2 * x2 * cov[:, 1, 1]
        half = np.where(usl.df > 0, t95s(np.maximum(usl.df, 1)) * np.sqrt(np.maximum(var, 0.0)), np.nan)
        ok = testable & (denom - half > 0)
        low, high = np.where(ok, n2 / (denom + half), np.nan), np.where(ok, n2 / (denom - half), np.nan)
        usl_s = np.where(testable & (denom > 0), n2 / denom, np.nan)
        amdahl_denom = s + (1 - s) / n2
        amdahl_s = np.where(amdahl_denom > 0, 1 / amdahl_denom, np.nan)
    preds = [Prediction(t, u, lo, hi, a, extrapolation=True) for t, u, lo, hi, a in
             zip(target.tolist(), *map(_none, (usl_s, low, high, amdahl_s)), strict=True)]
    notes = []
    for k, held_a, held_b, held_s in zip(n_points, usl.held[:, 0].tolist(), usl.held[:, 1].tolist(),
                                         amdahl.held[:, 0].tolist(), strict=True):
        why = [NO_TEST.format(k=k)] if k <= 2 else []
        why += [USL_DOES_NOT_DESCRIBE] if held_a else [USL_IS_AMDAHL] if held_b else []
        why += [AMDAHL_DOES_NOT_DESCRIBE] if held_s else []
        notes.append(tuple(why))
    return [ScalingFit(*row) for row in zip(
        base.astype(int).tolist(), counts, n_points, _estimates(amdahl, 0), _none(r2[0]),
        _estimates(usl, 0), _estimates(usl, 1), _none(r2[1]), _none(peak), preds, notes,
        superlinear.tolist(), strict=True)]


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
    fitted, bases, counts, n_points, amdahl, usl, r2 = _fit_groups(group, len(starts), gpus, base, speedup, valid)
    superlinear = _superlinear(tab, group, gpus, base, fitted)
    names = [c for c in tab.column_names if c not in MEASURES]
    factors = _factor_rows(tab.select(names).take(starts[fitted])) if names else [{} for _ in fitted]
    fits = _assemble(bases, counts, n_points, amdahl, usl, r2, superlinear)
    ids = cfg[starts].tolist()
    return FitReport(
        tuple(ConfigFit(ids[g], f, r) for g, f, r in zip(fitted.tolist(), factors, fits, strict=True)),
        tuple(ids[g] for g in np.flatnonzero(~np.isin(np.arange(len(starts)), fitted)).tolist()),
    )


def _superlinear(tab: Any, group: np.ndarray, gpus: np.ndarray, base: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """Per fitted group: does a point's efficiency exceed 1 beyond its CI (ci95_low / baseline images/s /
    (N / baseline) > 1)? All False for a view without those columns."""
    import numpy as np

    if not {"ci95_low", "baseline_images_per_sec"} <= set(tab.column_names):
        return np.zeros(len(fitted), bool)
    low, ref = (tab.column(c).to_numpy(zero_copy_only=False).astype(np.float64)
                for c in ("ci95_low", "baseline_images_per_sec"))
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.nan_to_num(low / ref / (gpus / base)) > 1
    hit = np.zeros(int(group.max()) + 1 if len(group) else 0, bool)
    np.logical_or.at(hit, group[above], True)
    return hit[fitted]


def _factor_rows(tab: Any) -> list[dict[str, Any]]:
    """Rows of an Arrow table as dicts; a MAP column (tags) becomes a dict, not a list of pairs."""
    import pyarrow as pa

    maps = [f.name for f in tab.schema if pa.types.is_map(f.type)]
    rows = tab.to_pylist()
    for row in rows:
        for name in maps:
            row[name] = None if row[name] is None else dict(row[name])
    return rows


def _fit_groups(group: np.ndarray, k: int, gpus: np.ndarray, base: np.ndarray, speedup: np.ndarray,
                valid: np.ndarray) -> tuple[Any, ...]:
    """Both laws for the groups 0..k-1 that have >= 2 non-baseline device counts.

    Returns (fitted group indices, their baselines, device counts (baseline first), n_points, amdahl _Ols,
    usl _Ols, speedup-scale R²s), rows aligned with the fitted indices. Rows are sorted by (group, num_devices).
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
    amdahl = _nnls_origin(g, len(fitted), t["amdahl_y"], [t["amdahl_x"]], npts)
    usl = _nnls_origin(g, len(fitted), t["usl_y"], [t["usl_x1"], t["usl_x2"]], npts)
    r2 = _speedup_r2(g, len(fitted), gpus[keep] / base[keep], speedup[keep], amdahl.params, usl.params)
    bases = np.zeros(len(fitted))
    bases[g] = base[keep]
    counts: list[list[int]] = [[int(b)] for b in bases.tolist()]
    distinct = np.r_[True, (g[1:] != g[:-1]) | (gpus[keep][1:] != gpus[keep][:-1])] if len(g) else g > 0
    for gi, ni in zip(g[distinct].tolist(), gpus[keep][distinct].tolist(), strict=True):
        counts[gi].append(int(ni))
    return fitted, bases, [tuple(c) for c in counts], npts.tolist(), amdahl, usl, r2


def _nnls_origin(g: np.ndarray, k: int, y: np.ndarray, xs: list[np.ndarray], npts: np.ndarray) -> _Ols:
    """Per-group least squares of y on 1 or 2 regressors without a constant, parameters >= 0, groups 0..k-1.

    The unconstrained optimum (X'X)^-1 X'y where it is feasible; else the feasible optimum of each face
    (every subset of free parameters, the others 0) with the least SSR, which is the NNLS solution of a
    convex quadratic. sigma² = SSR / (n - p), p the law's parameter count; cov = sigma² (X_f'X_f)^-1 on
    the free parameters. Residuals are formed explicitly so a near-exact fit keeps its accuracy.
    """
    import itertools

    import numpy as np

    p = len(xs)
    xx = np.stack([np.stack([np.bincount(g, xs[i] * xs[j], minlength=k) for j in range(p)], -1)
                   for i in range(p)], -2)  # (k, p, p)
    xy = np.stack([np.bincount(g, xs[i] * y, minlength=k) for i in range(p)], -1)  # (k, p)
    yy = np.bincount(g, y * y, minlength=k)
    # faces, the full one first; every fitted group has >= 2 distinct n != 1, so each sub-X'X is regular
    faces = [list(c) for r in range(p, 0, -1) for c in itertools.combinations(range(p), r)]
    params, free = np.zeros((k, p)), np.zeros((k, p), bool)
    best = yy.copy()  # the empty face: every parameter 0
    feasible_full = np.zeros(k, bool)
    for face in faces:
        sub = np.zeros((k, p))
        sub[:, face] = np.einsum("kij,kj->ki", np.linalg.inv(xx[:, face][:, :, face]), xy[:, face])
        ssr = yy - 2 * (sub * xy).sum(1) + np.einsum("ki,kij,kj->k", sub, xx, sub)
        feasible = np.all(sub[:, face] >= -FEASIBLE_TOL, axis=1)
        if len(face) == p:
            take = feasible_full = feasible
        else:
            take = ~feasible_full & feasible & (ssr < best)
        params[take], best[take] = np.maximum(sub[take], 0.0), ssr[take]
        free[take] = np.isin(np.arange(p), face)
    free[feasible_full] = True
    resid = y - sum(params[g, i] * xs[i] for i in range(p))
    ssr = np.bincount(g, resid * resid, minlength=k)
    df = npts - p
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma2 = np.where(df > 0, ssr / df, np.nan)
    cov = np.full((k, p, p), np.nan)
    for face in faces:
        rows = np.all(free == np.isin(np.arange(p), face), axis=1)
        inv = np.linalg.inv(xx[rows][:, face][:, :, face])
        block = sigma2[rows, None, None] * inv
        for a, i in enumerate(face):
            for b, j in enumerate(face):
                cov[rows, i, j] = block[:, a, b]
    return _Ols(params, cov, df, ~free)
