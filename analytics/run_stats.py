"""Per-run steady-state statistics from the step series: warm-up cut, stability, and an honest CI.

One row per run (``run_id``) that has rows in ``steps``; a run without step rows is absent, so
``runs LEFT JOIN run_stats USING (run_id)`` gives it NULLs. The series of a run is its per-interval
rates (``steps.interval_images_per_sec``, images/s over that interval alone; NOT the printed
``images_per_sec``, which tf_cnn prints as a cumulative mean) of its lowest rank, in step order.

Columns (see :data:`SCHEMA`):
- ``n_intervals``: usable intervals (finite rates of the lowest rank);
- ``warmup_intervals``: intervals cut as warm-up by MSER-5 (a multiple of 5);
- ``steady_mean``: mean rate after the cut, images/s;
- ``cv``: sample standard deviation / mean of the steady rates (dimensionless);
- ``stable``: ``cv <= 0.02``, the stability criterion of the Dell EMC benchmark studies;
- ``ci95_low``/``ci95_high``: 95% CI of the steady mean, images/s, by non-overlapping batch means.

Everything but ``n_intervals`` is NULL below :data:`MIN_INTERVALS` intervals (MSER-5 needs at least two
batches of five), and the CI below :data:`MIN_CI_RATES` steady rates (below).

MSER-5 (White 1997, "An effective truncation heuristic for bias reduction in simulation output",
Simulation 69(6); White, Cobb & Spratt 2000, Proc. Winter Simulation Conference): form the k = floor(n/5)
means Z_1..Z_k of consecutive batches of 5 observations (a partial last batch is ignored); for a cut of d
batches, MSER(d) = sum_{j>d} (Z_j - mean(Z_{d+1..k}))^2 / (k - d)^2, i.e. the squared standard error of
the mean of the batch means left; d* minimises it over the first half, 0 <= d < k/2 (strictly, so at least
two batch means remain and the statistic is never a trivial 0); ties go to the smallest d. The warm-up is
5*d* intervals; the steady state is every interval after it (the partial last batch included).

CI: non-overlapping batch means (Schmeiser 1982, "Batch size effects in the analysis of simulation output",
Operations Research 30(3)): the steady rates form 5 batches of floor(m/5) consecutive rates (the first m mod 5
rates, nearest the warm-up, are left out), and the CI is the Student t-interval of the 5 batch means (4 df).
Few large batches absorb the autocorrelation of step rates that a per-step standard error ignores. Measured
(tests/analytics/test_coverage.py): on independent rates it covers 95% at every m; on an AR(1) series with
phi = 0.5, 81% at m = 5, 86% at 10, 92.4% at 30, 93.3% at 50, 94% at 100 and 95.5% at 300, so a CI needs
MIN_CI_RATES = 50 steady rates and is NULL below. The Newey-West HAC interval this replaced covered 88% on independent rates at m = 5,
and 77% (m = 10) to 92% (m = 300) on that AR(1) series.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from bench.analytics.intervals import t95

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa

MIN_INTERVALS = 10  #: fewer usable intervals than this: every statistic but n_intervals is NULL
BATCH = 5  #: MSER-5 batch size
STABLE_CV = 0.02  #: Dell EMC studies: a run is stable when its CV is at most 2%

# The lowest rank of each run that has usable rates; NULL ranks (single process) count as one rank.
_INTERVALS_SQL = """
SELECT run_id, interval_images_per_sec AS rate
FROM steps
WHERE run_id IS NOT NULL AND isfinite(interval_images_per_sec)
QUALIFY rank IS NOT DISTINCT FROM min(rank) OVER (PARTITION BY run_id)
ORDER BY run_id, step NULLS LAST, line_no NULLS LAST
"""
_RUN_IDS_SQL = "SELECT DISTINCT run_id FROM steps WHERE run_id IS NOT NULL ORDER BY run_id"


def schema() -> pa.Schema:
    """Arrow schema of the run_stats table."""
    import pyarrow as pa

    return pa.schema([
        ("run_id", pa.string()),
        ("n_intervals", pa.int64()),
        ("warmup_intervals", pa.int64()),
        ("steady_mean", pa.float64()),
        ("cv", pa.float64()),
        ("stable", pa.bool_()),
        ("ci95_low", pa.float64()),
        ("ci95_high", pa.float64()),
    ])


def compute_run_stats(con: duckdb.DuckDBPyConnection) -> pa.Table:
    """One row per run of the ``steps`` view on ``con`` (columns of :func:`schema`), sorted by run_id."""
    import numpy as np
    import pyarrow as pa

    ids = [r[0] for r in con.execute(_RUN_IDS_SQL).fetchall()]
    tab = con.sql(_INTERVALS_SQL).to_arrow_table()
    run_col = tab.column("run_id").to_numpy(zero_copy_only=False).astype(str)
    rates = tab.column("rate").to_numpy().astype(np.float64)
    starts = np.flatnonzero(np.r_[True, run_col[1:] != run_col[:-1]]) if len(rates) else np.zeros(0, int)
    ends = np.r_[starts[1:], len(rates)][: len(starts)]
    found = {str(run_col[s]): (int(s), int(e)) for s, e in zip(starts, ends, strict=True)}
    cols: dict[str, list[Any]] = {f.name: [] for f in schema()}
    steady: list[np.ndarray | None] = []
    for run_id in ids:
        s, e = found.get(run_id, (0, 0))
        row = _series_stats(rates[s:e])
        cols["run_id"].append(run_id)
        for name, value in row.items():
            cols[name].append(value)
        cut = row["warmup_intervals"]
        steady.append(None if cut is None else rates[s + cut:e])
    cols["ci95_low"], cols["ci95_high"] = batch_means_ci(steady)
    return pa.table(cols, schema=schema())


def _series_stats(x: np.ndarray) -> dict[str, Any]:
    """n_intervals, warmup_intervals, steady_mean, cv, stable of one run's rates (CI filled in later)."""
    n = len(x)
    if n < MIN_INTERVALS:
        return {"n_intervals": n, "warmup_intervals": None, "steady_mean": None, "cv": None, "stable": None}
    cut = mser5(x)
    y = x[cut:]
    mean = float(y.mean())
    cv = float(y.std(ddof=1)) / mean if mean > 0 else None
    return {"n_intervals": n, "warmup_intervals": cut, "steady_mean": mean, "cv": cv,
            "stable": None if cv is None else cv <= STABLE_CV}


def mser5(x: np.ndarray) -> int:
    """Warm-up length (number of leading observations, a multiple of 5) chosen by MSER-5; see module doc.

    ``x`` needs at least 10 observations (two batches); raises ValueError otherwise.
    """
    import numpy as np

    k = len(x) // BATCH
    if k < 2:
        raise ValueError(f"MSER-5 needs at least {2 * BATCH} observations, got {len(x)}")
    z = np.asarray(x[: k * BATCH], dtype=np.float64).reshape(k, BATCH).mean(axis=1)
    # Suffix sums give every candidate cut in one pass; centring first keeps the subtraction accurate.
    z = z - z.mean()
    s1 = np.cumsum(z[::-1])[::-1]
    s2 = np.cumsum((z * z)[::-1])[::-1]
    remaining = k - np.arange(k)
    ss = np.maximum(s2 - s1 * s1 / remaining, 0.0)
    mser = ss / remaining**2
    first_half = (k + 1) // 2  # d < k/2
    return int(np.argmin(mser[:first_half])) * BATCH


#: batches of the CI (see the module doc)
CI_BATCHES = 5
#: steady rates a CI needs: from 50 on, batches of 10 or more absorb an AR(1) correlation of 0.5 (93-95%
#: coverage measured); with fewer, no interval from one run can know its correlation, and none is given
MIN_CI_RATES = 50


def batch_means_ci(series: list[np.ndarray | None]) -> tuple[list[float | None], list[float | None]]:
    """95% CIs (low, high lists) of the mean of each series by non-overlapping batch means (module doc);
    NULL for ``None`` or fewer than MIN_CI_RATES points."""
    import numpy as np
    t = t95(CI_BATCHES - 1)
    low: list[float | None] = []
    high: list[float | None] = []
    for y in series:
        if y is None or len(y) < MIN_CI_RATES:
            low.append(None)
            high.append(None)
            continue
        b = CI_BATCHES
        size = len(y) // b
        z = np.asarray(y[len(y) - b * size:], dtype=np.float64).reshape(b, size).mean(axis=1)
        mean, half = float(z.mean()), t * float(z.std(ddof=1)) / math.sqrt(b)
        low.append(mean - half)
        high.append(mean + half)
    return low, high
