"""bench check's memory: whether runs are slower than the reference at all, and whether tonight is back from a
regression nobody accepted (bench.analytics.check's docstring, "Memory")."""

from __future__ import annotations

import math

import numpy as np

from bench.analytics.gate_noise import recent_noise

#: tonight is back from a regression nobody accepted when its slowdown is less than this share of it, and faster
#: than the regression by BACK_Z standard errors (one-sided p < 0.001) where tonight's level is judged, by
#: BACK_Z_NIGHTS where tonight, or tonight with the night before, is (returned)
BACK = 1 / 3
BACK_Z = 3.09
BACK_Z_NIGHTS = 4.5


def still(change: float | None, before: float | None) -> bool:
    """Whether tonight's ``change`` is not back from the slowdown ``before``: at least BACK of it. A ratio alone,
    looser than ``back`` (which also wants tonight faster than the slowdown by BACK_Z standard errors) on purpose:
    bench check's pair path judges a failure not yet remembered, so a night below BACK of it is let go at once."""
    if not before or change is None:
        return False
    return math.log1p(change) / math.log1p(before) >= BACK


def noise_of(history: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(sigma, degrees of freedom) of one run: recent_noise of the log values ``history``, or where it holds fewer
    than 3 runs, the reference ``b``'s standard deviation."""
    return recent_noise(history) if len(history) >= 3 else (float(np.std(b, ddof=1)), float(len(b) - 1))


def slower(logs: np.ndarray, shortest: int | None, b: np.ndarray, noise: tuple[float, float], lower: bool,
           alpha: float) -> bool:
    """Whether the runs ``logs`` (log values, tonight's last) are slower than the reference ``b`` at ``alpha``
    (one-sided t with ``noise``, as bench check's rule tests a look): all of them, or, with ``shortest``, any of
    their newest runs from ``shortest`` on (the newest k, for every k)."""
    from scipy.special import stdtr

    sigma, df = noise
    if sigma <= 0 or not len(logs):
        return False
    k = np.arange(1, len(logs) + 1)
    means = np.cumsum(logs[::-1]) / k  # the newest k runs' mean, for every k
    if shortest is None:
        means, k = means[-1:], k[-1:]
    else:
        means, k = means[shortest - 1:], k[shortest - 1:]
    slow = (means - b.mean()) * (1.0 if lower else -1.0)
    p = stdtr(df, -slow / (sigma * np.sqrt(1 / k + 1 / len(b))))
    return bool(np.any(p < alpha))


def returned(runs: np.ndarray, c: np.ndarray, ref: float, sigma: float, lower: bool) -> bool:
    """Whether tonight (log values ``c``) is back from the regression whose runs before tonight are ``runs`` (the
    night before's last), the reference's mean log ``ref``: tonight alone, or tonight and the night before
    together from what the runs before them show, by BACK_Z_NIGHTS standard errors. (A -3% step whose first five
    nights read -6% at 2% noise has one night in three below a third of that and over 3.09 standard errors from
    it, and bench changes' levels are chosen where they read most; a -6% regression fixed at 1% noise is back in
    a night.)"""
    sign = 1.0 if lower else -1.0
    if back(sign * (float(c.mean()) - ref), sign * (float(runs.mean()) - ref),
            sigma * math.sqrt(1 / len(c) + 1 / len(runs)), BACK_Z_NIGHTS):
        return True
    if len(runs) < 2:
        return False
    now, then = np.concatenate((runs[-1:], c)), runs[:-1]
    return back(sign * (float(now.mean()) - ref), sign * (float(then.mean()) - ref),
                sigma * math.sqrt(1 / len(now) + 1 / len(then)), BACK_Z_NIGHTS)


def back(tonight: float, slow: float, se: float, z: float = BACK_Z) -> bool:
    """Whether tonight's slowdown (log) is back from a regression's ``slow``: less than BACK of it, and faster
    than it by ``z`` times ``se``, the difference's standard error (one night of 2% noise on a 3% level is
    often below a third of it without having left it)."""
    return tonight < BACK * slow and slow - tonight > z * se
