"""The statistics of a set of ratios A / B (``bench compare``, the report's leaderboard and ratio tables):
median, geometric mean with a bootstrap CI, and a paired TOST for equivalence. See bench.analytics.compare's
docstring for the decisions (resamples, seed, bounds)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

N_BOOT = 10_000
SEED = 2017
ALPHA = 0.05
MIN_TOST_N = 3


@dataclass(frozen=True)
class Equivalence:
    """Paired TOST of |log ratio| < log(1 + margin). ``p_value`` is None when n < MIN_TOST_N."""

    margin: float
    verdict: str  # "yes" | "no" | "not enough data"
    p_value: float | None
    n: int


@dataclass(frozen=True)
class Summary:
    """Statistics of the ratios; every field is None when n == 0 (ci95 also when n < 2)."""

    n: int
    median: float | None
    geomean: float | None
    min: float | None
    max: float | None
    ci95_low: float | None
    ci95_high: float | None
    equivalence: Equivalence | None
    n_baseline_excluded: int = 0


def summarize(ratios: Sequence[float], equivalence: float | None = None, *, n_baseline_excluded: int = 0) -> Summary:
    """n, median, geometric mean, min, max and bootstrap CI of the ratios (all > 0), plus the TOST."""
    import numpy as np

    n = len(ratios)
    eq = None if equivalence is None else equivalence_test(ratios, equivalence)
    if n == 0:
        return Summary(0, None, None, None, None, None, None, eq, n_baseline_excluded)
    logs = np.log(np.asarray(ratios, dtype=float))
    lo, hi = bootstrap_geomean_ci(logs) if n >= 2 else (None, None)
    return Summary(n, float(np.median(ratios)), float(np.exp(logs.mean())), float(min(ratios)), float(max(ratios)),
                   lo, hi, eq, n_baseline_excluded)


def bootstrap_geomean_ci(logs: np.ndarray, n_boot: int = N_BOOT, seed: int = SEED) -> tuple[float, float]:
    """95% percentile-bootstrap interval of exp(mean(logs)): ``n_boot`` resamples with replacement.

    Resamples are drawn in chunks of about 2 million indices to bound memory; the same seed and
    input always give the same interval.
    """
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(logs)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, n_boot, chunk):
        k = min(chunk, n_boot - start)
        means[start:start + k] = logs[rng.integers(0, n, size=(k, n))].mean(axis=1)
    lo, hi = np.exp(np.percentile(means, [2.5, 97.5]))
    return float(lo), float(hi)


def equivalence_test(ratios: Sequence[float], margin: float) -> Equivalence:
    """Paired TOST: is the mean log ratio within ±log(1 + margin)? See the module docstring."""
    import numpy as np

    n = len(ratios)
    if n < MIN_TOST_N:
        return Equivalence(margin, "not enough data", None, n)
    logs = np.log(np.asarray(ratios, dtype=float))
    bound = math.log1p(margin)
    if np.ptp(logs) == 0:  # identical ratios: no spread, the t statistic is undefined; the answer is exact
        p = 0.0 if abs(logs[0]) < bound else 1.0
    else:
        from statsmodels.stats.weightstats import ttost_paired

        # x1 - x2 = log a - log b = log ratio; zeros as x2 keep the differences exactly the log ratios
        p = float(ttost_paired(logs, np.zeros(n), -bound, bound)[0])
    return Equivalence(margin, "yes" if p < ALPHA else "no", p, n)
