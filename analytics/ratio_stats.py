"""The statistics of a set of ratios A / B (``bench compare``, the report's leaderboard and ratio tables):
median, geometric mean with its 95% CI, and a paired TOST for equivalence.

The CI is a Student t-interval on the log ratios, exponentiated: exp(mean ± t(0.975, n-1) · sd / sqrt(n)).
It is exact when the log ratios are normal (ratios lognormal) at every n >= 2, so at n = 2 it is honestly
wide (t = 12.7), where a percentile bootstrap gives [min, max] and covers about half the time
(tests/analytics/test_coverage.py simulates both). No CI for one pair. See bench.analytics.compare's
docstring for the equivalence bounds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from bench.analytics.intervals import t95

if TYPE_CHECKING:
    import numpy as np

#: How the geometric mean's CI is made, as the method sections say it.
CI_METHOD = "Student t-interval on the log ratios (n-1 degrees of freedom), exponentiated; none for one pair"
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
    """n, median, geometric mean, min, max and the t CI of the geometric mean (all ratios > 0), plus the TOST."""
    import numpy as np

    n = len(ratios)
    eq = None if equivalence is None else equivalence_test(ratios, equivalence)
    if n == 0:
        return Summary(0, None, None, None, None, None, None, eq, n_baseline_excluded)
    logs = np.log(np.asarray(ratios, dtype=float))
    lo, hi = geomean_ci(logs) if n >= 2 else (None, None)
    return Summary(n, float(np.median(ratios)), float(np.exp(logs.mean())), float(min(ratios)), float(max(ratios)),
                   lo, hi, eq, n_baseline_excluded)


def geomean_ci(logs: np.ndarray) -> tuple[float, float]:
    """95% CI of exp(mean(logs)): a t-interval on the logs (n >= 2), exponentiated."""
    import numpy as np
    n = len(logs)
    half = t95(n - 1) * float(np.std(logs, ddof=1)) / math.sqrt(n)
    mean = float(logs.mean())
    return math.exp(mean - half), math.exp(mean + half)


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


class _HasRatio(Protocol):
    @property
    def ratio(self) -> float: ...


P = TypeVar("P", bound=_HasRatio)

#: A pair far below the others of its comparison: a broken run or system, not what the factor does.
SUSPECT_RULE = ("a pair whose ratio is below half of the median ratio of its comparison (a leaderboard row, a bench "
                "compare) and more than three robust standard deviations (1.4826 x the median absolute deviation of "
                "the log ratios) below it is flagged as suspect and left out of the geometric mean (--keep-suspects "
                "keeps it)")


def suspect_pairs(pairs: Sequence[P]) -> tuple[P, ...]:
    """The pairs (anything with a ``ratio``) ``SUSPECT_RULE`` flags (none among fewer than 5 pairs: too few to
    say what is usual): what the leaderboard and ``bench compare`` leave out of a geometric mean."""
    if len(pairs) < 5:
        return ()
    logs = [math.log(p.ratio) for p in pairs]
    mid = statistics.median(logs)
    spread = 1.4826 * statistics.median(abs(v - mid) for v in logs)
    return tuple(p for p, v in zip(pairs, logs, strict=True)
                 if v < mid - math.log(2) and (spread == 0 or (mid - v) / spread > 3))
